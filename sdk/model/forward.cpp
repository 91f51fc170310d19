// The decode step, top to bottom.
//
//   plan = memory.begin(batch)                 positions, cache slots, lengths -> step buffer
//   sparse.begin(batch)                        [a decode row's page plan -> step buffer]
//   x = embed(tokens)
//   for each layer:
//     xn = rmsnorm(x) · attn_norm
//     q, k, v = xn·Wq (+bq), xn·Wk (+bk), xn·Wv (+bv)      [qwen3: per-head rmsnorm on q, k]
//     kv = memory.write(q, k, v)               rotate q, k to their positions; keep K/V
//                                              [a decode row's newest page summarized with it]
//     summaries.refresh(kv)                    [query-aware sparsity: pages follow the keys;
//                                               PRR calibrates its predictor on prefill rows]
//     att, lse = a decode row under sparsity:  sparse.attend(q, kv)     Quest / vAttention
//                                              [PRR: predicted pages first, then the repair;
//                                               Retro: the window's past rows corrected]
//                otherwise:                    attention(q, kv) (+ key mass for the cascade)
//     memory.observe()                         [cascade: EMA scores, push]
//     x += att·Wo
//     xn = rmsnorm(x) · ffn_norm
//     x += (silu(xn·Wgate) * xn·Wup)·Wdown
//   logits = (rmsnorm(x) · output_norm)·Woutᵀ      for the last n_logit_rows rows
//   token = sample(logits)                         [when asked]
//   memory.commit(); sparse.commit()
//
// A step whose batch the memory marks with a shape key (a decode step) is handed to the
// backend as one recordable unit — the CUDA backend replays it as one graph — unless its
// sparse attention selects on the host.
#include "model/forward.h"

#include <cmath>
#include <vector>

#include "core/error.h"

namespace sa {

workspace::workspace(backend& be, const hparams& hp, int64_t rows, int64_t logit_rows)
    : max_rows(rows), max_logit_rows(logit_rows) {
  const int64_t q_dim = int64_t{hp.n_heads} * hp.head_dim;
  const int64_t kv_dim = int64_t{hp.n_kv_heads} * hp.head_dim;
  x = new_f32_tensor(be, buffers_, hp.n_embd, rows);
  xn = new_f32_tensor(be, buffers_, hp.n_embd, rows);
  q = new_f32_tensor(be, buffers_, q_dim, rows);
  k = new_f32_tensor(be, buffers_, kv_dim, rows);
  v = new_f32_tensor(be, buffers_, kv_dim, rows);
  att = new_f32_tensor(be, buffers_, q_dim, rows);
  lse = new_f32_tensor(be, buffers_, hp.n_heads, rows);
  ffn = new_f32_tensor(be, buffers_, hp.n_ff, rows);
  logits = new_f32_tensor(be, buffers_, hp.n_vocab, logit_rows);
  token = new_tensor(be, buffers_, dtype::i32, 1, 1);
}

uint64_t forward(const forward_env& e, const batch& b, int64_t n_logit_rows,
                 const token_draw* draw) {
  backend& be = e.be;
  const hparams& hp = e.hp;
  const device_weights& w = e.w;
  workspace& ws = e.ws;
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  if (n == 0 || n > ws.max_rows || n_logit_rows < 0 || n_logit_rows > n ||
      n_logit_rows > ws.max_logit_rows || (draw && n_logit_rows == 0))
    fail(SA_ERR_INTERNAL, "forward: %lld rows (max %lld), %lld logit rows", static_cast<long long>(n),
         static_cast<long long>(ws.max_rows), static_cast<long long>(n_logit_rows));

  e.step.clear();
  const batch_meta m = e.mem.begin(b, e.step);
  const tensor ids = e.step.put(b.tokens);
  const tensor u = draw ? e.step.put_double(draw->u) : tensor{};
  const bool sparse_row = e.sparse && (b.kind == batch_kind::decode || b.kind == batch_kind::retro);
  const uint64_t sparse_key = e.sparse ? e.sparse->begin(b.kind, m) : 0;
  e.step.flush();

  const tensor x = ws.x.row_range(0, n), xn = ws.xn.row_range(0, n);
  const tensor q = ws.q.row_range(0, n), k = ws.k.row_range(0, n), v = ws.v.row_range(0, n);
  const tensor att = ws.att.row_range(0, n), lse = ws.lse.row_range(0, n);
  const tensor ffn = ws.ffn.row_range(0, n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));

  auto layers = [&] {
    be.embed(w.token_embd, ids, x);
    for (int32_t l = 0; l < hp.n_layers; ++l) {
      const device_layer& L = w.layers[static_cast<size_t>(l)];

      // ---- attention ----
      const tensor qkv_w[] = {L.wq, L.wk, L.wv}, qkv[] = {q, k, v};
      be.norm_matmul_n({x, L.attn_norm, hp.rms_eps, xn}, qkv_w, qkv);
      if (hp.qkv_bias) {
        be.add_bias(q, L.bq);
        be.add_bias(k, L.bk);
        be.add_bias(v, L.bv);
      }
      if (hp.qk_norm) {
        be.rmsnorm(q.as_2d(hp.head_dim), L.q_norm, hp.rms_eps, q.as_2d(hp.head_dim));
        be.rmsnorm(k.as_2d(hp.head_dim), L.k_norm, hp.rms_eps, k.as_2d(hp.head_dim));
      }
      const auto page = e.sparse ? e.sparse->newest_page(l, m) : std::nullopt;
      const kv_view kv = e.mem.write(l, q, k, v, m, page ? &*page : nullptr);
      if (e.sparse) {
        e.sparse->refresh(l, kv, m);
        if (b.kind == batch_kind::prefill) e.sparse->observe_prefill(l, q, m);
      }
      if (sparse_row)
        e.sparse->attend(l, q, kv, m, att, lse);
      else
        be.attention(q, kv, hp.n_heads, hp.n_kv_heads, hp.head_dim, m.kv_len, m.kv_bound, scale,
                     att, lse, e.mem.mass(l));
      e.mem.observe(l);
      be.matmul_add(L.wo, att, x);

      // ---- feed-forward ----
      be.norm_matmul_swiglu(L.gate, L.up, {x, L.ffn_norm, hp.rms_eps, xn}, ffn);
      be.matmul_add(L.down, ffn, x);
    }
    if (n_logit_rows > 0) {
      const tensor last = x.row_range(n - n_logit_rows, n_logit_rows);
      const tensor last_n = xn.row_range(n - n_logit_rows, n_logit_rows);
      const tensor logits = ws.logits.row_range(0, n_logit_rows);
      be.norm_matmul(w.output, {last, w.output_norm, hp.rms_eps, last_n}, logits);
      if (draw) be.sample(logits.row_range(n_logit_rows - 1, 1), draw->config, u, ws.token);
    }
  };
  // Recordable: the memory marked the batch (all that varies is in the step buffer) and no
  // host-side selection runs in it. The key also covers what else shapes the launches.
  const uint64_t key = (sparse_row && sparse_key == 0) || m.shape_key == 0
                           ? 0
                           : m.shape_key ^ (static_cast<uint64_t>(n_logit_rows) << 56) ^
                                 (draw ? uint64_t{1} << 62 : 0) ^ (sparse_key << 52);
  if (key)
    be.run_step(key, layers);
  else
    layers();
  e.mem.commit();
  if (e.sparse) e.sparse->commit();

  const uint64_t key_bytes = e.mem.key_bytes();
  if (sparse_row && e.sparse->figures_pending()) return k_kv_read_deferred;
  if (sparse_row) return e.sparse->keys_read() * key_bytes / static_cast<uint64_t>(hp.n_heads);
  return static_cast<uint64_t>(m.keys_read) * static_cast<uint64_t>(hp.n_layers) * key_bytes;
}

}  // namespace sa

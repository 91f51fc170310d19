// The decode step, top to bottom.
//
//   x = embed(tokens)
//   for each layer:
//     xn = rmsnorm(x) · attn_norm
//     q, k, v = xn·Wq (+bq), xn·Wk (+bk), xn·Wv (+bv)     [qwen3: per-head rmsnorm on q, k]
//     q = rope(q, positions from the memory)
//     att, lse = memory.attend(q, k, v)     keeps k, v; attention over the memory + the batch

//     x += att·Wo
//     xn = rmsnorm(x) · ffn_norm
//     x += (silu(xn·Wgate) * xn·Wup)·Wdown
//   logits = (rmsnorm(x) · output_norm)·Woutᵀ      for the last n_logit_rows rows
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
  gate = new_f32_tensor(be, buffers_, hp.n_ff, rows);
  up = new_f32_tensor(be, buffers_, hp.n_ff, rows);
  logits = new_f32_tensor(be, buffers_, hp.n_vocab, logit_rows);
}

uint64_t forward(backend& be, const hparams& hp, const device_weights& w, kv_memory& mem,
                 workspace& ws, std::span<const int32_t> tokens, int64_t n_logit_rows) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0 || n > ws.max_rows || n_logit_rows < 0 || n_logit_rows > n ||
      n_logit_rows > ws.max_logit_rows)
    fail(SA_ERR_INTERNAL, "forward: %lld rows (max %lld), %lld logit rows", static_cast<long long>(n),
         static_cast<long long>(ws.max_rows), static_cast<long long>(n_logit_rows));

  const tensor x = ws.x.row_range(0, n), xn = ws.xn.row_range(0, n);
  const tensor q = ws.q.row_range(0, n), k = ws.k.row_range(0, n), v = ws.v.row_range(0, n);
  const tensor att = ws.att.row_range(0, n), lse = ws.lse.row_range(0, n);
  const tensor gate = ws.gate.row_range(0, n), up = ws.up.row_range(0, n);
  rope_params rope = hp.rope;
  if (!w.rope_freqs.empty()) rope.freq_factors = w.rope_freqs.data();
  std::vector<int32_t> positions;
  mem.begin(n, positions);
  uint64_t kv_bytes_read = 0;

  be.embed(w.token_embd, tokens, x);

  for (int32_t l = 0; l < hp.n_layers; ++l) {
    const device_layer& L = w.layers[static_cast<size_t>(l)];

    // ---- attention ----
    be.rmsnorm(x, L.attn_norm, hp.rms_eps, xn);
    be.matmul(L.wq, xn, q);
    be.matmul(L.wk, xn, k);
    be.matmul(L.wv, xn, v);
    if (hp.qkv_bias) {
      be.add_bias(q, L.bq);
      be.add_bias(k, L.bk);
      be.add_bias(v, L.bv);
    }
    if (hp.qk_norm) {
      be.rmsnorm(q.as_2d(hp.head_dim), L.q_norm, hp.rms_eps, q.as_2d(hp.head_dim));
      be.rmsnorm(k.as_2d(hp.head_dim), L.k_norm, hp.rms_eps, k.as_2d(hp.head_dim));
    }
    be.rope(q, hp.n_heads, hp.head_dim, positions, rope);
    kv_bytes_read += mem.attend(l, q, k, v, att, lse);
    be.matmul(L.wo, att, xn);
    be.add(x, xn);

    // ---- feed-forward ----
    be.rmsnorm(x, L.ffn_norm, hp.rms_eps, xn);
    be.matmul(L.gate, xn, gate);
    be.matmul(L.up, xn, up);
    be.swiglu(gate, up, gate);
    be.matmul(L.down, gate, xn);
    be.add(x, xn);
  }
  mem.commit();

  if (n_logit_rows > 0) {
    const tensor last = x.row_range(n - n_logit_rows, n_logit_rows);
    const tensor last_n = xn.row_range(n - n_logit_rows, n_logit_rows);
    be.rmsnorm(last, w.output_norm, hp.rms_eps, last_n);
    be.matmul(w.output, last_n, ws.logits.row_range(0, n_logit_rows));
  }
  return kv_bytes_read;
}

}  // namespace sa

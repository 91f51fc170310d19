#include "model/device_weights.h"

#include "quant/quants.h"

namespace sa {

device_weights::device_weights(backend& be, const model& m) {
  const gguf::file& f = m.file();
  file_ = be.import_host(f.bytes(), f.size());
  bytes_ = m.weight_bytes();

  // A matrix stays in the file's bytes and type.
  auto matrix = [&](const weight& w) {
    tensor t;
    if (!w.info) return t;
    t.buf = file_.get();
    t.offset = w.offset;
    t.type = w.info->type;
    for (int i = 0; i < 4; ++i) t.ne[i] = w.info->ne[i];
    return t;
  };
  // A vector is converted to f32 and packed into `small_`; first collect them.
  std::vector<float> host;
  std::vector<std::pair<tensor*, const weight*>> pending;
  auto vec = [&](tensor& dst, const weight& w) {
    if (!w.info) return;
    const size_t at = host.size();
    host.resize(at + static_cast<size_t>(w.info->n_elements()));
    dequantize_row(w.info->type, f.bytes() + w.offset, host.data() + at, w.info->n_elements());
    dst.offset = at * sizeof(float);
    dst.ne[0] = w.info->n_elements();
    pending.emplace_back(&dst, &w);
  };

  const model_weights& mw = m.weights();
  token_embd = matrix(mw.token_embd);
  output = matrix(mw.output);
  layers.resize(mw.layers.size());
  vec(output_norm, mw.output_norm);
  for (size_t l = 0; l < mw.layers.size(); ++l) {
    const layer_weights& L = mw.layers[l];
    device_layer& D = layers[l];
    D.wq = matrix(L.wq);
    D.wk = matrix(L.wk);
    D.wv = matrix(L.wv);
    D.wo = matrix(L.wo);
    D.gate = matrix(L.gate);
    D.up = matrix(L.up);
    D.down = matrix(L.down);
    vec(D.attn_norm, L.attn_norm);
    vec(D.ffn_norm, L.ffn_norm);
    vec(D.bq, L.bq);
    vec(D.bk, L.bk);
    vec(D.bv, L.bv);
    vec(D.q_norm, L.q_norm);
    vec(D.k_norm, L.k_norm);
  }
  small_ = be.alloc(host.size() * sizeof(float));
  be.upload(*small_, 0, host.data(), host.size() * sizeof(float));
  for (auto& [t, w] : pending) t->buf = small_.get();

  if (mw.rope_freqs.info) {
    rope_freqs.resize(static_cast<size_t>(mw.rope_freqs.info->n_elements()));
    dequantize_row(mw.rope_freqs.info->type, f.bytes() + mw.rope_freqs.offset, rope_freqs.data(),
                   mw.rope_freqs.info->n_elements());
  }
}

}  // namespace sa

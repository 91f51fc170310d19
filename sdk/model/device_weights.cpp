#include "model/device_weights.h"

#include <map>
#include <mutex>

#include "quant/quants.h"

namespace sa {

namespace {
constexpr size_t k_weight_align = 256;
size_t aligned(size_t n) { return (n + k_weight_align - 1) / k_weight_align * k_weight_align; }
}  // namespace

device_weights::device_weights(backend& be, const model& m) {
  const gguf::file& f = m.file();
  const model_weights& mw = m.weights();
  bytes_ = m.weight_bytes();

  // Matrices: in the file's bytes (in place), or copied at an offset of matrices_ per distinct
  // file tensor (a tied output shares the embedding's copy).
  const bool in_place = be.weights_in_place();
  std::map<uint64_t, size_t> placed;  // file offset -> offset in matrices_
  std::vector<const weight*> all;
  all.push_back(&mw.token_embd);
  all.push_back(&mw.output);
  for (const layer_weights& L : mw.layers)
    for (const weight* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) all.push_back(w);
  if (in_place) {
    matrices_ = be.import_host(f.bytes(), f.size());
  } else {
    size_t total = 0;
    for (const weight* w : all) {
      if (!w->info || placed.count(w->offset)) continue;
      placed[w->offset] = total;
      total += aligned(be.weight_size(w->info->type, w->info->ne[0], w->info->ne[1] * w->info->ne[2] * w->info->ne[3]));
    }
    matrices_ = be.alloc(total);
    for (const auto& [file_offset, at] : placed) {
      const weight* w = nullptr;
      for (const weight* c : all)
        if (c->info && c->offset == file_offset) w = c;
      be.upload_weight(*matrices_, at, f.bytes() + file_offset, w->info->type, w->info->ne[0],
                       w->info->ne[1] * w->info->ne[2] * w->info->ne[3]);
    }
  }
  auto matrix = [&](const weight& w) {
    tensor t;
    if (!w.info) return t;
    t.buf = matrices_.get();
    t.offset = in_place ? w.offset : placed.at(w.offset);
    t.type = w.info->type;
    for (int i = 0; i < 4; ++i) t.ne[i] = w.info->ne[i];
    return t;
  };
  // A vector is converted to f32 and packed into `small_`; first collect them.
  std::vector<float> host;
  std::vector<tensor*> pending;
  auto vec = [&](tensor& dst, const weight& w) {
    if (!w.info) return;
    const size_t at = host.size();
    host.resize(at + static_cast<size_t>(w.info->n_elements()));
    dequantize_row(w.info->type, f.bytes() + w.offset, host.data() + at, w.info->n_elements());
    dst.offset = at * sizeof(float);
    dst.ne[0] = w.info->n_elements();
    pending.push_back(&dst);
    host.resize((host.size() + 3) / 4 * 4);  // every vector 16-byte aligned
  };

  token_embd = matrix(mw.token_embd);
  output = matrix(mw.output);
  layers.resize(mw.layers.size());
  vec(output_norm, mw.output_norm);
  vec(rope_freqs, mw.rope_freqs);
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
  for (tensor* t : pending) t->buf = small_.get();
}

std::shared_ptr<const device_weights> shared_weights(backend& be, const model& m) {
  std::lock_guard<std::mutex> lock(m.device_cache().mutex);
  std::weak_ptr<const device_weights>& slot = m.device_cache().by_device[be.device_id()];
  std::shared_ptr<const device_weights> w = slot.lock();
  if (!w) {
    w = std::make_shared<const device_weights>(be, m);
    slot = w;
  }
  return w;
}

}  // namespace sa

// sa_model_*: loading, describing and releasing models.
#include <algorithm>
#include <cstdio>

#include "api/handles.h"

using sa::api::guarded;
using sa::api::registry;
using sa::api::require_live;

namespace {
void copy_str(char* dst, size_t cap, const std::string& s) {
  const size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}
}  // namespace

extern "C" {

void sa_model_params_init(sa_model_params* params) {
  if (!params) return;
  *params = sa_model_params{};
  params->struct_size = sizeof(sa_model_params);
  params->use_mmap = 1;
}

namespace {
// The caller's model params (NULL: the defaults), checked.
sa_model_params model_params(const sa_model_params* params) {
  sa_model_params defaults;
  sa_model_params_init(&defaults);
  const sa_model_params p = sa::api::read_params(params, defaults, "sa_model_params");
  if (p.use_mmap != 0 && p.use_mmap != 1)
    sa::fail(SA_ERR_INVALID_ARG, "sa_model_params.use_mmap is %d: 0 (read the file) or 1 (map it)", p.use_mmap);
  return p;
}
}  // namespace

sa_status sa_model_load(const char* path, const sa_model_params* params, sa_model** out_model) {
  return guarded(nullptr, [&] {
    if (!out_model) sa::fail(SA_ERR_INVALID_ARG, "out_model is NULL");
    *out_model = nullptr;
    if (!path) sa::fail(SA_ERR_INVALID_ARG, "path is NULL");
    const sa_model_params p = model_params(params);
    auto m = std::make_unique<sa_model>();
    m->impl = sa::model::load(path, p.use_mmap != 0);
    registry<sa_model>::add(m.get());
    *out_model = m.release();
  });
}

sa_status sa_model_load_from_memory(const void* data, size_t size, const sa_model_params* params,
                                    sa_model** out_model) {
  return guarded(nullptr, [&] {
    if (!out_model) sa::fail(SA_ERR_INVALID_ARG, "out_model is NULL");
    *out_model = nullptr;
    if (!data && size > 0) sa::fail(SA_ERR_INVALID_ARG, "data is NULL with a size of %zu bytes", size);
    (void)model_params(params);  // checked, though use_mmap has no file to map
    auto m = std::make_unique<sa_model>();
    m->impl = sa::model::load_from_memory(data, size);
    registry<sa_model>::add(m.get());
    *out_model = m.release();
  });
}

void sa_model_destroy(sa_model* model) {
  if (!model || !registry<sa_model>::remove(model)) return;
  delete model;  // sessions still holding the weights keep them alive
}

sa_status sa_model_info(const sa_model* model, sa_model_desc* out) {
  return guarded(nullptr, [&] {
    require_live(model, "model");
    const sa::model& m = *model->impl;
    const sa::hparams& hp = m.hp();
    sa_model_desc d{};
    copy_str(d.architecture, sizeof d.architecture, hp.arch_name);
    copy_str(d.name, sizeof d.name, m.name());
    d.n_layers = hp.n_layers;
    d.n_heads = hp.n_heads;
    d.n_kv_heads = hp.n_kv_heads;
    d.head_dim = hp.head_dim;
    d.n_embd = hp.n_embd;
    d.n_ff = hp.n_ff;
    d.n_ctx_train = hp.n_ctx_train;
    d.n_vocab = hp.n_vocab;
    d.bos_token = m.vocab().bos();
    d.eos_token = m.vocab().eos();
    d.rope_freq_base = hp.rope.freq_base;
    d.n_params = m.n_params();
    d.weight_bytes = m.weight_bytes();
    d.tokenizer_nfc = m.vocab().normalizes_nfc() ? 1 : 0;
    sa::api::write_info(out, d, "sa_model_desc");
  });
}

sa_status sa_model_meta_string(const sa_model* model, const char* key, char* buf, size_t capacity,
                               size_t* out_len) {
  return guarded(nullptr, [&] {
    require_live(model, "model");
    if (!key) sa::fail(SA_ERR_INVALID_ARG, "key is NULL");
    const sa::gguf::value* v = model->impl->file().find(key);
    if (!v) sa::fail(SA_ERR_INVALID_ARG, "metadata key '%s' is absent", key);
    std::string text;
    using vt = sa::gguf::value_type;
    switch (v->type) {
      case vt::string: text = std::string(v->str); break;
      case vt::array: sa::fail(SA_ERR_INVALID_ARG, "metadata key '%s' is an array", key);
      case vt::f32:
      case vt::f64: {
        char num[64];
        std::snprintf(num, sizeof num, "%.9g", v->f);
        text = num;
        break;
      }
      case vt::boolean: text = v->u ? "true" : "false"; break;
      case vt::i8:
      case vt::i16:
      case vt::i32:
      case vt::i64: text = std::to_string(v->i); break;
      default: text = std::to_string(v->u); break;
    }
    size_t len = 0;
    sa::api::copy_out(text, buf, capacity, out_len ? out_len : &len, true);
  });
}

}  // extern "C"

#include "model/hparams.h"

#include <string>

#include "core/error.h"

namespace sa {

namespace {

// A count that may be stored as a scalar or as a per-layer array (all layers equal here).
int32_t read_count(const gguf::file& f, const std::string& key, int64_t fallback, int64_t max) {
  const gguf::value* v = f.find(key);
  int64_t n = fallback;
  if (v && v->type == gguf::value_type::array) {
    const std::vector<int64_t> per_layer = f.get_int_array(key);
    if (per_layer.empty()) fail(SA_ERR_FORMAT, "key '%s' is an empty array", key.c_str());
    for (int64_t x : per_layer)
      if (x != per_layer[0])
        fail(SA_ERR_UNSUPPORTED, "key '%s' differs between layers; not supported", key.c_str());
    n = per_layer[0];
  } else if (v) {
    n = static_cast<int64_t>(f.get_uint(key));
  } else if (fallback < 0) {
    fail(SA_ERR_FORMAT, "required key '%s' is missing", key.c_str());
  }
  if (n <= 0 || n > max)
    fail(SA_ERR_FORMAT, "key '%s' = %lld is outside [1, %lld]", key.c_str(),
         static_cast<long long>(n), static_cast<long long>(max));
  return static_cast<int32_t>(n);
}

}  // namespace

hparams read_hparams(const gguf::file& f) {
  hparams hp;
  hp.arch_name = std::string(f.get_string("general.architecture"));
  const std::string& a = hp.arch_name;
  if (a == "llama") {
    hp.architecture = arch::llama;
  } else if (a == "qwen2") {
    hp.architecture = arch::qwen2;
  } else if (a == "qwen3") {
    hp.architecture = arch::qwen3;
  } else {
    fail(SA_ERR_UNSUPPORTED, "architecture '%s' is not supported (llama, qwen2, qwen3 are)",
         a.c_str());
  }
  constexpr int64_t big = int64_t{1} << 24;
  hp.n_layers = read_count(f, a + ".block_count", -1, 4096);
  hp.n_embd = read_count(f, a + ".embedding_length", -1, big);
  hp.n_heads = read_count(f, a + ".attention.head_count", -1, 4096);
  hp.n_kv_heads = read_count(f, a + ".attention.head_count_kv", hp.n_heads, 4096);
  hp.n_ff = read_count(f, a + ".feed_forward_length", -1, big);
  hp.n_ctx_train = read_count(f, a + ".context_length", -1, int64_t{1} << 30);
  if (hp.n_embd % hp.n_heads != 0 && !f.find(a + ".attention.key_length"))
    fail(SA_ERR_FORMAT, "embedding_length %d is not a multiple of head_count %d", hp.n_embd,
         hp.n_heads);
  hp.head_dim = read_count(f, a + ".attention.key_length", hp.n_embd / hp.n_heads, 65536);
  const int32_t v_dim = read_count(f, a + ".attention.value_length", hp.head_dim, 65536);
  if (v_dim != hp.head_dim)
    fail(SA_ERR_UNSUPPORTED, "value_length %d differs from key_length %d", v_dim, hp.head_dim);
  if (hp.n_heads % hp.n_kv_heads != 0)
    fail(SA_ERR_FORMAT, "head_count %d is not a multiple of head_count_kv %d", hp.n_heads,
         hp.n_kv_heads);
  if (hp.head_dim % 2 != 0) fail(SA_ERR_FORMAT, "head dimension %d is odd", hp.head_dim);

  const double eps = f.get_float(a + ".attention.layer_norm_rms_epsilon");
  if (!(eps > 0 && eps < 1)) fail(SA_ERR_FORMAT, "layer_norm_rms_epsilon %g is not in (0, 1)", eps);
  hp.rms_eps = static_cast<float>(eps);

  hp.rope.mode = hp.architecture == arch::llama ? rope_mode::adjacent : rope_mode::neox;
  hp.rope.n_rot = read_count(f, a + ".rope.dimension_count", hp.head_dim, hp.head_dim);
  if (hp.rope.n_rot % 2 != 0) fail(SA_ERR_FORMAT, "rope.dimension_count %d is odd", hp.rope.n_rot);
  const double base = f.get_float_or(a + ".rope.freq_base", 10000.0);
  if (!(base > 1)) fail(SA_ERR_FORMAT, "rope.freq_base %g must be > 1", base);
  hp.rope.freq_base = static_cast<float>(base);
  // Absent scaling type means linear scaling with the (legacy-keyed) factor, default 1.
  const std::string scaling(f.get_string_or(a + ".rope.scaling.type", "linear"));
  double factor = f.get_float_or(a + ".rope.scaling.factor", 0.0);
  if (factor == 0.0) factor = f.get_float_or(a + ".rope.scale_linear", 1.0);
  if (scaling == "none" || scaling == "linear") {
    if (!(factor > 0)) fail(SA_ERR_FORMAT, "rope scaling factor %g must be > 0", factor);
    hp.rope.freq_scale = scaling == "none" ? 1.0f : static_cast<float>(1.0 / factor);
  } else {
    fail(SA_ERR_UNSUPPORTED, "rope scaling type '%s' is not supported (none, linear are)",
         scaling.c_str());
  }
  hp.qkv_bias = hp.architecture == arch::qwen2;
  hp.qk_norm = hp.architecture == arch::qwen3;
  return hp;
}

}  // namespace sa

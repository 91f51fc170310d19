#include "model/model.h"

#include <string>

#include "core/error.h"

namespace sa {

namespace {

// Binds tensor `name`, checking its shape against `expected` (ne order: ne[0] first).
class binder {
 public:
  binder(const gguf::file& f, uint64_t data_start) : f_(f), data_start_(data_start) {}

  weight get(const std::string& name, std::initializer_list<int64_t> expected, bool required) {
    const gguf::tensor_info* t = f_.find_tensor(name);
    if (!t) {
      if (required) fail(SA_ERR_FORMAT, "required tensor '%s' is missing", name.c_str());
      return {};
    }
    size_t i = 0;
    bool ok = t->n_dims <= 4;
    for (int64_t e : expected) ok = ok && t->ne[i++] == e;
    for (; i < 4; ++i) ok = ok && t->ne[i] == 1;
    if (!ok) {
      std::string want, got;
      for (int64_t e : expected) want += (want.empty() ? "" : ", ") + std::to_string(e);
      for (uint32_t d = 0; d < t->n_dims; ++d) got += (d ? ", " : "") + std::to_string(t->ne[d]);
      fail(SA_ERR_FORMAT, "tensor '%s' has shape {%s}, expected {%s}", name.c_str(), got.c_str(),
           want.c_str());
    }
    return weight{t, data_start_ + t->offset};
  }

 private:
  const gguf::file& f_;
  uint64_t data_start_;
};

// Offset of the data section: a tensor's bytes start at data_start + offset.
uint64_t data_start_of(const gguf::file& f) {
  if (f.tensors().empty()) fail(SA_ERR_FORMAT, "the file holds no tensors");
  const gguf::tensor_info& t = f.tensors().front();
  return static_cast<uint64_t>(f.tensor_data(t) - f.bytes()) - t.offset;
}

}  // namespace

tokenizer_vocab read_vocab(const gguf::file& f) {
  tokenizer_vocab v;
  v.model = std::string(f.get_string("tokenizer.ggml.model"));
  v.pre = std::string(f.get_string_or("tokenizer.ggml.pre", ""));
  for (std::string_view s : f.get_string_array("tokenizer.ggml.tokens")) v.tokens.emplace_back(s);
  if (f.find("tokenizer.ggml.token_type"))
    for (int64_t t : f.get_int_array("tokenizer.ggml.token_type"))
      v.types.push_back(static_cast<int32_t>(t));
  if (f.find("tokenizer.ggml.scores")) v.scores = f.get_float_array("tokenizer.ggml.scores");
  if (f.find("tokenizer.ggml.merges"))
    for (std::string_view s : f.get_string_array("tokenizer.ggml.merges")) v.merges.emplace_back(s);
  auto id = [&](const char* key) {
    const int64_t x = f.get_int_or(key, -1);
    if (x < -1 || x >= static_cast<int64_t>(v.tokens.size()))
      fail(SA_ERR_FORMAT, "'%s' = %lld is not a token id (vocabulary of %zu)", key,
           static_cast<long long>(x), v.tokens.size());
    return static_cast<int32_t>(x);
  };
  v.bos = id("tokenizer.ggml.bos_token_id");
  v.eos = id("tokenizer.ggml.eos_token_id");
  v.eot = id("tokenizer.ggml.eot_token_id");
  v.eom = id("tokenizer.ggml.eom_token_id");
  v.unk = id("tokenizer.ggml.unknown_token_id");
  v.pad = id("tokenizer.ggml.padding_token_id");
  auto flag = [&](const char* key) { return f.find(key) ? (f.get_bool_or(key, false) ? 1 : 0) : -1; };
  v.add_bos = flag("tokenizer.ggml.add_bos_token");
  v.add_eos = flag("tokenizer.ggml.add_eos_token");
  v.add_space_prefix = flag("tokenizer.ggml.add_space_prefix");
  return v;
}

std::shared_ptr<const model> model::load(const std::string& path, bool use_mmap) {
  return from_file(gguf::file::open(path, use_mmap));
}

std::shared_ptr<const model> model::load_from_memory(const void* data, size_t size) {
  return from_file(gguf::file::from_memory(data, size));
}

std::shared_ptr<const model> model::from_file(std::unique_ptr<gguf::file> f) {
  std::shared_ptr<model> m(new model());
  m->file_ = std::move(f);
  const gguf::file& file = *m->file_;
  m->hp_ = read_hparams(file);
  hparams& hp = m->hp_;
  m->tok_ = std::make_unique<tokenizer>(read_vocab(file));

  binder bind(file, data_start_of(file));
  const int64_t d = hp.n_embd, hd = hp.head_dim, q_dim = int64_t{hp.n_heads} * hd,
                kv_dim = int64_t{hp.n_kv_heads} * hd, ff = hp.n_ff;
  model_weights& w = m->w_;
  const gguf::tensor_info* embd = file.find_tensor("token_embd.weight");
  if (!embd) fail(SA_ERR_FORMAT, "required tensor 'token_embd.weight' is missing");
  hp.n_vocab = static_cast<int32_t>(embd->ne[1]);
  if (hp.n_vocab != m->tok_->n_vocab())
    fail(SA_ERR_FORMAT, "token_embd.weight has %d rows but the tokenizer has %d tokens", hp.n_vocab,
         m->tok_->n_vocab());
  w.token_embd = bind.get("token_embd.weight", {d, hp.n_vocab}, true);
  w.output_norm = bind.get("output_norm.weight", {d}, true);
  w.output = bind.get("output.weight", {d, hp.n_vocab}, false);
  if (!w.output.info) w.output = w.token_embd;  // tied embeddings
  w.rope_freqs = bind.get("rope_freqs.weight", {hp.rope.n_rot / 2}, false);

  for (int32_t l = 0; l < hp.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    layer_weights L;
    L.attn_norm = bind.get(p + "attn_norm.weight", {d}, true);
    L.wq = bind.get(p + "attn_q.weight", {d, q_dim}, true);
    L.wk = bind.get(p + "attn_k.weight", {d, kv_dim}, true);
    L.wv = bind.get(p + "attn_v.weight", {d, kv_dim}, true);
    L.wo = bind.get(p + "attn_output.weight", {q_dim, d}, true);
    L.bq = bind.get(p + "attn_q.bias", {q_dim}, hp.qkv_bias);
    L.bk = bind.get(p + "attn_k.bias", {kv_dim}, hp.qkv_bias);
    L.bv = bind.get(p + "attn_v.bias", {kv_dim}, hp.qkv_bias);
    L.q_norm = bind.get(p + "attn_q_norm.weight", {hd}, hp.qk_norm);
    L.k_norm = bind.get(p + "attn_k_norm.weight", {hd}, hp.qk_norm);
    L.ffn_norm = bind.get(p + "ffn_norm.weight", {d}, true);
    L.gate = bind.get(p + "ffn_gate.weight", {d, ff}, true);
    L.up = bind.get(p + "ffn_up.weight", {d, ff}, true);
    L.down = bind.get(p + "ffn_down.weight", {ff, d}, true);
    w.layers.push_back(L);
  }
  for (const gguf::tensor_info& t : file.tensors()) {
    m->n_params_ += static_cast<uint64_t>(t.n_elements());
    m->weight_bytes_ += t.n_bytes;
  }
  return m;
}

std::string model::name() const { return std::string(file_->get_string_or("general.name", "")); }

}  // namespace sa

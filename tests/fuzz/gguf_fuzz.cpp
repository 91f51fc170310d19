// gguf_fuzz: arbitrary bytes as a GGUF model (sa_model_load_from_memory, CPU, no mmap).
//
// sa.h: "Every header field, key, offset, size, alignment, type and shape is validated before
// use", so every input either loads or fails with a documented status and no model. A model
// that loads is used a little - described, a short text tokenized and rendered back, one token
// run through a tiny CPU session - so that what validation lets through is exercised too.
// Seeds: tiny models of each architecture and several weight types written by the GGUF writer,
// and the heads of larger files (make_fuzz_seeds.cpp); dictionary: gguf.dict.
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "fuzz_check.h"

using sa_fuzz::expect_status;
using sa_fuzz::require;

namespace {

void use_model(sa_model* model) {
  sa_model_desc desc;
  std::memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  expect_status(sa_model_info(model, &desc), {}, "sa_model_info");
  require(desc.n_vocab > 0, "a loaded model has no vocabulary");

  static const char k_text[] = "Hello, world! <|im_start|>user\n\xC3\xA9\xF0\x9F\x98\x80 \xFF";
  int32_t tokens[128];
  size_t n = 0;
  const sa_status st = sa_tokenize(model, k_text, sizeof k_text - 1,
                                   SA_TOKENIZE_ADD_SPECIAL | SA_TOKENIZE_PARSE_SPECIAL, tokens,
                                   std::size(tokens), &n);
  expect_status(st, {SA_ERR_BUFFER_TOO_SMALL}, "sa_tokenize");
  if (st != SA_OK) return;

  sa_detokenizer* detok = nullptr;
  expect_status(sa_detokenizer_create(model, SA_PIECE_RENDER_SPECIAL, &detok), {SA_ERR_NOMEM},
                "sa_detokenizer_create");
  std::vector<char> buf(256);
  for (size_t i = 0; i < n; ++i) {
    require(tokens[i] >= 0 && tokens[i] < desc.n_vocab, "sa_tokenize gave a token out of range");
    size_t len = 0;
    sa_status ps = sa_token_to_piece(model, tokens[i], SA_PIECE_RENDER_SPECIAL, buf.data(),
                                     buf.size(), &len);
    expect_status(ps, {SA_ERR_BUFFER_TOO_SMALL}, "sa_token_to_piece");
    if (detok) {
      ps = sa_detokenizer_push(detok, tokens[i], buf.data(), buf.size(), &len);
      expect_status(ps, {SA_ERR_BUFFER_TOO_SMALL}, "sa_detokenizer_push");
    }
  }
  if (detok) {
    size_t len = 0;
    expect_status(sa_detokenizer_flush(detok, buf.data(), buf.size(), &len), {}, "flush");
    sa_detokenizer_destroy(detok);
  }
  if (n > 0) (void)sa_token_is_eog(model, tokens[0]);

  // One short prefill on the CPU: tensor shapes the validation accepted must hold up in use.
  sa_session_params sp;
  sa_session_params_init(&sp);
  sp.backend = SA_BACKEND_CPU;
  sp.n_threads = 1;
  sp.n_ctx = 8;
  sa_session* session = nullptr;
  const sa_status cs = sa_session_create(model, &sp, &session);
  expect_status(cs, {SA_ERR_INVALID_ARG, SA_ERR_UNSUPPORTED, SA_ERR_NOMEM}, "sa_session_create");
  if (cs != SA_OK) return;
  if (n > 0) {
    const sa_status ps = sa_prefill(session, tokens, n < 4 ? n : 4, nullptr, nullptr);
    expect_status(ps, {SA_ERR_NOMEM, SA_ERR_BACKEND}, "sa_prefill");
    int32_t next = -1;
    if (ps == SA_OK) {
      const sa_status ss = sa_sample(session, &next);
      expect_status(ss, {SA_DONE}, "sa_sample");
      require(next >= 0 && next < desc.n_vocab, "sa_sample gave a token out of range");
    }
  }
  sa_session_destroy(session);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sa_model_params params;
  sa_model_params_init(&params);
  params.use_mmap = 0;
  sa_model* model = nullptr;
  const sa_status st = sa_model_load_from_memory(data, size, &params, &model);
  expect_status(st, {SA_ERR_FORMAT, SA_ERR_UNSUPPORTED, SA_ERR_NOMEM},
                "sa_model_load_from_memory");
  require((st == SA_OK) == (model != nullptr), "the model handle disagrees with the status", st);
  if (model) {
    use_model(model);
    sa_model_destroy(model);
  }
  return 0;
}

// Tokens and text: sa_tokenize, sa_token_to_piece, sa_token_is_eog, sa_detokenizer_*.
#include <algorithm>

#include "api/handles.h"

using sa::api::guarded;
using sa::api::registry;
using sa::api::require_live;

namespace {
void check_token(const sa::model& m, int32_t token) {
  if (token < 0 || token >= m.hp().n_vocab)
    sa::fail(SA_ERR_INVALID_ARG, "token %d is outside the vocabulary [0, %d)", token,
             m.hp().n_vocab);
}
}  // namespace

extern "C" {

sa_status sa_tokenize(const sa_model* model, const char* text, size_t text_len, uint32_t flags,
                      int32_t* tokens, size_t capacity, size_t* out_n) {
  return guarded(nullptr, [&] {
    require_live(model, "model");
    if (!out_n) sa::fail(SA_ERR_INVALID_ARG, "out_n is NULL");
    if (!tokens && capacity > 0) sa::fail(SA_ERR_INVALID_ARG, "tokens is NULL but capacity is %zu", capacity);
    if (!text && text_len) sa::fail(SA_ERR_INVALID_ARG, "text is NULL but text_len is %zu", text_len);
    if (flags & ~(SA_TOKENIZE_ADD_SPECIAL | SA_TOKENIZE_PARSE_SPECIAL | SA_TOKENIZE_NFC |
                  SA_TOKENIZE_NO_NORMALIZE | SA_TOKENIZE_SPM_NON_LEGACY))
      sa::fail(SA_ERR_INVALID_ARG, "unknown tokenize flags 0x%x", flags);
    if ((flags & SA_TOKENIZE_NFC) && (flags & SA_TOKENIZE_NO_NORMALIZE))
      sa::fail(SA_ERR_INVALID_ARG, "SA_TOKENIZE_NFC and SA_TOKENIZE_NO_NORMALIZE contradict each other");
    sa::encode_options options;
    options.add_special = (flags & SA_TOKENIZE_ADD_SPECIAL) != 0;
    options.parse_special = (flags & SA_TOKENIZE_PARSE_SPECIAL) != 0;
    options.norm = (flags & SA_TOKENIZE_NFC)            ? sa::normalization::nfc
                   : (flags & SA_TOKENIZE_NO_NORMALIZE) ? sa::normalization::none
                                                        : sa::normalization::model;
    options.space_prefix_after_special = (flags & SA_TOKENIZE_SPM_NON_LEGACY) == 0;
    const std::vector<int32_t> ids =
        model->impl->vocab().encode(std::string_view(text ? text : "", text_len), options);
    *out_n = ids.size();
    if (capacity < ids.size() || (!tokens && !ids.empty()))
      sa::fail(SA_ERR_BUFFER_TOO_SMALL, "%zu tokens do not fit in a buffer of %zu", ids.size(),
               capacity);
    std::copy(ids.begin(), ids.end(), tokens);
  });
}

sa_status sa_token_to_piece(const sa_model* model, int32_t token, uint32_t flags, char* buf,
                            size_t capacity, size_t* out_len) {
  return guarded(nullptr, [&] {
    require_live(model, "model");
    check_token(*model->impl, token);
    sa::api::copy_out(model->impl->vocab().piece(token, (flags & SA_PIECE_RENDER_SPECIAL) != 0),
                      buf, capacity, out_len, false);
  });
}

int32_t sa_token_is_eog(const sa_model* model, int32_t token) {
  if (!registry<sa_model>::contains(model)) return 0;
  const sa::model& m = *model->impl;
  if (token < 0 || token >= m.hp().n_vocab) return 0;
  return m.vocab().is_eog(token) ? 1 : 0;
}

sa_status sa_detokenizer_create(const sa_model* model, uint32_t flags,
                                sa_detokenizer** out_detokenizer) {
  return guarded(nullptr, [&] {
    if (!out_detokenizer) sa::fail(SA_ERR_INVALID_ARG, "out_detokenizer is NULL");
    *out_detokenizer = nullptr;
    require_live(model, "model");
    if (flags & ~SA_PIECE_RENDER_SPECIAL)
      sa::fail(SA_ERR_INVALID_ARG, "unknown detokenizer flags 0x%x", flags);
    auto d = std::make_unique<sa_detokenizer>();
    d->model = model->impl;
    d->flags = flags;
    registry<sa_detokenizer>::add(d.get());
    *out_detokenizer = d.release();
  });
}

sa_status sa_detokenizer_push(sa_detokenizer* d, int32_t token, char* buf, size_t capacity,
                              size_t* out_len) {
  return guarded(nullptr, [&] {
    require_live(d, "detokenizer");
    check_token(*d->model, token);
    sa::utf8_stream next = d->stream;  // commit only once the output fits
    std::string text;
    next.push(d->model->vocab().piece(token, (d->flags & SA_PIECE_RENDER_SPECIAL) != 0), text);
    sa::api::copy_out(text, buf, capacity, out_len, false);
    d->stream = next;
  });
}

sa_status sa_detokenizer_flush(sa_detokenizer* d, char* buf, size_t capacity, size_t* out_len) {
  return guarded(nullptr, [&] {
    require_live(d, "detokenizer");
    sa::utf8_stream next = d->stream;
    std::string text;
    next.flush(text);
    sa::api::copy_out(text, buf, capacity, out_len, false);
    d->stream = next;
  });
}

void sa_detokenizer_destroy(sa_detokenizer* d) {
  if (!d || !registry<sa_detokenizer>::remove(d)) return;
  delete d;
}

}  // extern "C"

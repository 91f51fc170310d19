// tokenizer_fuzz: arbitrary bytes through the shipped model's tokenizer (byte-level BPE) and
// back, with and without special-token parsing.
//
// What is checked, and where sa.h promises it:
//   - every id is in [0, n_vocab), and the count query (capacity 0) agrees with the real call;
//   - "Bytes that are not valid UTF-8 are tokenized as bytes; nothing is lost": with
//     SA_TOKENIZE_NO_NORMALIZE and without SA_TOKENIZE_PARSE_SPECIAL the pieces
//     (sa_token_to_piece) of the tokens join to exactly the input bytes; with it, the pieces
//     rendered with SA_PIECE_RENDER_SPECIAL do (a byte-level vocabulary adds no leading-space
//     marker after a control token);
//   - normalization (the shipped vocabulary's pre-tokenizer is "qwen2", so NFC by default): the
//     pieces join to text that is valid UTF-8 exactly when the input is, and that is its own
//     NFC form: tokenized again, with or without normalization, it gives the same tokens;
//   - the streaming detokenizer "never splits a UTF-8 character" and writes U+FFFD for bytes that
//     can never form valid UTF-8: its output is always valid UTF-8, and for valid UTF-8 input it
//     is exactly the input; "a capacity of 3 x (the longest piece + 3) bytes always suffices";
//   - with SA_TOKENIZE_ADD_SPECIAL: no token is lost, ids are in range and pieces and stream are
//     well formed; no text is compared (what is added is the metadata's choice).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.h"

using sa_fuzz::expect_status;
using sa_fuzz::require;

namespace {

struct shipped {
  sa_model* model = nullptr;
  int32_t n_vocab = 0;
  size_t longest_piece = 0;  // over the vocabulary, special tokens rendered

  shipped() {
    sa_model_params params;
    sa_model_params_init(&params);
    const sa_status st = sa_model_load(SA_MODELS_DIR "/sa-default-q8_0.gguf", &params, &model);
    require(st == SA_OK, "cannot load the shipped model", st);
    sa_model_desc desc;
    std::memset(&desc, 0, sizeof desc);
    desc.struct_size = sizeof desc;
    require(sa_model_info(model, &desc) == SA_OK, "sa_model_info");
    n_vocab = desc.n_vocab;
    for (int32_t t = 0; t < n_vocab; ++t) {
      size_t len = 0;
      const sa_status ps = sa_token_to_piece(model, t, SA_PIECE_RENDER_SPECIAL, nullptr, 0, &len);
      require(ps == SA_OK || ps == SA_ERR_BUFFER_TOO_SMALL, "sa_token_to_piece (size)", ps);
      longest_piece = std::max(longest_piece, len);
    }
  }
};

const shipped& the_model() {
  static const shipped s;  // loaded once, kept for the process
  return s;
}

// Strict UTF-8 (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF.
bool valid_utf8(const uint8_t* p, size_t n) {
  size_t i = 0;
  while (i < n) {
    const uint8_t c = p[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2, cp = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3, cp = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4, cp = c & 0x07u;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3Fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

std::vector<int32_t> tokenize(const shipped& m, const uint8_t* data, size_t size, uint32_t flags) {
  size_t n = 0;
  sa_status st = sa_tokenize(m.model, reinterpret_cast<const char*>(data), size, flags, nullptr, 0, &n);
  expect_status(st, {SA_ERR_BUFFER_TOO_SMALL}, "sa_tokenize (count)");
  require(st == SA_OK ? n == 0 : n > 0, "sa_tokenize: the count query disagrees with its status");
  std::vector<int32_t> tokens(n);
  size_t n2 = 0;
  st = sa_tokenize(m.model, reinterpret_cast<const char*>(data), size, flags, tokens.data(), n, &n2);
  expect_status(st, {}, "sa_tokenize");
  require(n2 == n, "sa_tokenize: the count query disagrees with the call");
  for (int32_t t : tokens) require(t >= 0 && t < m.n_vocab, "sa_tokenize: a token out of range");
  return tokens;
}

std::string pieces(const shipped& m, const std::vector<int32_t>& tokens, uint32_t flags) {
  std::string out;
  std::vector<char> buf(m.longest_piece);
  for (int32_t t : tokens) {
    size_t len = 0;
    const sa_status st = sa_token_to_piece(m.model, t, flags, buf.data(), buf.size(), &len);
    expect_status(st, {}, "sa_token_to_piece");
    out.append(buf.data(), len);
  }
  return out;
}

std::string detokenize(const shipped& m, const std::vector<int32_t>& tokens, uint32_t flags) {
  sa_detokenizer* d = nullptr;
  expect_status(sa_detokenizer_create(m.model, flags, &d), {}, "sa_detokenizer_create");
  std::string out;
  std::vector<char> buf(3 * (m.longest_piece + 3));  // sa.h: always suffices
  size_t len = 0;
  for (int32_t t : tokens) {
    // First with no room: a push with nothing to write succeeds (the token is taken); one with
    // text is refused with the size it needs and the state unchanged, and is made again.
    sa_status st = sa_detokenizer_push(d, t, nullptr, 0, &len);
    expect_status(st, {SA_ERR_BUFFER_TOO_SMALL}, "sa_detokenizer_push (no room)");
    if (st == SA_OK) {
      require(len == 0, "sa_detokenizer_push wrote into no room");
      continue;
    }
    require(len > 0 && len <= buf.size(), "sa_detokenizer_push: the size needed exceeds the bound");
    st = sa_detokenizer_push(d, t, buf.data(), buf.size(), &len);
    expect_status(st, {}, "sa_detokenizer_push");
    out.append(buf.data(), len);
  }
  expect_status(sa_detokenizer_flush(d, buf.data(), buf.size(), &len), {}, "sa_detokenizer_flush");
  out.append(buf.data(), len);
  sa_detokenizer_destroy(d);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const shipped& m = the_model();
  const std::string input(reinterpret_cast<const char*>(data), size);
  const bool utf8 = valid_utf8(data, size);

  for (const uint32_t parse : {0u, SA_TOKENIZE_PARSE_SPECIAL}) {
    const std::vector<int32_t> tokens = tokenize(m, data, size, parse | SA_TOKENIZE_NO_NORMALIZE);
    const uint32_t render = parse ? SA_PIECE_RENDER_SPECIAL : 0u;
    require(pieces(m, tokens, render) == input, "the pieces do not join to the input");
    const std::string text = detokenize(m, tokens, render);
    require(valid_utf8(reinterpret_cast<const uint8_t*>(text.data()), text.size()),
            "the detokenizer wrote invalid UTF-8");
    if (utf8) require(text == input, "valid UTF-8 does not round-trip through the detokenizer");

    // BOS/EOS as the metadata asks: ids in range, pieces and stream still well formed.
    const std::vector<int32_t> with_special =
        tokenize(m, data, size, parse | SA_TOKENIZE_ADD_SPECIAL | SA_TOKENIZE_NO_NORMALIZE);
    require(with_special.size() >= tokens.size(), "SA_TOKENIZE_ADD_SPECIAL lost tokens");
    (void)pieces(m, with_special, 0);
    (void)detokenize(m, with_special, 0);
  }

  const std::vector<int32_t> normalized = tokenize(m, data, size, 0);
  const std::string text = pieces(m, normalized, 0);
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  require(valid_utf8(bytes, text.size()) == utf8, "NFC changed whether the text is valid UTF-8");
  require(tokenize(m, bytes, text.size(), SA_TOKENIZE_NO_NORMALIZE) == normalized,
          "the normalized text, taken as given, gives other tokens");
  require(tokenize(m, bytes, text.size(), 0) == normalized, "normalizing twice changes the tokens");
  return 0;
}

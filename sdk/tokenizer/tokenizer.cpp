// tokenizer: vocabulary checks, special-token splitting and dispatch to the two BPE families.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <climits>
#include <optional>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/spm.h"
#include "tokenizer/unicode.h"

namespace sa {

namespace {

enum token_type : int32_t {
  type_undefined = 0,
  type_normal = 1,
  type_unknown = 2,
  type_control = 3,
  type_user_defined = 4,
  type_unused = 5,
  type_byte = 6,
};

constexpr std::string_view end_markers[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "</s>",
};

// A run of input text, or a special token found in it.
struct fragment {
  std::string_view text;  // empty for a special token
  size_t offset;          // of the text in the input
  int32_t special;        // token id, or -1 for text
};

}  // namespace

struct tokenizer::impl {
  tokenizer_vocab v;
  bool byte_level = false;  // "gpt2" family; else SentencePiece
  pretokenizer_kind pre = pretokenizer_kind::gpt2;
  bool ignore_merges = false;
  bool default_pre = false;
  bool nfc = false;  // normalization::model is NFC
  bool add_bos = false, add_eos = false, add_space_prefix = true;

  token_lookup all;       // every token; the first id wins for a duplicated text
  token_lookup ordinary;  // the tokens plain text may become (first id wins)
  std::optional<bpe_model> bpe;
  std::optional<spm_model> spm;

  // Control and user-defined tokens by their first byte, longest text first.
  std::array<std::vector<int32_t>, 256> specials;
  std::vector<uint8_t> eog;
  size_t max_piece = 0;

  int32_t type(int32_t id) const {
    return v.types.empty() ? type_normal : v.types[static_cast<size_t>(id)];
  }
  void validate_and_index();
  void split_special(std::string_view text, std::vector<fragment>& out) const;
  std::string piece(int32_t id, bool render_special) const;
};

void tokenizer::impl::validate_and_index() {
  if (v.model == "gpt2") {
    byte_level = true;
  } else if (v.model == "llama") {
    byte_level = false;
  } else {
    fail(SA_ERR_UNSUPPORTED, "tokenizer model '%.100s' is not supported (gpt2 or llama)",
         v.model.c_str());
  }

  const size_t n = v.tokens.size();
  if (n == 0) fail(SA_ERR_FORMAT, "tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) {
    fail(SA_ERR_FORMAT, "tokenizer.ggml.tokens has %zu entries, too many", n);
  }
  if (!v.types.empty() && v.types.size() != n) {
    fail(SA_ERR_FORMAT, "tokenizer.ggml.token_type has %zu entries but there are %zu tokens",
         v.types.size(), n);
  }
  if (!v.scores.empty() && v.scores.size() != n) {
    fail(SA_ERR_FORMAT, "tokenizer.ggml.scores has %zu entries but there are %zu tokens",
         v.scores.size(), n);
  }
  const std::pair<const char*, int32_t> ids[] = {
      {"bos", v.bos}, {"eos", v.eos}, {"eot", v.eot},
      {"eom", v.eom}, {"unknown", v.unk}, {"padding", v.pad},
  };
  for (const auto& [name, id] : ids) {
    if (id < -1 || (id >= 0 && static_cast<size_t>(id) >= n)) {
      fail(SA_ERR_FORMAT, "tokenizer.ggml.%s_token_id = %d is outside the vocabulary (%zu tokens)",
           name, id, n);
    }
  }

  all.reserve(n);
  ordinary.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    const std::string& text = v.tokens[i];
    if (!unicode::is_valid_utf8(text)) {
      fail(SA_ERR_FORMAT, "tokenizer.ggml.tokens[%d] is not valid UTF-8", id);
    }
    const int32_t t = type(id);
    if (t < type_undefined || t > type_byte) {
      fail(SA_ERR_FORMAT, "tokenizer.ggml.token_type[%d] = %d is not a known token type", id, t);
    }
    if (!byte_level && t == type_byte && spm_byte_token_value(text) < 0) {
      fail(SA_ERR_FORMAT, "tokenizer.ggml.tokens[%d] = '%.100s' is a byte token but not <0xNN>",
           id, text.c_str());
    }
    all.try_emplace(text, id);
    // Byte-level vocabularies store plain tokens in the byte-mapped form; control,
    // user-defined and unknown tokens are not reachable from plain text. SentencePiece only
    // merges into normal pieces (its byte and unused pieces are not text either).
    const bool plain = byte_level ? (t != type_unknown && t != type_control &&
                                     t != type_user_defined)
                                  : (t == type_normal || t == type_undefined);
    if (plain) ordinary.try_emplace(text, id);
    // Text that spells a control, user-defined or unknown token (`<unk>`) is that token when
    // special tokens are parsed, as llama.cpp and Hugging Face's tokenizers take it.
    if ((t == type_control || t == type_user_defined || t == type_unknown) && !text.empty()) {
      specials[static_cast<uint8_t>(text[0])].push_back(id);
    }
  }
  for (auto& bucket : specials) {
    // Longest first so the first hit is the longest match; equal texts: lowest id first.
    std::stable_sort(bucket.begin(), bucket.end(), [&](int32_t a, int32_t b) {
      return v.tokens[static_cast<size_t>(a)].size() > v.tokens[static_cast<size_t>(b)].size();
    });
  }

  // Which of the family defaults applies, and the pre-tokenizer.
  bool bos_default = true;
  if (byte_level) {
    if (v.pre == "llama-bpe" || v.pre == "llama3" || v.pre == "llama-v3") {
      pre = pretokenizer_kind::llama3;
      ignore_merges = true;
    } else if (v.pre == "qwen2") {
      pre = pretokenizer_kind::qwen2;
      bos_default = false;
      nfc = true;  // Qwen's tokenizer.json: "normalizer": {"type": "NFC"}
    } else {
      pre = pretokenizer_kind::gpt2;
      bos_default = false;
      default_pre = !(v.pre.empty() || v.pre == "gpt2");
    }
  }
  add_bos = v.add_bos < 0 ? bos_default : v.add_bos != 0;
  add_eos = v.add_eos < 0 ? false : v.add_eos != 0;
  add_space_prefix = v.add_space_prefix < 0 ? true : v.add_space_prefix != 0;
  if (v.add_bos > 0 && v.bos < 0) {
    fail(SA_ERR_FORMAT, "tokenizer.ggml.add_bos_token is set but there is no bos token");
  }
  if (v.add_eos > 0 && v.eos < 0) {
    fail(SA_ERR_FORMAT, "tokenizer.ggml.add_eos_token is set but there is no eos token");
  }
  if (v.bos < 0) add_bos = false;

  if (byte_level) {
    bpe.emplace(v.merges, all, ordinary, v.unk);
  } else {
    spm.emplace(ordinary, all, v.scores, v.unk);
  }

  eog.assign(n, 0);
  for (int32_t id : {v.eos, v.eot, v.eom}) {
    if (id >= 0) eog[static_cast<size_t>(id)] = 1;
  }
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (type(id) != type_control) continue;
    for (std::string_view m : end_markers) {
      if (v.tokens[i] == m) eog[i] = 1;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    max_piece = std::max(max_piece, piece(static_cast<int32_t>(i), true).size());
  }
}

void tokenizer::impl::split_special(std::string_view text, std::vector<fragment>& out) const {
  size_t start = 0;  // of the pending text run
  for (size_t pos = 0; pos < text.size();) {
    int32_t hit = -1;
    for (int32_t id : specials[static_cast<uint8_t>(text[pos])]) {
      if (text.substr(pos).starts_with(v.tokens[static_cast<size_t>(id)])) {
        hit = id;
        break;
      }
    }
    if (hit < 0) {
      ++pos;
      continue;
    }
    if (pos > start) out.push_back({text.substr(start, pos - start), start, -1});
    out.push_back({{}, pos, hit});
    pos += v.tokens[static_cast<size_t>(hit)].size();
    start = pos;
  }
  if (start < text.size()) out.push_back({text.substr(start), start, -1});
}

std::string tokenizer::impl::piece(int32_t id, bool render_special) const {
  const std::string& text = v.tokens[static_cast<size_t>(id)];
  switch (type(id)) {
    case type_control:
      return render_special ? text : std::string();
    case type_user_defined:
      return text;
    case type_unknown:
      // What it stood for is lost; U+FFFD says so in the output.
      return render_special ? text : std::string("\xEF\xBF\xBD");
    case type_byte:
      if (!byte_level) return std::string(1, static_cast<char>(spm_byte_token_value(text)));
      break;
    default:
      break;
  }
  if (byte_level) return bpe_decode_text(text);
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (std::string_view(text).substr(pos).starts_with(spm_space)) {
      out += ' ';
      pos += spm_space.size();
    } else {
      out += text[pos++];
    }
  }
  return out;
}

tokenizer::tokenizer(tokenizer_vocab vocab) : impl_(std::make_unique<impl>()) {
  impl_->v = std::move(vocab);
  impl_->validate_and_index();
}

tokenizer::~tokenizer() = default;

std::vector<int32_t> tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  encode_options options;
  options.add_special = add_special;
  options.parse_special = parse_special;
  return encode(text, options);
}

std::vector<int32_t> tokenizer::encode(std::string_view text,
                                       const encode_options& options) const {
  const impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (options.add_special && m.add_bos) out.push_back(m.v.bos);

  std::vector<fragment> fragments;
  if (options.parse_special) {
    m.split_special(text, fragments);
  } else if (!text.empty()) {
    fragments.push_back({text, 0, -1});
  }

  // Each run of text normalized on its own, after the special tokens are found in the raw
  // text; `normalized` holds the current run's NFC form when it differs.
  const bool nfc = options.norm == normalization::nfc ||
                   (options.norm == normalization::model && m.nfc);
  std::string normalized;
  const auto run_text = [&](std::string_view t) {
    if (!nfc || unicode::nfc_quick_yes(t)) return t;
    normalized.clear();
    unicode::append_nfc(t, normalized);
    return std::string_view(normalized);
  };

  if (m.byte_level) {
    bpe_model::scratch scratch;
    std::vector<std::string_view> words;
    for (const fragment& f : fragments) {
      if (f.special >= 0) {
        out.push_back(f.special);
        continue;
      }
      words.clear();
      pretokenize(m.pre, run_text(f.text), words);
      for (std::string_view w : words) m.bpe->encode(w, m.ignore_merges, scratch, out);
    }
  } else {
    spm_model::scratch scratch;
    std::string buf;
    // The space prefix starts the input and every run of text after a special token, as
    // llama.cpp and Hugging Face's default (legacy) SentencePiece tokenizers do: a chat
    // template's "<s>[INST] Hi" is then the ids the model was trained on. Hugging Face's
    // non-legacy mode prefixes only text at the start of the input.
    bool prefix_next = true;
    for (const fragment& f : fragments) {
      if (f.special >= 0) {
        out.push_back(f.special);
        prefix_next = options.space_prefix_after_special;
        continue;
      }
      buf.clear();
      if (m.add_space_prefix && prefix_next) buf.append(spm_space);
      prefix_next = false;
      for (char c : run_text(f.text)) {
        if (c == ' ') {
          buf.append(spm_space);
        } else {
          buf += c;
        }
      }
      m.spm->encode(buf, scratch, out);
    }
  }

  if (options.add_special && m.add_eos && m.v.eos >= 0) out.push_back(m.v.eos);
  return out;
}

std::string tokenizer::piece(int32_t id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) fail(SA_ERR_INVALID_ARG, "token id %d is out of range", id);
  return impl_->piece(id, render_special);
}

int32_t tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->v.tokens.size()); }
int32_t tokenizer::bos() const { return impl_->v.bos; }
int32_t tokenizer::eos() const { return impl_->v.eos; }

bool tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->eog[static_cast<size_t>(id)] != 0;
}

bool tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->type(id) == type_control;
}

size_t tokenizer::max_piece_bytes() const { return impl_->max_piece; }
bool tokenizer::add_bos() const { return impl_->add_bos; }
bool tokenizer::add_eos() const { return impl_->add_eos; }
bool tokenizer::used_default_pretokenizer() const { return impl_->default_pre; }
bool tokenizer::normalizes_nfc() const { return impl_->nfc; }

}  // namespace sa

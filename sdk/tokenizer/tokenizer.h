// Tokenizer built from GGUF `tokenizer.ggml.*` metadata.
//
// Two families:
//   - byte-level BPE (`tokenizer.ggml.model = "gpt2"`): text is split by the pre-tokenizer named
//     in `tokenizer.ggml.pre` ("llama-bpe"/"llama3", "qwen2", "gpt2"/default), each piece is
//     mapped through the GPT-2 byte->unicode table and merged by `merges` rank;
//   - SentencePiece-style BPE (`tokenizer.ggml.model = "llama"`): spaces become U+2581, pieces
//     are merged by `scores`, unknown bytes fall back to <0xNN> byte tokens.
// Control and user-defined tokens (token_type 3 and 4) are matched in the raw text first when
// special-token parsing is on.
//
// Normalization: the runs of text between special tokens may be put in Unicode NFC before
// pre-tokenization, as the tokenizers that normalize do (Hugging Face's normalizer runs on the
// text around the added tokens). GGUF has no key for a tokenizer's normalizer, so the
// vocabulary implies it: the "qwen2" pre-tokenizer (Qwen's tokenizers have an NFC normalizer)
// normalizes; Llama 3's and GPT-2's have none and SentencePiece models for Llama use the
// identity normalization, so all others, and unknown labels, do not.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sa {

// Everything the tokenizer needs, as read from the file (see model loading).
struct tokenizer_vocab {
  std::string model;                 // "gpt2" or "llama"
  std::string pre;                   // pre-tokenizer label; "" = default
  std::vector<std::string> tokens;   // token text in the model's own encoding
  std::vector<int32_t> types;        // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<float> scores;         // SentencePiece scores (may be empty for gpt2)
  std::vector<std::string> merges;   // "left right", index = rank (gpt2)
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  int add_bos = -1;                  // -1: the family's default; 0/1 from the file
  int add_eos = -1;
  int add_space_prefix = -1;         // SentencePiece: default 1
};

// What encode() does to the text's Unicode form.
enum class normalization : uint8_t {
  model,  // what the vocabulary implies (see above)
  none,   // the text as given
  nfc,    // Normalization Form C
};

struct encode_options {
  bool add_special = false;    // BOS/EOS as add_bos/add_eos say
  bool parse_special = false;  // control/user-defined/unknown token texts become those tokens
  normalization norm = normalization::model;
  // SentencePiece: the text after each special token gets the space prefix too, as llama.cpp
  // and Hugging Face's default (legacy) mode do; false: only the start of the input does
  // (Hugging Face's legacy=False). No effect on byte-level vocabularies.
  bool space_prefix_after_special = true;
};

class tokenizer {
 public:
  // Validates the vocabulary (ids in range, merges well-formed, byte tokens present where
  // needed...) and throws sa::error(SA_ERR_FORMAT) naming the problem, or SA_ERR_UNSUPPORTED
  // for an unknown tokenizer model.
  //
  // Every byte must be reachable: a gpt2 vocabulary needs a token for each of the 256 mapped
  // bytes, a llama one a <0xNN> token for each byte, unless there is an unknown token, which
  // then stands in for the missing ones. So encode() never fails and never drops input.
  // A token text may appear more than once; looking a text up gives the lowest id.
  // Merges must name existing tokens; a merge involving a control, user-defined or unknown
  // token is accepted but never applied to plain text (likewise SentencePiece only merges into
  // normal pieces). add_bos/add_eos set to 1 without a bos/eos id is an error.
  explicit tokenizer(tokenizer_vocab vocab);
  ~tokenizer();

  // add_special: BOS/EOS as add_bos/add_eos say. parse_special: control/user-defined token
  // texts in `text` become those tokens (longest match first); otherwise that text is encoded
  // like any other. Invalid UTF-8 is encoded as bytes, never dropped. SentencePiece: the space
  // prefix goes before text at the start of the input and, unless
  // space_prefix_after_special is off, after each special token.
  // NFC, when applied, works on each run of text between special tokens; ill-formed UTF-8 is
  // kept as it is (see unicode::append_nfc). Without it, the pieces of the result join to the
  // text exactly; with it, to the text as normalized.
  // Safe to call from several threads at once (as are all const members).
  std::vector<int32_t> encode(std::string_view text, const encode_options& options) const;
  // The model's own normalization.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Raw bytes a token stands for. Control tokens give "" unless render_special; the unknown
  // token gives U+FFFD unless render_special (then its text); user-defined tokens their text.
  // Precondition: 0 <= id < n_vocab() (else sa::error SA_ERR_INVALID_ARG).
  std::string piece(int32_t id, bool render_special) const;

  int32_t n_vocab() const;
  int32_t bos() const;
  int32_t eos() const;
  bool is_eog(int32_t id) const;      // eos, eot, eom, and end markers such as <|im_end|>
  bool is_control(int32_t id) const;
  size_t max_piece_bytes() const;     // longest piece(id, true) over the vocabulary
  bool add_bos() const;               // what add_special adds, after the family defaults
  bool add_eos() const;
  // True when tokenizer.ggml.pre named a pre-tokenizer this build does not know, so the gpt2
  // one is used instead (tokens may then differ from the model's training).
  bool used_default_pretokenizer() const;
  // True when normalization::model means NFC.
  bool normalizes_nfc() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// Incremental UTF-8 assembler for streaming output: feed bytes, get back only complete
// characters; invalid sequences become U+FFFD. Holds at most 3 bytes between calls.
class utf8_stream {
 public:
  // Appends the complete part of (pending + bytes) to `out`.
  void push(std::string_view bytes, std::string& out);
  // Appends whatever is pending (as U+FFFD if incomplete) and resets.
  void flush(std::string& out);
  size_t pending() const { return n_pending_; }

 private:
  unsigned char pending_[4] = {};
  size_t n_pending_ = 0;
};

}  // namespace sa

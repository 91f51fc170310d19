// SentencePiece-style BPE: characters are merged by vocabulary score, highest first, and
// whatever is left that is not a token falls back to <0xNN> byte tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe.h"  // token_lookup

namespace sa {

// "▁" (U+2581), which stands for a space in SentencePiece vocabularies.
inline constexpr std::string_view spm_space = "\xE2\x96\x81";

// The byte a "<0xNN>" token text names, or -1 when the text has another form.
int spm_byte_token_value(std::string_view text);

class spm_model {
 public:
  // ordinary: the tokens merges may produce; all: every token (for the <0xNN> byte tokens).
  // scores: per token, may be empty (all equal). `ordinary` and `scores` must outlive the
  // model. Throws SA_ERR_FORMAT when a byte has no byte token and there is no unk (-1).
  spm_model(const token_lookup& ordinary, const token_lookup& all,
            const std::vector<float>& scores, int32_t unk);

  struct scratch {
    struct symbol {
      uint32_t start, len;  // bytes of the text; len 0: merged away
      int32_t prev, next;
    };
    struct candidate {
      float score;
      int32_t left, right;
      uint32_t len;  // left.len + right.len when pushed; a change means the entry is stale
    };
    std::vector<symbol> symbols;
    std::vector<candidate> heap;
  };

  // Appends the ids for `text`, which is already in vocabulary form (spaces as "▁").
  void encode(std::string_view text, scratch& s, std::vector<int32_t>& out) const;

 private:
  const token_lookup& ordinary_;
  const std::vector<float>& scores_;
  int32_t unk_;
  std::array<int32_t, 256> byte_ids_{};
};

}  // namespace sa

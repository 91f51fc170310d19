// Byte-level BPE (GPT-2 style): the reversible byte <-> code point map and merging by rank.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sa {

// Token text -> id; the views point into the vocabulary the tokenizer owns.
using token_lookup = std::unordered_map<std::string_view, int32_t>;

// GPT-2's bytes_to_unicode: printable bytes keep their code point, the other 68 map to
// U+0100 upwards in byte order (space -> U+0120 'Ġ', newline -> U+010A 'Ċ').
uint32_t bpe_byte_to_cp(uint8_t byte);
// The byte a code point stands for, or -1 when it is not in the map.
int bpe_cp_to_byte(uint32_t cp);

// Raw bytes of a token stored in the mapped form. Code points outside the map are kept as
// their UTF-8; the text must be valid UTF-8 (the tokenizer checks this up front).
std::string bpe_decode_text(std::string_view text);

class bpe_model {
 public:
  // merges: "left right", index = rank. `all` finds any token (for checking the merges),
  // `ordinary` the tokens plain text may become. Throws SA_ERR_FORMAT for a malformed merge,
  // a merge naming a missing token, or a byte with no token when there is no unk (-1).
  // `ordinary` must outlive the model.
  bpe_model(const std::vector<std::string>& merges, const token_lookup& all,
            const token_lookup& ordinary, int32_t unk);

  // Reusable buffers for encode(); one per calling thread.
  struct scratch {
    struct symbol {
      int32_t id;     // -1: byte with no token (becomes unk)
      int32_t prev, next;
    };
    struct candidate {
      int32_t rank, left, right, left_id, right_id, merged_id;
    };
    std::vector<symbol> symbols;
    std::vector<candidate> heap;
    std::string mapped;
  };

  // Appends the ids of one pre-token (raw bytes). ignore_merges: a pre-token that is itself a
  // token is emitted as that token without merging.
  void encode(std::string_view word, bool ignore_merges, scratch& s,
              std::vector<int32_t>& out) const;

 private:
  struct merge_result {
    int32_t rank, id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  const token_lookup& ordinary_;
  int32_t unk_;
  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, merge_result> merges_;
};

}  // namespace sa

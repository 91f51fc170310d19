// Pre-tokenizers for byte-level BPE: hand-written equivalents of the split regexes, with the
// same leftmost-alternative semantics (no regex engine).
//
//   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//           | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2:  as llama3 with \p{N} (one digit per piece) instead of \p{N}{1,3}
//
// \s is the White_Space property. Each maximal ill-formed UTF-8 subpart counts as one
// character of class "other" (as if it were U+FFFD), so no byte is ever lost: the pieces
// always tile the input exactly.
#pragma once

#include <string_view>
#include <vector>

namespace sa {

enum class pretokenizer_kind { gpt2, llama3, qwen2 };

// Appends the pieces of `text` to `out`, in order; they are views into `text`.
void pretokenize(pretokenizer_kind kind, std::string_view text,
                 std::vector<std::string_view>& out);

}  // namespace sa

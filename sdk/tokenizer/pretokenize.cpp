#include "tokenizer/pretokenize.h"

#include <algorithm>
#include <cstdint>

#include "tokenizer/unicode.h"

namespace sa {

namespace {

using unicode::cp_class;

struct unit {
  uint32_t cp;    // replacement_char for an ill-formed subpart
  uint32_t off;   // byte offset in the text
  cp_class cls;
};

// The text as characters, with a sentinel carrying the end offset.
class char_seq {
 public:
  explicit char_seq(std::string_view text) {
    units_.reserve(text.size() + 1);
    for (size_t pos = 0; pos < text.size();) {
      const unicode::utf8_char c = unicode::decode_utf8(text, pos);
      const cp_class cls = c.status == unicode::utf8_status::ok ? unicode::classify(c.cp)
                                                                : cp_class::other;
      units_.push_back({c.cp, static_cast<uint32_t>(pos), cls});
      pos += c.len;
    }
    n_ = units_.size();
    units_.push_back({0, static_cast<uint32_t>(text.size()), cp_class::other});
  }

  size_t size() const { return n_; }
  size_t offset(size_t i) const { return units_[i].off; }
  uint32_t cp(size_t i) const { return i < n_ ? units_[i].cp : 0; }
  bool is(size_t i, cp_class c) const { return i < n_ && units_[i].cls == c; }
  bool letter(size_t i) const { return is(i, cp_class::letter); }
  bool number(size_t i) const { return is(i, cp_class::number); }
  bool space(size_t i) const { return is(i, cp_class::space); }
  bool other(size_t i) const { return is(i, cp_class::other); }
  bool cr_lf(size_t i) const { return i < n_ && (units_[i].cp == '\r' || units_[i].cp == '\n'); }

  // End of the run of characters of class c starting at i.
  size_t run(size_t i, cp_class c) const {
    while (is(i, c)) ++i;
    return i;
  }

 private:
  std::vector<unit> units_;
  size_t n_ = 0;
};

// Simple case folding restricted to what the contraction letters need: ASCII, plus U+017F
// (LATIN SMALL LETTER LONG S), which folds to 's' like a regex engine's (?i) does.
uint32_t fold(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + ('a' - 'A');
  if (cp == 0x017F) return 's';
  return cp;
}

// Length in characters of the contraction ('s 't 're 've 'm 'll 'd) at i, or 0.
size_t contraction(const char_seq& s, size_t i, bool ignore_case) {
  if (s.cp(i) != '\'') return 0;
  const auto at = [&](size_t k) { return ignore_case ? fold(s.cp(i + k)) : s.cp(i + k); };
  const uint32_t a = at(1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  const uint32_t b = at(2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S)|\s+ at a whitespace character i: the whole run when it reaches the end of the
// text, else the run minus its last character (which then leads the next piece), but at least
// one character.
size_t trailing_space_end(const char_seq& s, size_t i) {
  const size_t j = s.run(i, cp_class::space);
  if (j == s.size()) return j;
  return std::max(j - 1, i + 1);
}

// Returns the end (in characters) of the piece starting at i < s.size().
size_t next_gpt2(const char_seq& s, size_t i) {
  if (const size_t n = contraction(s, i, false)) return i + n;
  // " ?X+" for X in L, N, other: the optional space only when X follows it.
  const size_t x = s.cp(i) == ' ' ? i + 1 : i;
  for (cp_class c : {cp_class::letter, cp_class::number, cp_class::other}) {
    if (s.is(x, c)) return s.run(x, c);
  }
  return trailing_space_end(s, i);
}

size_t next_llama3(const char_seq& s, size_t i, size_t max_digits) {
  if (const size_t n = contraction(s, i, true)) return i + n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (s.letter(i)) return s.run(i, cp_class::letter);
  if (!s.cr_lf(i) && !s.number(i) && s.letter(i + 1)) return s.run(i + 1, cp_class::letter);
  // \p{N}{1,max}
  if (s.number(i)) {
    size_t j = i;
    while (j - i < max_digits && s.number(j)) ++j;
    return j;
  }
  // " ?[^\s\p{L}\p{N}]+[\r\n]*"
  const size_t x = s.cp(i) == ' ' && s.other(i + 1) ? i + 1 : i;
  if (s.other(x)) {
    size_t j = s.run(x, cp_class::other);
    while (s.cr_lf(j)) ++j;
    return j;
  }
  // Here s[i] is whitespace. \s*[\r\n]+: up to and including the run's last \r or \n.
  const size_t end = s.run(i, cp_class::space);
  for (size_t j = end; j > i; --j) {
    if (s.cr_lf(j - 1)) return j;
  }
  return trailing_space_end(s, i);
}

}  // namespace

void pretokenize(pretokenizer_kind kind, std::string_view text,
                 std::vector<std::string_view>& out) {
  const char_seq s(text);
  for (size_t i = 0; i < s.size();) {
    size_t j = 0;
    switch (kind) {
      case pretokenizer_kind::gpt2: j = next_gpt2(s, i); break;
      case pretokenizer_kind::llama3: j = next_llama3(s, i, 3); break;
      case pretokenizer_kind::qwen2: j = next_llama3(s, i, 1); break;
    }
    out.push_back(text.substr(s.offset(i), s.offset(j) - s.offset(i)));
    i = j;
  }
}

}  // namespace sa

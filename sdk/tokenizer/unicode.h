// UTF-8 decoding/encoding and the code point classes the pre-tokenizers need.
//
// Decoding follows the Unicode "maximal subpart" practice: an ill-formed sequence is reported
// one maximal invalid subpart at a time (what a conforming decoder replaces by one U+FFFD), so
// callers can keep the raw bytes (byte-level BPE) or substitute U+FFFD (streaming output).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sa::unicode {

enum class cp_class : uint8_t { other = 0, letter = 1, number = 2, space = 3 };

struct class_range {
  uint32_t first, last;
  cp_class cls;
};

// Generated tables (unicode_tables.cpp).
extern const char* const tables_unicode_version;
extern const class_range class_ranges[];
extern const size_t n_class_ranges;

// letter: general category L*; number: N*; space: the White_Space property; else other.
cp_class classify(uint32_t cp);

constexpr uint32_t replacement_char = 0xFFFD;

enum class utf8_status : uint8_t {
  ok,         // a complete, well-formed character
  invalid,    // an ill-formed maximal subpart of `len` bytes
  truncated,  // the input ends inside a character that could still be well-formed
};

struct utf8_char {
  uint32_t cp;  // the code point when ok, replacement_char otherwise
  uint32_t len;  // bytes consumed (>= 1 whenever pos < s.size())
  utf8_status status;
};

// Decodes the character starting at s[pos]; precondition pos < s.size().
utf8_char decode_utf8(std::string_view s, size_t pos);

// Appends the UTF-8 encoding of cp (cp must be a scalar value: <= 0x10FFFF, not a surrogate).
void append_utf8(std::string& out, uint32_t cp);

bool is_valid_utf8(std::string_view s);

}  // namespace sa::unicode

#include "tokenizer/unicode.h"

#include <algorithm>

namespace sa::unicode {

cp_class classify(uint32_t cp) {
  // ASCII is most of the text in practice; skip the search for it.
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return cp_class::letter;
    if (cp >= '0' && cp <= '9') return cp_class::number;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return cp_class::space;
    return cp_class::other;
  }
  const class_range* end = class_ranges + n_class_ranges;
  const class_range* it = std::upper_bound(
      class_ranges, end, cp, [](uint32_t c, const class_range& r) { return c < r.first; });
  if (it == class_ranges) return cp_class::other;
  --it;
  return cp <= it->last ? it->cls : cp_class::other;
}

utf8_char decode_utf8(std::string_view s, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(pos);
  if (b0 < 0x80) return {b0, 1, utf8_status::ok};

  // Length and the valid range of the second byte, which rules out overlongs, surrogates
  // and code points above U+10FFFF (Unicode table 3-7).
  uint32_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  uint32_t cp = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1Fu;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0Fu;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07u;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    // Stray continuation byte, C0/C1 (always overlong) or F5..FF.
    return {replacement_char, 1, utf8_status::invalid};
  }

  uint32_t len = 1;
  for (uint32_t k = 0; k < need; ++k) {
    if (pos + len >= s.size()) return {replacement_char, len, utf8_status::truncated};
    const unsigned char b = byte(pos + len);
    if (b < lo || b > hi) return {replacement_char, len, utf8_status::invalid};
    cp = (cp << 6) | (b & 0x3Fu);
    ++len;
    lo = 0x80;
    hi = 0xBF;
  }
  return {cp, len, utf8_status::ok};
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_valid_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const utf8_char c = decode_utf8(s, pos);
    if (c.status != utf8_status::ok) return false;
    pos += c.len;
  }
  return true;
}

}  // namespace sa::unicode

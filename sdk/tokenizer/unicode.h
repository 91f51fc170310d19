// UTF-8 decoding/encoding, the code point classes the pre-tokenizers need, and Normalization
// Form C (Unicode Standard Annex #15) for tokenizers that normalize their input.
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

// ---- Normalization Form C ---------------------------------------------------------------

struct ccc_range {
  uint32_t first, last;
  uint8_t ccc;
};
struct decomposition {
  uint32_t cp, first, second;  // second = 0: a singleton
};
struct composition {
  uint32_t first, second, composite;
};

// Generated tables (unicode_nfc_tables.cpp).
extern const char* const nfc_tables_unicode_version;
extern const ccc_range ccc_ranges[];
extern const size_t n_ccc_ranges;
extern const decomposition canonical_decompositions[];
extern const size_t n_canonical_decompositions;
extern const composition canonical_compositions[];
extern const size_t n_canonical_compositions;
extern const uint32_t composing_starters[];
extern const size_t n_composing_starters;

// The canonical combining class of cp (0 for starters and for anything unassigned).
uint8_t combining_class(uint32_t cp);

// The primary composite of the pair, Hangul included, or 0 when there is none (composition
// exclusions have none).
uint32_t compose_pair(uint32_t first, uint32_t second);

// True when s is certainly its own NFC form without looking further: no byte of s is 0xCC or
// above, so every character is below U+0300 (ASCII and Latin-1 among them), where nothing has
// a non-zero class, changes under NFC or composes with what precedes it. Ill-formed bytes
// do not matter: append_nfc() keeps them as they are.
bool nfc_quick_yes(std::string_view s);

// Appends the NFC form of s to out: canonical decomposition, canonical ordering by combining
// class, canonical composition (composition exclusions and Hangul included). An ill-formed
// maximal subpart of s (see decode_utf8) is copied through unchanged and acts as a starter
// that composes with nothing, as U+FFFD would: no reordering or composition reaches across it.
// So byte-level tokenizers still see, and keep, the bytes they were given.
void append_nfc(std::string_view s, std::string& out);

// Appends the NFD form of s to out (the first two steps of append_nfc, same ill-formed bytes
// rule).
void append_nfd(std::string_view s, std::string& out);

}  // namespace sa::unicode

// Normalization Form C (Unicode Standard Annex #15, section 3.11 of the standard): canonical
// decomposition, canonical ordering, canonical composition. The data come from the generated
// tables (unicode_nfc_tables.cpp); Hangul syllables are handled algorithmically.
//
// Text is normalized a segment at a time: a segment ends before a starter that cannot compose
// with what precedes it, since nothing reorders across such a starter or composes with a
// character before it. Memory stays bounded by the longest segment, whatever the text's size.
#include <algorithm>
#include <utility>
#include <vector>

#include "tokenizer/unicode.h"

namespace sa::unicode {

namespace {

// Hangul syllables (the standard's section 3.12): S = s_base + (L * v_count + V) * t_count + T,
// with L, V, T the indexes of the leading consonant, vowel and trailing consonant (T = 0: none).
constexpr uint32_t s_base = 0xAC00, l_base = 0x1100, v_base = 0x1161, t_base = 0x11A7;
constexpr uint32_t l_count = 19, v_count = 21, t_count = 28;
constexpr uint32_t n_count = v_count * t_count, s_count = l_count * n_count;

// Below U+0300 no code point has a non-zero class, changes under NFC or composes with the one
// before it (the table generator checks this); nfc_quick_yes() and the lookups rely on it.
constexpr uint32_t inert_below = 0x0300;

struct coded {
  uint32_t cp;
  uint8_t ccc;
};

const decomposition* find_decomposition(uint32_t cp) {
  if (cp < 0x80) return nullptr;  // ASCII never decomposes
  const decomposition* end = canonical_decompositions + n_canonical_decompositions;
  const decomposition* it =
      std::lower_bound(canonical_decompositions, end, cp,
                       [](const decomposition& d, uint32_t c) { return d.cp < c; });
  return it != end && it->cp == cp ? it : nullptr;
}

// A starter that may compose with the character before it (then no segment may end before it).
bool composes_with_previous(uint32_t cp) {
  if (cp < inert_below) return false;
  if (cp - v_base < v_count || cp - (t_base + 1) < t_count - 1) return true;  // Hangul V, T
  return std::binary_search(composing_starters, composing_starters + n_composing_starters, cp);
}

class normalizer {
 public:
  normalizer(std::string& out, bool compose) : out_(out), compose_(compose) {}

  // Adds the full canonical decomposition of cp.
  void push(uint32_t cp) {
    if (cp - s_base < s_count) {
      const uint32_t s = cp - s_base;
      add(l_base + s / n_count);
      add(v_base + (s % n_count) / t_count);
      if (s % t_count != 0) add(t_base + s % t_count);
      return;
    }
    if (const decomposition* d = find_decomposition(cp)) {
      push(d->first);
      if (d->second != 0) push(d->second);
      return;
    }
    add(cp);
  }

  // Orders, composes and writes out the pending segment.
  void flush() {
    if (buf_.empty()) return;
    reorder();
    if (compose_) compose();
    for (const coded& c : buf_) append_utf8(out_, c.cp);
    buf_.clear();
  }

 private:
  void add(uint32_t cp) {
    const uint8_t ccc = combining_class(cp);
    if (ccc == 0 && !composes_with_previous(cp)) flush();
    buf_.push_back({cp, ccc});
  }

  // Canonical ordering: each run of non-starters sorted by class, stably (equal classes keep
  // their order: they do not commute).
  void reorder() {
    const auto by_class = [](const coded& a, const coded& b) { return a.ccc < b.ccc; };
    for (auto it = buf_.begin(); it != buf_.end();) {
      if (it->ccc == 0) {
        ++it;
        continue;
      }
      const auto run_end =
          std::find_if(it, buf_.end(), [](const coded& c) { return c.ccc == 0; });
      if (!std::is_sorted(it, run_end, by_class)) std::stable_sort(it, run_end, by_class);
      it = run_end;
    }
  }

  // Canonical composition: each character combines with the last starter before it unless
  // blocked, i.e. unless a character between them has class 0 or a class not below its own.
  // Between the starter and the character only non-starters in canonical order remain, so the
  // last one written decides.
  void compose() {
    constexpr auto none = static_cast<size_t>(-1);
    size_t starter = none;
    uint8_t last_ccc = 0;  // of the last character written
    size_t w = 0;          // written; never ahead of the character read
    for (const coded c : buf_) {
      if (starter != none && (w == starter + 1 || last_ccc < c.ccc)) {
        if (const uint32_t composite = compose_pair(buf_[starter].cp, c.cp)) {
          buf_[starter].cp = composite;
          continue;
        }
      }
      if (c.ccc == 0) starter = w;
      last_ccc = c.ccc;
      buf_[w++] = c;
    }
    buf_.resize(w);
  }

  std::string& out_;
  bool compose_;
  std::vector<coded> buf_;
};

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

void normalize(std::string_view s, std::string& out, bool compose) {
  // ASCII is most text and never changes; NFC also keeps everything below U+0300.
  if (compose ? nfc_quick_yes(s) : is_ascii(s)) {
    out.append(s);
    return;
  }
  out.reserve(out.size() + s.size() + s.size() / 8);
  normalizer n(out, compose);
  for (size_t pos = 0; pos < s.size();) {
    const utf8_char ch = decode_utf8(s, pos);
    if (ch.status == utf8_status::ok) {
      n.push(ch.cp);
    } else {
      n.flush();  // nothing reorders or composes across ill-formed bytes
      out.append(s.substr(pos, ch.len));
    }
    pos += ch.len;
  }
  n.flush();
}

}  // namespace

uint8_t combining_class(uint32_t cp) {
  if (cp < inert_below) return 0;
  const ccc_range* end = ccc_ranges + n_ccc_ranges;
  const ccc_range* it = std::upper_bound(
      ccc_ranges, end, cp, [](uint32_t c, const ccc_range& r) { return c < r.first; });
  if (it == ccc_ranges) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

uint32_t compose_pair(uint32_t first, uint32_t second) {
  if (first - l_base < l_count && second - v_base < v_count) {  // L + V
    return s_base + ((first - l_base) * v_count + (second - v_base)) * t_count;
  }
  if (first - s_base < s_count && (first - s_base) % t_count == 0 &&
      second - (t_base + 1) < t_count - 1) {  // LV + T
    return first + (second - t_base);
  }
  const composition* end = canonical_compositions + n_canonical_compositions;
  const composition* it = std::lower_bound(
      canonical_compositions, end, std::pair{first, second},
      [](const composition& c, const std::pair<uint32_t, uint32_t>& key) {
        return c.first != key.first ? c.first < key.first : c.second < key.second;
      });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

bool nfc_quick_yes(std::string_view s) {
  // A character at or above U+0300 takes a lead byte of 0xCC or above; so do the bytes
  // F5..FF, which are never valid (and would be kept anyway).
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0xCC; });
}

void append_nfc(std::string_view s, std::string& out) { normalize(s, out, true); }

void append_nfd(std::string_view s, std::string& out) { normalize(s, out, false); }

}  // namespace sa::unicode

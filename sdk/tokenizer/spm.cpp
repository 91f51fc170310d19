#include "tokenizer/spm.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace sa {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

int spm_byte_token_value(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

spm_model::spm_model(const token_lookup& ordinary, const token_lookup& all,
                     const std::vector<float>& scores, int32_t unk)
    : ordinary_(ordinary), scores_(scores), unk_(unk) {
  char name[8];
  for (unsigned b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto it = all.find(name);
    byte_ids_[b] = it == all.end() ? -1 : it->second;
    if (byte_ids_[b] < 0 && unk < 0) {
      fail(SA_ERR_FORMAT,
           "SentencePiece vocabulary has no byte token %s and no unknown token", name);
    }
  }
}

void spm_model::encode(std::string_view text, scratch& s, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  // One symbol per character; an ill-formed UTF-8 subpart is one symbol too (it is never a
  // token, so it ends up as byte tokens and no byte is lost).
  s.symbols.clear();
  for (size_t pos = 0; pos < text.size();) {
    const uint32_t len = unicode::decode_utf8(text, pos).len;
    const auto i = static_cast<int32_t>(s.symbols.size());
    s.symbols.push_back({static_cast<uint32_t>(pos), len, i - 1, -1});
    if (i > 0) s.symbols[i - 1].next = i;
    pos += len;
  }

  // Max-heap on score; among equal scores the leftmost pair first.
  const auto later = [](const scratch::candidate& a, const scratch::candidate& b) {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
  };
  s.heap.clear();
  const auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t len = s.symbols[left].len + s.symbols[right].len;
    const auto it = ordinary_.find(text.substr(s.symbols[left].start, len));
    if (it == ordinary_.end()) return;
    const float score = scores_.empty() ? 0.0f : scores_[it->second];
    s.heap.push_back({score, left, right, len});
    std::push_heap(s.heap.begin(), s.heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(s.symbols.size()); ++i) consider(i, i + 1);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), later);
    const scratch::candidate c = s.heap.back();
    s.heap.pop_back();
    scratch::symbol& l = s.symbols[c.left];
    scratch::symbol& r = s.symbols[c.right];
    // Lengths only grow, so an unchanged sum over a still-adjacent pair is the same text.
    if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.len) continue;
    l.len += r.len;
    l.next = r.next;
    if (r.next >= 0) s.symbols[r.next].prev = c.left;
    r.len = 0;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = s.symbols[i].next) {
    const std::string_view piece = text.substr(s.symbols[i].start, s.symbols[i].len);
    const auto it = ordinary_.find(piece);
    if (it != ordinary_.end()) {
      out.push_back(it->second);
      continue;
    }
    // Only single characters can be missing: every merge produced a token.
    const bool all_bytes = std::all_of(piece.begin(), piece.end(), [&](char ch) {
      return byte_ids_[static_cast<uint8_t>(ch)] >= 0;
    });
    if (all_bytes) {
      for (char ch : piece) out.push_back(byte_ids_[static_cast<uint8_t>(ch)]);
    } else {
      out.push_back(unk_);  // one unknown token for the whole character
    }
  }
}

}  // namespace sa

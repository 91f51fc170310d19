#include "tokenizer/bpe.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace sa {

namespace {

constexpr bool keeps_code_point(unsigned b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

constexpr std::array<uint16_t, 256> make_byte_to_cp() {
  std::array<uint16_t, 256> map{};
  unsigned next = 256;
  for (unsigned b = 0; b < 256; ++b) {
    map[b] = static_cast<uint16_t>(keeps_code_point(b) ? b : next++);
  }
  return map;
}

constexpr std::array<uint16_t, 256> byte_to_cp = make_byte_to_cp();
// 256 + 68 mapped bytes: every image is below 324.
constexpr uint32_t cp_limit = 324;
static_assert(byte_to_cp[' '] == 0x120 && byte_to_cp['\n'] == 0x10A && byte_to_cp[255] == 255);

constexpr std::array<int16_t, cp_limit> make_cp_to_byte() {
  std::array<int16_t, cp_limit> map{};
  for (auto& m : map) m = -1;
  for (unsigned b = 0; b < 256; ++b) map[byte_to_cp[b]] = static_cast<int16_t>(b);
  return map;
}

constexpr std::array<int16_t, cp_limit> cp_to_byte = make_cp_to_byte();

void append_mapped(std::string& out, uint8_t byte) {
  unicode::append_utf8(out, byte_to_cp[byte]);
}

}  // namespace

uint32_t bpe_byte_to_cp(uint8_t byte) { return byte_to_cp[byte]; }

int bpe_cp_to_byte(uint32_t cp) { return cp < cp_limit ? cp_to_byte[cp] : -1; }

std::string bpe_decode_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const unicode::utf8_char c = unicode::decode_utf8(text, pos);
    const int b = c.status == unicode::utf8_status::ok ? bpe_cp_to_byte(c.cp) : -1;
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      out.append(text.substr(pos, c.len));
    }
    pos += c.len;
  }
  return out;
}

bpe_model::bpe_model(const std::vector<std::string>& merges, const token_lookup& all,
                     const token_lookup& ordinary, int32_t unk)
    : ordinary_(ordinary), unk_(unk) {
  std::string mapped;
  for (unsigned b = 0; b < 256; ++b) {
    mapped.clear();
    append_mapped(mapped, static_cast<uint8_t>(b));
    const auto it = ordinary.find(mapped);
    byte_ids_[b] = it == ordinary.end() ? -1 : it->second;
    if (byte_ids_[b] < 0 && unk < 0) {
      fail(SA_ERR_FORMAT,
           "byte-level BPE vocabulary has no token for byte 0x%02X ('%s') and no unknown token",
           b, mapped.c_str());
    }
  }

  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    const size_t sp = m.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == m.size() ||
        m.find(' ', sp + 1) != std::string::npos) {
      fail(SA_ERR_FORMAT,
           "tokenizer.ggml.merges[%zu] = '%.200s' is not two tokens separated by one space",
           rank, m.c_str());
    }
    const std::string_view left = std::string_view(m).substr(0, sp);
    const std::string_view right = std::string_view(m).substr(sp + 1);
    joined.assign(left).append(right);
    for (std::string_view part : {left, right, std::string_view(joined)}) {
      if (all.find(part) == all.end()) {
        fail(SA_ERR_FORMAT, "tokenizer.ggml.merges[%zu] = '%.200s': '%.200s' is not a token",
             rank, m.c_str(), std::string(part).c_str());
      }
    }
    // A merge into or out of a control/user-defined token can never apply to plain text (or
    // would produce a special token from it); such merges are valid in the file but unused.
    const auto l = ordinary.find(left), r = ordinary.find(right), j = ordinary.find(joined);
    if (l == ordinary.end() || r == ordinary.end() || j == ordinary.end()) continue;
    // The first (lowest-rank) occurrence of a pair wins.
    merges_.try_emplace(pair_key(l->second, r->second),
                        merge_result{static_cast<int32_t>(rank), j->second});
  }
}

void bpe_model::encode(std::string_view word, bool ignore_merges, scratch& s,
                       std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const auto emit = [&](int32_t id) { out.push_back(id >= 0 ? id : unk_); };
  if (word.size() == 1) {
    emit(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (ignore_merges) {
    s.mapped.clear();
    for (char c : word) append_mapped(s.mapped, static_cast<uint8_t>(c));
    const auto it = ordinary_.find(s.mapped);
    if (it != ordinary_.end()) {
      out.push_back(it->second);
      return;
    }
  }

  const auto n = static_cast<int32_t>(word.size());
  s.symbols.clear();
  for (int32_t i = 0; i < n; ++i) {
    s.symbols.push_back({byte_ids_[static_cast<uint8_t>(word[static_cast<size_t>(i)])], i - 1,
                         i + 1 < n ? i + 1 : -1});
  }

  // Min-heap on (rank, left position): lowest rank first, leftmost among equal ranks.
  // Entries go stale when a neighbour merges; they are checked when popped.
  const auto later = [](const scratch::candidate& a, const scratch::candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  s.heap.clear();
  const auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t lid = s.symbols[left].id, rid = s.symbols[right].id;
    if (lid < 0 || rid < 0) return;
    const auto it = merges_.find(pair_key(lid, rid));
    if (it == merges_.end()) return;
    s.heap.push_back({it->second.rank, left, right, lid, rid, it->second.id});
    std::push_heap(s.heap.begin(), s.heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), later);
    const scratch::candidate c = s.heap.back();
    s.heap.pop_back();
    scratch::symbol& l = s.symbols[c.left];
    if (l.id != c.left_id || l.next != c.right || s.symbols[c.right].id != c.right_id) continue;
    scratch::symbol& r = s.symbols[c.right];
    l.id = c.merged_id;
    l.next = r.next;
    if (r.next >= 0) s.symbols[r.next].prev = c.left;
    r.id = -2;  // dead; never matches a candidate's ids again
    r.prev = r.next = -1;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = s.symbols[i].next) emit(s.symbols[i].id);
}

}  // namespace sa

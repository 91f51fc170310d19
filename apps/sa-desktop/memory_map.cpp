#include "memory_map.h"

#include <algorithm>
#include <vector>

namespace {

struct span {
  uint64_t begin, end;  // [begin, end) of history positions
};

// Spans to show: every held position with `context` tokens either side, and the newest tokens.
std::vector<span> shown_spans(const std::vector<uint64_t>& held, uint64_t n,
                              const memory_map_limits& lim) {
  std::vector<span> out;
  const auto add = [&](uint64_t b, uint64_t e) {
    if (!out.empty() && b <= out.back().end) out.back().end = std::max(out.back().end, e);
    else out.push_back({b, e});
  };
  for (const uint64_t p : held) {
    if (p >= n) continue;  // past the history (a prefill in progress)
    add(p > lim.context ? p - lim.context : 0, std::min(n, p + lim.context + 1));
  }
  if (n > 0) add(n > lim.context ? n - lim.context : 0, n);
  // Keep the newest max_shown tokens.
  uint64_t total = 0;
  size_t first = out.size();
  while (first > 0 && total + (out[first - 1].end - out[first - 1].begin) <= lim.max_shown) {
    total += out[first - 1].end - out[first - 1].begin;
    --first;
  }
  if (first > 0 && total < lim.max_shown) {  // part of one more span
    out[first - 1].begin = out[first - 1].end - (lim.max_shown - total);
    --first;
  }
  out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(first));
  return out;
}

// Each token's text through a streaming detokenizer, so multi-byte characters split across
// tokens come out whole (on the token that completes them).
void add_tokens(const sa_model* model, const int32_t* tokens, span s, const std::vector<uint64_t>& held,
                QList<memory_map_item>* items) {
  sa_detokenizer* d = nullptr;
  if (sa_detokenizer_create(model, SA_PIECE_RENDER_SPECIAL, &d) != SA_OK) return;
  std::vector<char> buf(256);
  size_t len = 0;
  auto h = std::lower_bound(held.begin(), held.end(), s.begin);
  for (uint64_t p = s.begin; p < s.end; ++p) {
    sa_status st = sa_detokenizer_push(d, tokens[p], buf.data(), buf.size(), &len);
    if (st == SA_ERR_BUFFER_TOO_SMALL) {
      buf.resize(len);
      st = sa_detokenizer_push(d, tokens[p], buf.data(), buf.size(), &len);
    }
    memory_map_item it;
    it.position = p;
    it.text = QString::fromUtf8(buf.data(), st == SA_OK ? qsizetype(len) : 0);
    while (h != held.end() && *h < p) ++h;
    it.held = h != held.end() && *h == p ? 1 : 0;
    items->append(it);
  }
  if (sa_detokenizer_flush(d, buf.data(), buf.size(), &len) == SA_OK && len > 0 && !items->isEmpty())
    items->back().text += QString::fromUtf8(buf.data(), qsizetype(len));
  sa_detokenizer_destroy(d);
}

uint64_t held_in(const std::vector<uint64_t>& held, uint64_t b, uint64_t e) {
  return static_cast<uint64_t>(std::lower_bound(held.begin(), held.end(), e) -
                               std::lower_bound(held.begin(), held.end(), b));
}

}  // namespace

bool held_positions(const sa_session* session, int32_t layer, int32_t kv_head,
                    std::vector<uint64_t>* out, QString* error) {
  out->clear();
#if SA_DESKTOP_MEMORY_MAP
  size_t n = 0;
  sa_status st = sa_session_memory_positions(session, layer, kv_head, nullptr, 0, &n);
  while (st == SA_OK || st == SA_ERR_BUFFER_TOO_SMALL) {
    out->resize(n);
    st = sa_session_memory_positions(session, layer, kv_head, out->data(), out->size(), &n);
    if (st == SA_OK) {
      out->resize(n);
      return true;
    }
  }
  out->clear();
  *error = QString::fromUtf8(sa_session_errmsg(session));
  return false;
#else
  (void)session, (void)layer, (void)kv_head;
  *error = QStringLiteral("this build of sa cannot report the positions its memory holds");
  return false;
#endif
}

bool build_memory_map(const sa_session* session, const sa_model* model, int32_t layer,
                      int32_t kv_head, const memory_map_limits& limits, memory_map* out,
                      QString* error) {
  *out = memory_map{};
  out->layer = layer;
  out->kv_head = kv_head;
  const int32_t* tokens = nullptr;
  size_t n = 0;
  if (sa_session_tokens(session, &tokens, &n) != SA_OK) {
    *error = QString::fromUtf8(sa_session_errmsg(session));
    return false;
  }
  out->n_tokens = n;
  std::vector<uint64_t> held;
  const bool ok = held_positions(session, layer, kv_head, &held, error);
  out->available = ok;
  out->n_held = held.size();
  if (!ok) held.clear();
  // Without positions, show the newest tokens unhighlighted.
  const std::vector<span> spans = shown_spans(held, n, limits);
  uint64_t at = 0;
  for (const span& s : spans) {
    if (s.begin > at) {
      memory_map_item gap;
      gap.gap = true;
      gap.position = at;
      gap.count = s.begin - at;
      gap.held = held_in(held, at, s.begin);
      out->items.append(gap);
    }
    add_tokens(model, tokens, s, held, &out->items);
    at = s.end;
  }
  return ok;
}

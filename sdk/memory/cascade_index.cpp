#include "memory/cascade_index.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <functional>

#include "core/error.h"

namespace sa {

namespace {

constexpr int32_t k_max_cascades = 48;  // keeps 2^(C-1) and C*W well inside int64
constexpr int64_t k_max_slots = INT32_MAX / 2;  // leaves room for the staging rows
constexpr int64_t k_max_entries = int64_t{1} << 36;  // n_streams * n_slots

int32_t mod(int32_t a, int32_t n) {
  const int32_t r = a % n;
  return r < 0 ? r + n : r;
}

}  // namespace

cascade_index::cascade_index(const cascade_config& c, int32_t n_streams)
    : cfg_(c), n_streams_(n_streams) {
  if (c.n_sinks < 0) fail(SA_ERR_INVALID_ARG, "cascade: n_sinks must be >= 0, got %d", c.n_sinks);
  if (c.n_cascades < 1 || c.n_cascades > k_max_cascades)
    fail(SA_ERR_INVALID_ARG, "cascade: n_cascades must be in [1, %d], got %d", k_max_cascades,
         c.n_cascades);
  if (c.window < 1) fail(SA_ERR_INVALID_ARG, "cascade: window must be >= 1, got %d", c.window);
  if (!(c.beta > 0.0f && c.beta <= 1.0f))  // also rejects NaN
    fail(SA_ERR_INVALID_ARG, "cascade: beta must be in (0, 1], got %g", double{c.beta});
  if (n_streams < 1) fail(SA_ERR_INVALID_ARG, "cascade: n_streams must be >= 1, got %d", n_streams);
  const int64_t slots = int64_t{c.n_sinks} + int64_t{c.n_cascades} * c.window;
  if (slots > k_max_slots)
    fail(SA_ERR_INVALID_ARG, "cascade: n_sinks + n_cascades * window = %lld exceeds %lld",
         static_cast<long long>(slots), static_cast<long long>(k_max_slots));
  if (slots * n_streams > k_max_entries)
    fail(SA_ERR_INVALID_ARG, "cascade: %d streams x %lld slots is too large", n_streams,
         static_cast<long long>(slots));
  n_slots_ = static_cast<int32_t>(slots);

  const auto nc = static_cast<size_t>(c.n_cascades);
  const size_t entries = static_cast<size_t>(n_streams) * static_cast<size_t>(n_slots_);
  stored_.assign(nc, 0);
  start_.assign(nc, 0);
  score_.assign(entries, 0.0f);
  orig_.assign(entries, -1);
  src_.resize(entries);
  for (size_t e = 0; e < entries; ++e) src_[e] = static_cast<int32_t>(e % n_slots_);
  is_touched_.assign(static_cast<size_t>(n_slots_), 0);
  touched_.reserve(static_cast<size_t>(n_slots_));
  route_.reserve(nc + 1);
  slot_index_.assign(static_cast<size_t>(n_slots_), 0);
}

void cascade_index::decay_and_add(int32_t q, const float* inc) {
  if (q < 0) fail(SA_ERR_INVALID_ARG, "cascade: decay_and_add with q = %d", q);
  if (!inc) fail(SA_ERR_INVALID_ARG, "cascade: decay_and_add without increments");
  // The factor is rounded to fp32, so its product with an fp32 score is exact in double; the
  // sum is rounded to double, then to fp32. The result is the same whether or not the compiler
  // fuses the multiply-add, so scores do not depend on the build flags.
  const double f = static_cast<float>(std::pow(static_cast<double>(cfg_.beta), q));
  for (int32_t s = 0; s < n_streams_; ++s) {
    const size_t row = static_cast<size_t>(s) * static_cast<size_t>(n_slots_);
    for (int32_t j = cfg_.n_sinks; j < n_slots_; ++j)
      score_[row + j] = static_cast<float>(f * score_[row + j] + double{inc[row + j]});
  }
}

void cascade_index::check_push(int32_t q) const {
  if (q < 0) fail(SA_ERR_INVALID_ARG, "cascade: push of q = %d tokens", q);
  if (q > INT32_MAX - n_slots_)
    fail(SA_ERR_INVALID_ARG, "cascade: push of %d tokens is too long", q);
}

int32_t cascade_index::route_token(int64_t g, int32_t& target) {
  // The route depends only on the counter and the ring pointers, so it is planned once for
  // all streams: the evicting slots of sub-caches 0.., then a write, a compare or a drop.
  const int32_t ns = cfg_.n_sinks, w = cfg_.window, nc = cfg_.n_cascades;
  const int64_t eager_last = cfg_.eager_fill ? int64_t{ns} + int64_t{nc} * w : -1;
  const int64_t t = g - ns;
  const bool eager = g <= eager_last;
  route_.clear();
  target = -1;
  for (int32_t i = 0; i < nc; ++i) {
    const int32_t base = ns + i * w;
    const bool accept = eager || (t & ((int64_t{1} << i) - 1)) == 0;
    int32_t& st = stored_[i];
    int32_t& sp = start_[i];
    if (accept && st == w) {  // full: evict the oldest into sub-cache i+1
      route_.push_back(base + sp);
      sp = (sp + 1) % w;
      continue;
    }
    if (accept || st == 0) {  // room left (or empty and not accepting): append
      target = base + mod(sp + st, w);
      ++st;
      ++held_;
      return k_route_write;
    }
    // Not accepting: the incoming token competes with the newest slot.
    target = base + mod(sp - 1, st);
    return k_route_compare;
  }
  return k_route_drop;
}

void cascade_index::push(int32_t q, const float* init, std::vector<move>& moves) {
  check_push(q);
  if (q > 0 && !init) fail(SA_ERR_INVALID_ARG, "cascade: push without initial scores");

  const int32_t ns = cfg_.n_sinks;
  const size_t stride = static_cast<size_t>(n_slots_);
  auto touch = [&](int32_t slot) {
    if (!is_touched_[slot]) {
      is_touched_[slot] = 1;
      touched_.push_back(slot);
    }
  };

  for (int32_t k = 0; k < q; ++k) {
    const int64_t g = seen_ + k;  // 0-based index of this token in the layer's stream
    const int32_t stage = n_slots_ + k;
    if (g < ns) {  // sinks first; their score is dropped
      const auto slot = static_cast<int32_t>(g);
      for (int32_t s = 0; s < n_streams_; ++s) {
        const size_t e = s * stride + slot;
        orig_[e] = g;
        score_[e] = 0.0f;
        src_[e] = stage;
      }
      touch(slot);
      continue;
    }

    int32_t target = -1;
    const int32_t action = route_token(g, target);
    for (int32_t slot : route_) touch(slot);
    if (target >= 0) touch(target);
    for (int32_t s = 0; s < n_streams_; ++s) {
      const size_t row = s * stride;
      int64_t c_orig = g;
      float c_score = init[static_cast<size_t>(s) * static_cast<size_t>(q) + k];
      int32_t c_src = stage;
      for (int32_t slot : route_) {  // the carried token takes the slot, its oldest moves on
        std::swap(c_orig, orig_[row + slot]);
        std::swap(c_score, score_[row + slot]);
        std::swap(c_src, src_[row + slot]);
      }
      // Ties go to the incoming token, as the reference's >=.
      if (action == k_route_write || (action == k_route_compare && c_score >= score_[row + target])) {
        orig_[row + target] = c_orig;
        score_[row + target] = c_score;
        src_[row + target] = c_src;
      }
    }
  }
  seen_ += q;

  // One copy per changed slot. Tokens only move to later sub-caches (or in from staging), so
  // descending destinations read every source before it is overwritten.
  std::sort(touched_.begin(), touched_.end(), std::greater<int32_t>());
  for (int32_t s = 0; s < n_streams_; ++s) {
    const size_t row = s * stride;
    for (int32_t d : touched_) {
      if (src_[row + d] != d) moves.push_back({s, src_[row + d], d});
      src_[row + d] = d;
    }
  }
  for (int32_t d : touched_) is_touched_[d] = 0;
  touched_.clear();
}

void cascade_index::plan_push(int32_t q, plan& out) {
  check_push(q);
  const int32_t ns = cfg_.n_sinks, nc = cfg_.n_cascades, per_token = nc + 3;
  out.ints.clear();
  out.pieces.clear();
  out.q_bound = std::max(q, 1);
  out.touched_bound = std::min<int64_t>({k_cascade_touched_cap, n_slots_, out.q_bound * (nc + 1)});
  const auto piece_ints = static_cast<size_t>(cascade_plan_ints(nc, out.q_bound, out.touched_bound));
  const float factor = static_cast<float>(std::pow(static_cast<double>(cfg_.beta), q));

  // Header and fill counts are those before the push, the same for every piece.
  std::vector<int32_t> head(static_cast<size_t>(k_cascade_header + nc));
  head[3] = 1;
  head[4] = std::bit_cast<int32_t>(factor);
  head[5] = next_position();
  head[6] = q;
  head[7] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(seen_)));
  head[8] = static_cast<int32_t>(static_cast<uint64_t>(seen_) >> 32);
  std::copy(stored_.begin(), stored_.end(), head.begin() + k_cascade_header);

  // A piece's tokens record slots first; closing the piece sorts its touched slots and turns
  // slots into indices.
  int32_t k0 = 0, in_piece = 0;
  auto open = [&](int32_t first) {
    k0 = first;
    in_piece = 0;
    out.pieces.push_back(out.ints.size());
    out.ints.insert(out.ints.end(), head.begin(), head.end());
    out.ints.resize(out.ints.size() + piece_ints - head.size(), -1);
  };
  auto close = [&] {
    int32_t* p = out.ints.data() + out.pieces.back();
    std::sort(touched_.begin(), touched_.end(), std::greater<int32_t>());
    for (size_t i = 0; i < touched_.size(); ++i) slot_index_[touched_[i]] = static_cast<int32_t>(i);
    p[0] = in_piece;
    p[1] = k0;
    p[2] = static_cast<int32_t>(touched_.size());
    if (k0 > 0) p[3] = 0;
    int32_t* tokens = p + k_cascade_header + nc;
    for (int32_t k = 0; k < in_piece; ++k) {
      int32_t* t = tokens + k * per_token;
      if (t[1] >= 0) t[1] = slot_index_[t[1]];
      for (int32_t r = 0; r < t[2]; ++r) t[3 + r] = slot_index_[t[3 + r]];
    }
    std::copy(touched_.begin(), touched_.end(), tokens + out.q_bound * per_token);
    for (int32_t d : touched_) is_touched_[d] = 0;
    touched_.clear();
  };

  open(0);
  for (int32_t k = 0; k < q; ++k) {
    const int64_t g = seen_ + k;
    int32_t action = k_route_sink, target = static_cast<int32_t>(g);
    if (g >= ns) {
      action = route_token(g, target);
    } else {
      route_.clear();
    }
    size_t fresh = target >= 0 && !is_touched_[target] ? 1 : 0;
    for (int32_t slot : route_) fresh += is_touched_[slot] ? 0 : 1;
    if (touched_.size() + fresh > static_cast<size_t>(out.touched_bound)) {
      close();
      open(k);
    }
    for (int32_t slot : route_) {
      if (!is_touched_[slot]) {
        is_touched_[slot] = 1;
        touched_.push_back(slot);
      }
    }
    if (target >= 0 && !is_touched_[target]) {
      is_touched_[target] = 1;
      touched_.push_back(target);
    }
    int32_t* t = out.ints.data() + out.pieces.back() + k_cascade_header + nc + in_piece * per_token;
    t[0] = action;
    t[1] = target;
    t[2] = static_cast<int32_t>(route_.size());
    std::copy(route_.begin(), route_.end(), t + 3);
    ++in_piece;
  }
  close();
  seen_ += q;
}

void cascade_index::check_slot(int32_t slot, const char* what) const {
  if (slot < 0 || slot >= n_slots_)
    fail(SA_ERR_INVALID_ARG, "cascade: %s of slot %d outside [0, %d)", what, slot, n_slots_);
}

void cascade_index::check_stream(int32_t stream, const char* what) const {
  if (stream < 0 || stream >= n_streams_)
    fail(SA_ERR_INVALID_ARG, "cascade: %s of stream %d outside [0, %d)", what, stream, n_streams_);
}

void cascade_index::check_sub(int32_t i, const char* what) const {
  if (i < 0 || i >= cfg_.n_cascades)
    fail(SA_ERR_INVALID_ARG, "cascade: %s of sub-cache %d outside [0, %d)", what, i,
         cfg_.n_cascades);
}

bool cascade_index::valid(int32_t slot) const {
  check_slot(slot, "valid");
  if (slot < cfg_.n_sinks) return slot < seen_;
  const int32_t local = slot - cfg_.n_sinks;
  return local % cfg_.window < stored_[local / cfg_.window];
}

int32_t cascade_index::rope_position(int32_t slot) const {
  check_slot(slot, "rope_position");
  const int32_t ns = cfg_.n_sinks, w = cfg_.window;
  if (slot < ns) return slot;
  // The reference walks the sub-caches newest first with ub = sum(stored), giving local slot j
  // of sub-cache i the position ((j - start) mod n) + ub - n, n = min(W, stored), and stops at
  // the first empty one; sub-caches fill in order, so every filled one is visited and ub is
  // held - i*W there. Slots of never-filled sub-caches keep their initial 0.
  const int32_t local = slot - ns, i = local / w, j = local % w;
  const int32_t n = std::min(w, stored_[i]);
  const int32_t pos = n == 0 ? 0 : mod(j - start_[i], n) + held_ - i * w - n;
  return pos + (seen_ > ns ? ns : 0);
}

int32_t cascade_index::next_position() const {
  return static_cast<int32_t>(std::min<int64_t>(seen_, cfg_.n_sinks)) + held_;
}

std::vector<int32_t> cascade_index::slots_in_order() const {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(next_position()));
  const int32_t ns = cfg_.n_sinks, w = cfg_.window;
  for (int32_t s = 0; s < ns && s < seen_; ++s) out.push_back(s);
  // Oldest sub-cache first, each ring from its oldest slot.
  for (int32_t i = cfg_.n_cascades - 1; i >= 0; --i) {
    const int32_t n = stored_[i];
    for (int32_t r = 0; r < n; ++r) out.push_back(ns + i * w + (start_[i] + r) % n);
  }
  return out;
}

float cascade_index::score(int32_t stream, int32_t slot) const {
  check_stream(stream, "score");
  check_slot(slot, "score");
  return score_[static_cast<size_t>(stream) * static_cast<size_t>(n_slots_) + slot];
}

int64_t cascade_index::original_index(int32_t stream, int32_t slot) const {
  check_stream(stream, "original_index");
  check_slot(slot, "original_index");
  return orig_[static_cast<size_t>(stream) * static_cast<size_t>(n_slots_) + slot];
}

int32_t cascade_index::stored(int32_t i) const {
  check_sub(i, "stored");
  return stored_[i];
}

int32_t cascade_index::start(int32_t i) const {
  check_sub(i, "start");
  return start_[i];
}

int64_t cascade_index::span() const {
  int64_t oldest = -1;
  for (int32_t slot = cfg_.n_sinks; slot < n_slots_; ++slot) {
    if (!valid(slot)) continue;
    const int64_t o = orig_[static_cast<size_t>(slot)];
    if (oldest < 0 || o < oldest) oldest = o;
  }
  return oldest < 0 ? 0 : seen_ - 1 - oldest;
}

size_t cascade_index::bytes() const {
  return sizeof(*this) + stored_.capacity() * sizeof(int32_t) +
         start_.capacity() * sizeof(int32_t) + score_.capacity() * sizeof(float) +
         orig_.capacity() * sizeof(int64_t) + src_.capacity() * sizeof(int32_t) +
         is_touched_.capacity() * sizeof(uint8_t) + touched_.capacity() * sizeof(int32_t) +
         route_.capacity() * sizeof(int32_t) + slot_index_.capacity() * sizeof(int32_t);
}

}  // namespace sa

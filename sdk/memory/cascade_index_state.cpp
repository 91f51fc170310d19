// cascade_index's saved state (layout in cascade_index.h).
#include <cmath>

#include "memory/cascade_index.h"

namespace sa {

void cascade_index::write_state(byte_packer& out) const {
  out.put(seen_).put(held_).put_array(stored_).put_array(start_).put_array(score_).put_array(orig_);
}

void cascade_index::read_state(byte_unpacker& in, const std::string& what) {
  const auto seen = in.get<int64_t>();
  const auto held = in.get<int32_t>();
  std::vector<int32_t> stored, start;
  std::vector<float> score;
  std::vector<int64_t> orig;
  const size_t nc = static_cast<size_t>(cfg_.n_cascades);
  const size_t entries = static_cast<size_t>(n_streams_) * static_cast<size_t>(n_slots_);
  in.get_array(stored, nc);
  in.get_array(start, nc);
  in.get_array(score, entries);
  in.get_array(orig, entries);
  if (seen < 0) fail(SA_ERR_STORE, "%s: token count %lld is negative", what.c_str(),
                     static_cast<long long>(seen));
  int64_t sum = 0;
  for (size_t i = 0; i < nc; ++i) {
    if (stored[i] < 0 || stored[i] > cfg_.window || start[i] < 0 || start[i] >= cfg_.window)
      fail(SA_ERR_STORE, "%s: sub-cache %zu has fill %d and start %d (window %d)", what.c_str(), i,
           stored[i], start[i], cfg_.window);
    sum += stored[i];
  }
  if (sum != held || held > seen)
    fail(SA_ERR_STORE, "%s: %d tokens held, sub-caches hold %lld, %lld seen", what.c_str(), held,
         static_cast<long long>(sum), static_cast<long long>(seen));
  for (size_t e = 0; e < entries; ++e)
    if (orig[e] < -1 || orig[e] >= seen || !std::isfinite(score[e]))
      fail(SA_ERR_STORE, "%s: slot entry %zu holds token %lld with score %g", what.c_str(), e,
           static_cast<long long>(orig[e]), static_cast<double>(score[e]));
  seen_ = seen;
  held_ = held;
  stored_ = std::move(stored);
  start_ = std::move(start);
  score_ = std::move(score);
  orig_ = std::move(orig);
}

}  // namespace sa

// PRR's speculation budget r by context length (the PRR paper, §4.4). Speculation pays when the
// attention over the predicted pages P fits in the time the selection takes beside it; a larger
// r predicts more pages (fewer misses to repair after the selection) but costs more. So r is
// chosen from a profile measured once per model, device and selection settings
// (`sa-bench gpu prr-profile`): the selection's time T_sel(L) and the speculative attention's
// T_spec(L, r) over a grid of r, at context lengths L. For a context length the session takes
//   r* = the largest r with T_spec(L, r) <= T_sel(L),
// each time linear in L between the profile's lengths (extended from the nearest two beyond
// them) and linear in r between the grid's points; the grid's smallest r when even that is
// slower, its largest when every r fits.
//
// The file is text, one profile per settings of a model on a device (a file may hold several):
//   sa-prr-profile 1
//   profile
//   model <fingerprint, 16 hex digits> heads <n> kv_heads <n> head_dim <n>
//   device <backend> <device name, to the end of the line>
//   select head|group page <n> budget_tokens <n> budget_ratio <x> sink <n> local <n> min <n> kv <type>
//   ratios <r_1> ... <r_m>                           (ascending, in (0, 16])
//   keys <L> select <us> speculate <us_1> ... <us_m> (one line per L, ascending)
//   end
// Lines starting with '#' and blank lines are ignored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "policy/sparse_config.h"

namespace sa {

// What a profile's times depend on: the model (its fingerprint: metadata and tensor layout), the
// device, and the selection's settings.
struct prr_profile_key {
  uint64_t model = 0;
  std::string backend;  // "cuda", "vulkan", "cpu"
  std::string device;   // the device's name as the backend lists it
  select_granularity granularity = select_granularity::per_head;
  int32_t page_size = 16, budget_tokens = 0;
  float budget_ratio = 0.125f;
  int32_t sink_pages = 1, local_pages = 1, min_pages = 3;
  dtype kv_type = dtype::f16;

  bool operator==(const prr_profile_key&) const = default;
  // The settings in the file's words ("select head page 16 ..."), for messages.
  std::string settings() const;
};

// The key of a session's selection settings.
prr_profile_key prr_key(uint64_t model, const std::string& backend, const std::string& device,
                        const sparse_config& c, dtype kv_type);

struct prr_profile {
  prr_profile_key key;
  int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;  // the model's shape (for the reader)
  std::vector<float> ratios;                          // the r grid, ascending
  struct row {
    int64_t keys = 0;
    double select_us = 0;                 // T_sel(L)
    std::vector<double> speculate_us;     // T_spec(L, r) per ratio
  };
  std::vector<row> rows;  // ascending keys

  // r* for a context of n_keys keys (the rule above).
  float ratio_at(int64_t n_keys) const;
};

// The profiles of a file. Throws SA_ERR_IO (unreadable) or SA_ERR_FORMAT naming the line.
std::vector<prr_profile> read_prr_profiles(const std::string& path);
// Writes the profiles as the whole file (a temporary file renamed over it: a reader sees the
// old or the new file). Throws SA_ERR_IO.
void write_prr_profiles(const std::string& path, const std::vector<prr_profile>& profiles);
// The file's profile for key. Throws what read_prr_profiles throws, and SA_ERR_INVALID_ARG
// saying what the file holds when no profile has that key.
prr_profile load_prr_profile(const std::string& path, const prr_profile_key& key);

}  // namespace sa

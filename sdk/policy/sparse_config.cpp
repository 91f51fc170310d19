#include "policy/sparse_config.h"

#include "core/error.h"

namespace sa {

void check(const sparse_config& c) {
  if (c.page_size < 1 || c.page_size > 1024) fail(SA_ERR_INVALID_ARG, "page_size %d is outside [1, 1024]", c.page_size);
  if (c.budget_tokens < 0) fail(SA_ERR_INVALID_ARG, "budget_tokens %d is negative", c.budget_tokens);
  if (!(c.budget_ratio > 0.0f && c.budget_ratio <= 1.0f))
    fail(SA_ERR_INVALID_ARG, "budget_ratio %g is outside (0, 1]", static_cast<double>(c.budget_ratio));
  if (c.sink_pages < 0) fail(SA_ERR_INVALID_ARG, "sink_pages %d is negative", c.sink_pages);
  if (c.local_pages < 1) fail(SA_ERR_INVALID_ARG, "local_pages %d must be at least 1", c.local_pages);
  if (c.min_pages < 1) fail(SA_ERR_INVALID_ARG, "min_pages %d must be at least 1", c.min_pages);
  if (c.dense_layers < 0) fail(SA_ERR_INVALID_ARG, "dense_layers %d is negative", c.dense_layers);
  if (c.rectify_every < 0) fail(SA_ERR_INVALID_ARG, "rectify_every %d is negative", c.rectify_every);
  if (!(c.epsilon > 0.0f && c.epsilon < 1.0f))
    fail(SA_ERR_INVALID_ARG, "vatt_epsilon %g is outside (0, 1)", static_cast<double>(c.epsilon));
  if (!(c.delta > 0.0f && c.delta < 1.0f))
    fail(SA_ERR_INVALID_ARG, "vatt_delta %g is outside (0, 1)", static_cast<double>(c.delta));
  if (!(c.pilot_ratio >= 0.0f && c.pilot_ratio <= 1.0f))
    fail(SA_ERR_INVALID_ARG, "vatt_pilot_ratio %g is outside [0, 1]", static_cast<double>(c.pilot_ratio));
  if (c.retro_window != 0 && (c.retro_window < 2 || c.retro_window > 32))
    fail(SA_ERR_INVALID_ARG, "retro_window %d is outside [2, 32]", c.retro_window);
  if (!(c.prr_ratio > 0.0f && c.prr_ratio <= 16.0f))
    fail(SA_ERR_INVALID_ARG, "prr_ratio %g is outside (0, 16]", static_cast<double>(c.prr_ratio));
  if (c.prr_calib_rows < 1 || c.prr_calib_rows > 4096)
    fail(SA_ERR_INVALID_ARG, "prr_calib_rows %d is outside [1, 4096]", c.prr_calib_rows);
}

}  // namespace sa

// The backends a test runs on: every kind compiled into this build. A kind whose device this
// machine lacks (CUDA without a GPU) is skipped with the reason, visibly, never passed.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/backend.h"

namespace sa_test {

// The kinds compiled in, CPU first.
std::vector<sa::backend_kind> compiled_backends();
// "cpu", "cuda", "vulkan": test-name suffixes.
std::string backend_label(sa::backend_kind kind);
// Empty when the kind has a device here; otherwise why not.
std::string missing_device(sa::backend_kind kind);

struct backend_name {
  std::string operator()(const testing::TestParamInfo<sa::backend_kind>& info) const {
    return backend_label(info.param);
  }
};

}  // namespace sa_test

// In a test body: skip (reported as skipped, with the reason) when `kind` has no device.
#define SA_SKIP_WITHOUT_DEVICE(kind)                                              \
  do {                                                                            \
    const std::string sa_why_ = sa_test::missing_device(kind);                    \
    if (!sa_why_.empty()) GTEST_SKIP() << "no " << sa_test::backend_label(kind)   \
                                       << " device: " << sa_why_;                 \
  } while (0)

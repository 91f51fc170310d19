// Checks through the C ABI that several test programs run on sessions.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sa/sa.h"
#include "session/session.h"

namespace sa_test {

// Prefills prompt, then greedy-decodes n tokens; returns the logits after each.
std::vector<std::vector<float>> greedy_logits(sa::session& s, const std::vector<int32_t>& prompt, int n);

// A tiny model written to a file and loaded through the C ABI, CPU session params at their
// defaults (p_), and a store path (db_) removed afterwards.
class tiny_model_api : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::string path_, db_;
  sa_model* model_ = nullptr;
  sa_session_params p_{};
};

// The session's current logits (sa_session_logits), copied; empty when it has none.
std::vector<float> session_logits(const sa_session* s);

// The session's token history (sa_session_tokens), copied.
std::vector<int32_t> session_tokens(const sa_session* s);

// Bitwise equality (also for NaN payloads and signed zeros).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);

// Removes a store file and the files SQLite keeps beside it.
void remove_store(const std::string& path);

// The device index of the first CUDA device sa_backend_info() lists, or -1 when there is none.
int32_t first_cuda_device();

// The statistics of the saved session (after all of `more`) and of the resumed one.
struct resume_stats {
  sa_stats saved{}, resumed{};
};

// Creates a session with p (store_path and session_id set), prefills prompt, decodes
// more[0, split), saves, decodes the rest, then resumes the saved session and decodes the rest
// again: the logits after each of those steps must be equal bitwise (gtest failures otherwise).
resume_stats expect_bitwise_resume(sa_model* model, const sa_session_params& p,
                                   const std::vector<int32_t>& prompt,
                                   const std::vector<int32_t>& more, size_t split);

}  // namespace sa_test

// A session: one conversation on a model — token history, KV memory, logits, sampler.
//
// Every mutating call is all-or-nothing: it works on the memory's free slots and commits the
// new size, history and logits only at the end, so an error or a cancellation leaves the
// session exactly as it was.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "memory/dense_memory.h"
#include "model/device_weights.h"
#include "model/forward.h"
#include "model/model.h"
#include "session/sampler.h"

namespace sa {

enum class memory_kind { dense };

struct session_config {
  backend_kind backend = backend_kind::cpu;
  int32_t n_threads = 0;       // 0: one per core
  int32_t n_ctx = 0;           // 0: the model's trained context
  int32_t n_batch = 256;       // prefill chunk
  memory_kind memory = memory_kind::dense;
  sampler_config sampling;
};

struct session_stats {
  uint64_t n_tokens = 0, n_kv_tokens = 0, kv_bytes_held = 0, kv_bytes_capacity = 0;
  uint64_t kv_bytes_read_last_call = 0, weight_bytes = 0, last_call_tokens = 0;
  double last_call_ms = 0;
};

// Return false to cancel a prefill.
using progress_fn = std::function<bool(size_t done, size_t total)>;

class session {
 public:
  session(std::shared_ptr<const model> m, const session_config& c);

  // Appends tokens (chunked by n_batch) and computes the logits after the last one.
  void prefill(std::span<const int32_t> tokens, const progress_fn& progress);
  // Appends one token and computes the logits after it.
  void decode(int32_t token);
  // Samples from the current logits (requires has_logits()).
  int32_t sample();
  void reset();

  bool has_logits() const { return !logits_.empty(); }
  const std::vector<float>& logits() const { return logits_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const model& get_model() const { return *model_; }
  session_stats stats() const;
  int32_t n_ctx() const { return static_cast<int32_t>(memory_.capacity()); }

 private:
  void check_tokens(std::span<const int32_t> tokens) const;
  void run(std::span<const int32_t> tokens, const progress_fn& progress);

  std::shared_ptr<const model> model_;
  session_config config_;
  std::unique_ptr<backend> backend_;
  device_weights weights_;
  dense_memory memory_;
  workspace ws_;
  sampler sampler_;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
  uint64_t kv_bytes_read_last_ = 0, last_call_tokens_ = 0;
  double last_call_ms_ = 0;
};

}  // namespace sa

// A session: one conversation on a model — token history, KV memory, logits, sampler.
//
// Calls are all-or-nothing. A prefill saves the memory's state first (for dense memory that is
// one counter; for the bounded memories a copy of the fixed-size cache, once per call) and
// restores it on any error or cancellation, and the logits too when its last chunk had
// overwritten them (they are kept on the host for that). A decode step validates everything
// and allocates what it needs on the host before it touches the memory; dense memory forgets
// an unfinished step for free, and should a bounded memory fail in the middle of a step (a
// backend fault or running out of memory, never bad input), the session refuses all further
// work rather than continue from a half-updated cache.
//
// The logits stay where they were computed: a decode step samples the next token on the
// backend and downloads only that id; logits() downloads them on first use after a step.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/step_buffer.h"
#include "memory/cascade_memory.h"
#include "memory/dense_memory.h"
#include "memory/kv_memory.h"
#include "model/device_weights.h"
#include "model/forward.h"
#include "model/model.h"
#include "policy/sparse_attention.h"
#include "policy/sparse_config.h"
#include "session/sampler.h"

namespace sa {

enum class memory_kind { dense, streaming, cascade };

struct session_config {
  backend_kind backend = backend_kind::cpu;
  int32_t device = 0;          // index among the backend kind's devices
  int32_t n_threads = 0;       // 0: one per core (CPU)
  int32_t n_ctx = 0;           // dense: most tokens held; 0: the model's trained context
  int32_t n_batch = 256;       // prefill chunk (the stride of strided prefill)
  memory_kind memory = memory_kind::dense;
  std::optional<dtype> kv_type;  // f32, f16 or bf16; none: the backend's default
  // streaming / cascade
  int32_t n_sinks = 64;
  int32_t cache_tokens = 0;    // sinks included; 0: the model's trained context
  int32_t n_cascades = 4;      // cascade only (streaming has one)
  float beta = 0.9999f;
  cascade_reduction reduction = cascade_reduction::max;
  bool homogeneous = false;
  // dense (full) memory: query-aware sparsity of decode steps
  sparse_config sparse;
  std::optional<std::string> prr_profile;  // PRR's r from this profile file (policy/prr_profile.h)
  sampler_config sampling;
};

struct session_stats {
  uint64_t n_tokens = 0, n_kv_tokens = 0, kv_bytes_held = 0, kv_bytes_capacity = 0;
  uint64_t kv_bytes_read_last_call = 0, weight_bytes = 0, last_call_tokens = 0;
  uint64_t sparse_keys_attended = 0, sparse_keys_total = 0, n_rectified = 0;
  double last_call_ms = 0;
  double retro_effective_budget = 0;  // RetroAttention's mean effective KV budget; 0 without it
  double prr_hit_rate = 0, prr_missed_pages = 0, prr_calibration_ms = 0;  // PRR's
  double prr_ratio = 0;  // PRR's r at the last decode step
};

// Return false to cancel a prefill.
using progress_fn = std::function<bool(size_t done, size_t total)>;

class session {
 public:
  session(std::shared_ptr<const model> m, const session_config& c);

  // Appends tokens (chunked by n_batch) and computes the logits after the last one.
  void prefill(std::span<const int32_t> tokens, const progress_fn& progress);
  // Appends one token and computes the logits after it; with `next`, also draws the next token
  // from them (on the backend: only its id is downloaded).
  void decode(int32_t token, int32_t* next = nullptr);
  // Samples from the current logits (requires has_logits()).
  int32_t sample();
  void reset();
  // PRR's r from now on chosen by the profile file at path (policy/prr_profile.h): its profile
  // for this model, device and selection settings. Throws SA_ERR_INVALID_ARG for an empty path,
  // without PRR or without such a profile in the file, SA_ERR_IO / SA_ERR_FORMAT for an unreadable or malformed
  // file.
  void use_prr_profile(const std::string& path);

  bool has_logits() const { return logits_state_ != logits_state::none; }
  // The logits after the last token (downloaded on first use after a step).
  const std::vector<float>& logits() const;
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const model& get_model() const { return *model_; }
  const kv_memory& memory() const { return *memory_; }
  // The query-aware sparsity policy, or nullptr without it.
  const sparse_attention* sparse() const { return sparse_.get(); }
  const backend& get_backend() const { return *backend_; }
  const device_weights& weights() const { return *weights_; }
  session_stats stats() const;
  const std::vector<head_stat>& head_stats() const;
  // The positions (indices into tokens()) whose K/V the memory holds in `layer` for `kv_head`,
  // ascending; -1 for either is the union over every layer or the layer's KV heads. Throws
  // SA_ERR_INVALID_ARG naming a value out of range, SA_ERR_BACKEND when the session is unusable.
  // Inside a prefill (its progress callback) they include the chunks done so far.
  void memory_positions(int32_t layer, int32_t kv_head, std::vector<uint64_t>& out) const;

 private:
  void check_tokens(std::span<const int32_t> tokens) const;
  // Prefills checked tokens (callers check_tokens first).
  void run(std::span<const int32_t> tokens, const progress_fn& progress, bool snapshot);
  void rectify();
  static std::unique_ptr<kv_memory> make_memory(backend& be, const model& m,
                                                const device_weights& w, const session_config& c);
  forward_env env();
  // K/V bytes from a forward() result, fetching a sparse step's figures if it deferred them.
  uint64_t kv_bytes_read(uint64_t from_forward) const;

  std::shared_ptr<const model> model_;
  session_config config_;
  std::unique_ptr<backend> backend_;
  std::shared_ptr<const device_weights> weights_;
  step_buffer step_;
  workspace ws_;
  sampler sampler_;
  std::unique_ptr<kv_memory> memory_;
  std::unique_ptr<sparse_attention> sparse_;  // with query-aware sparsity
  std::vector<int32_t> tokens_;
  // none: no logits yet; on_backend: in the workspace only; on_host: logits_ holds a copy too.
  enum class logits_state { none, on_backend, on_host };
  mutable logits_state logits_state_ = logits_state::none;
  mutable std::vector<float> logits_;
  std::string broken_;  // why the session refuses work, or empty
  uint64_t kv_bytes_read_last_ = 0, last_call_tokens_ = 0, n_rectified_ = 0;
  uint64_t unrectified_ = 0;      // sparse decode steps since the last rectification
  std::vector<head_stat> dense_stats_;  // the last decode step's figures without sparsity
  double last_call_ms_ = 0;

 public:
  // ---- persistence (sdk/store/session_saver.*) ----
  const session_config& config() const { return config_; }
  kv_memory& mutable_memory() { return *memory_; }
  const sampler& sampling() const { return sampler_; }
  void set_sampler_state(const std::array<uint64_t, 4>& s) { sampler_.set_state(s); }
  // ReSA's counters: sparse decode steps not yet rectified, tokens rectified so far.
  std::array<uint64_t, 2> rectify_state() const { return {unrectified_, n_rectified_}; }
  void set_rectify_state(const std::array<uint64_t, 2>& r) {
    unrectified_ = r[0];
    n_rectified_ = r[1];
  }
  bool usable() const { return broken_.empty(); }
  // State of the sparse policy beyond the memory (RetroAttention's window and stamps, PRR's
  // predictor and fitted parameters), as blobs next to the memory's; nothing without them.
  void write_policy_state(state_writer& w) const;
  void read_policy_state(state_reader& r);
  // A resumed session: the history and logits that go with the memory restored separately
  // (derived state, such as page summaries, is rebuilt from the memory here).
  void restore_history(std::vector<int32_t> tokens, std::vector<float> logits);
};

}  // namespace sa

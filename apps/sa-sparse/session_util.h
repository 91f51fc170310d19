// Shared plumbing of sa-sparse over the public C ABI (sa.h) only: ABI failures as exceptions,
// method names -> session params, owning handles, the decode verbs the measurements use,
// next-token distributions in double precision, and a progress line on stderr.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "sa/sa.h"

namespace sparse_app {

// A failed ABI call: what was being done, sa_errstr(status) and the session's (or thread's)
// message. main() prints it and exits with 1.
class abi_error : public std::runtime_error {
 public:
  abi_error(const std::string& what, sa_status status, const std::string& message);
};

// A bad command line (unknown method, malformed list): main() prints it and exits with 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws abi_error unless status is SA_OK or SA_DONE. session may be NULL (then the thread's
// sa_last_error() is the message).
void check(sa_status status, const sa_session* session, const std::string& what);

// ---- methods --------------------------------------------------------------------------------
//
// A method is written as one of (":F" is ReSA's rectification period, default --rectify):
//   dense                  no sparsity (the reference)
//   quest                  Quest, each query head ranks pages with its own query
//   quest-group            Quest pages ranked once per KV head with the group's mean query
//   quest+resa[:F]         quest + ReSA rectification every F decode steps
//   quest-group+resa[:F]   quest-group + rectification: ReSA's full recipe
//   quest+retro[:W]        quest + RetroAttention with window W (default 2; ":W" is the window)
//   quest-group+retro[:W]  quest-group + RetroAttention
//   quest+prr              quest + PRR's speculation, superset output (ratio --prr-ratio)
//   quest+prr-strict       quest + PRR, strict output (Quest's own)
//   quest-group+prr        quest-group + PRR, superset output
//   vattention             vAttention, deterministic top-k = Quest's pages
//   vattention-oracle      vAttention, deterministic top-k = exact top tokens
//   oracle                 the budget's exact top tokens (reads every key: a quality bound)
struct method_spec {
  std::string label;                         // the name as written above, F filled in
  int32_t sparse = SA_SPARSE_NONE;           // SA_SPARSE_*
  int32_t granularity = SA_SELECT_PER_HEAD;  // SA_SELECT_*
  int32_t rectify_every = 0;                 // 0 = never
  int32_t vatt_topk = SA_TOPK_QUEST;         // SA_TOPK_*
  int32_t retro_window = 0;                  // RetroAttention's window; 0 = none
  int32_t speculation = SA_SPECULATION_NONE;  // SA_SPECULATION_*
  int32_t prr_mode = SA_PRR_SUPERSET;          // SA_PRR_*
};

// Throws usage_error for an unknown name.
method_spec parse_method(const std::string& text, int32_t default_rectify);
std::vector<method_spec> parse_methods(const std::string& csv, int32_t default_rectify);

// Knobs shared by every session of a run (the rest of sa_session_params stays default).
struct session_knobs {
  int32_t backend = SA_BACKEND_CPU;  // SA_BACKEND_*
  int32_t n_threads = 2;
  int32_t n_ctx = 0;             // 0 = the model's trained context
  float prr_ratio = 1.0f;        // PRR's r
  float budget_ratio = 0.0625f;  // fraction of the tokens held, in (0, 1]
  int32_t dense_layers = 2;
  float vatt_epsilon = 0.05f;
  float vatt_delta = 0.05f;
  float vatt_pilot_ratio = 0.025f;
  int32_t check_error = 0;
  uint64_t seed = 0;  // vAttention's sampling stream
};

// ---- owning handles -------------------------------------------------------------------------

class model {
 public:
  explicit model(const std::string& path);  // throws abi_error
  ~model();
  model(const model&) = delete;
  model& operator=(const model&) = delete;
  sa_model* get() const { return m_; }
  const sa_model_desc& desc() const { return desc_; }
  const std::string& path() const { return path_; }
  std::vector<int32_t> tokenize(const std::string& text, bool add_special) const;
  std::string detokenize(std::span<const int32_t> tokens) const;

 private:
  sa_model* m_ = nullptr;
  sa_model_desc desc_{};
  std::string path_;
};

class session {
 public:
  session(const model& m, const method_spec& method, const session_knobs& knobs);  // throws
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;
  sa_session* get() const { return s_; }
  const method_spec& method() const { return method_; }

  void reset();
  void prefill(std::span<const int32_t> tokens);  // always dense
  int32_t step(int32_t token_in);                 // sa_decode_step; returns the greedy token
  int32_t sample();                               // sa_sample: greedy token of the logits
  std::span<const float> logits() const;          // [n_vocab], valid until the next call
  sa_stats stats() const;
  // Per (layer, query head) records of the last decode step, layer-major.
  const std::vector<sa_head_stat>& head_stats();

 private:
  sa_session* s_ = nullptr;
  method_spec method_;
  std::vector<sa_head_stat> heads_;
};

// Sums sa_stats' sparse counters over decode steps: density = keys attended / keys dense
// attention would read, over the (layer, query head) pairs that ran sparse. Steps whose budget
// covered every page (dense) add nothing; density() is 1 when no step ran sparse.
struct density_meter {
  uint64_t attended = 0, total = 0;
  uint64_t steps = 0, sparse_steps = 0;
  void add(const session& s);
  double density() const;
};

// ---- next-token distributions (double precision) ----------------------------------------------

int32_t argmax(std::span<const float> logits);  // first maximum
double log_softmax_at(std::span<const float> logits, int32_t token);
// KL(P || Q) with P = softmax(p_logits), Q = softmax(q_logits), in nats.
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);

// ---- small helpers ------------------------------------------------------------------------------

// "1/16" or "0.0625" -> 0.0625. Throws usage_error.
double parse_fraction(const std::string& text);
std::vector<double> parse_fractions(const std::string& csv);
std::vector<int64_t> parse_ints(const std::string& csv);
// 0.0625 -> "1/16"; other values with %.4g.
std::string fraction_label(double r);
std::vector<std::string> split_csv(const std::string& csv);

// One progress line on stderr, rewritten in place: "[label] done/total  elapsed  ETA".
class progress {
 public:
  progress(std::string label, uint64_t total);
  void update(uint64_t done, const std::string& detail = "");
  void finish();  // final line + newline

 private:
  std::string label_;
  uint64_t total_;
  std::chrono::steady_clock::time_point start_;
};

double seconds_since(std::chrono::steady_clock::time_point t0);

}  // namespace sparse_app

// The four measurements of sa-sparse. Each prints its table on stdout, progress on stderr, and
// appends one JSON record per measurement to the run's log (schema: main.cpp). ABI failures
// throw abi_error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "json_writer.h"
#include "session_util.h"

namespace sparse_app {

struct run_context {
  const model* m = nullptr;
  session_knobs knobs;  // threads, dense_layers, seed; budgets are set per measurement
  json_log* log = nullptr;
};

// passkey: Quest's protocol. Dense prefill of all but the last `tail` prompt tokens, the tail
// fed with sa_decode_step (sparse), then the 6 answer tokens generated greedily by decode steps.
struct passkey_options {
  std::vector<int64_t> lengths;  // total tokens: BOS + prompt + the 6 answer tokens
  int32_t bins = 5, trials = 4, tail = 64;
  std::vector<double> ratios;        // budget ratios of the sparse methods
  std::vector<method_spec> methods;  // sparse methods; dense always runs as the reference
  uint64_t seed = 1;
  std::string words;  // filler word list
};
void measure_passkey(run_context& ctx, const passkey_options& o);

// ppl: teacher-forced perplexity of a sparse suffix after a dense prefix (ReSA's protocol).
struct ppl_options {
  int64_t length = 2048;          // tokens held at the end of a sequence (at most)
  std::vector<int64_t> suffixes;  // x: tokens fed by decode steps
  int64_t last = 32;              // PPL also over the last this many predictions
  int32_t docs = 4;               // held-out documents, one sequence each
  double ratio = 1.0 / 16;
  std::vector<method_spec> methods;  // dense first is the reference
  std::string text;                  // held-out text file
};
void measure_ppl(run_context& ctx, const ppl_options& o);

// agreement: long generation against dense decoding.
struct agreement_options {
  int64_t prompt = 1024;   // prompt tokens (from the held-out stream)
  int64_t generate = 512;  // decode steps compared
  int32_t prompts = 2;     // prompts: the first `prompt` tokens of documents 0, 1, ...
  double ratio = 1.0 / 16;
  std::vector<method_spec> methods;
  bool free_run = true;  // also the first divergence of free-running greedy decoding
  std::string text;
};
void measure_agreement(run_context& ctx, const agreement_options& o);

// calibration: vAttention's (epsilon, delta) promise on the model's real attention, and the
// density exact top-k (oracle) needs for the same promise.
struct calibration_options {
  int64_t prefix = 1500;  // densely prefilled held-out tokens
  int64_t steps = 128;    // teacher-forced decode steps recorded
  std::vector<double> epsilons;
  double delta = 0.05;
  double ratio = 1.0 / 32;  // vAttention's deterministic top-k budget
  std::vector<double> oracle_ratios;
  bool oracle_topk_variant = true;  // also vAttention with vatt_topk = SA_TOPK_ORACLE
  std::string text;
};
void measure_calibration(run_context& ctx, const calibration_options& o);

}  // namespace sparse_app

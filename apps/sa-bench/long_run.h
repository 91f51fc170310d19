// sa-bench long-run: a long stream through a bounded memory at constant memory.
#pragma once

#include <cstdint>
#include <string>

struct long_run_options {
  std::string model;
  std::string backend = "cpu";     // cpu, cuda or vulkan
  std::string memory = "cascade";  // cascade or streaming
  int64_t tokens = 1 << 20;        // streamed in total
  int64_t every = 10000;           // a sample every this many tokens
  int32_t chunk = 512;             // tokens per sa_prefill call (also n_batch)
  int32_t cache = 1024;            // cache tokens, sinks included
  int32_t threads = 0;
  double max_growth_mib = 0;       // > 0: fail when the resident set grows more after the first sample
};

// Streams opts.tokens seeded random tokens into one session through the C ABI — sa_prefill
// chunks, a decode step after each — and prints, every opts.every tokens, the resident set,
// the device's free memory (GPU backends), the tokens the memory holds and the speed.
// Returns 0, 1 on an SDK error or when the resident set grew more than allowed.
int long_run(const long_run_options& opts);

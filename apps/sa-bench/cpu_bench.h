// sa-bench cpu: prefill and decode speed on the CPU for the kernel sets this CPU runs, and
// the bytes a decode step must read against the machine's streaming read bandwidth.
#pragma once

#include <string>
#include <vector>

// Prints, for each kernel set and thread count, prefill tokens/s over `prompt` random tokens
// and decode tokens/s over `steps` greedy steps after them (best of `reps` runs), and the
// weight bytes a decode step reads / its time beside a read-bandwidth probe with as many threads.
// `kernels` names the sets ("reference", "avx2", "avx2-int8", "avx512-vnni", "avx512-amx", "neon",
// "neon-dotprod"); empty: every set this CPU runs, the opt-in int8 ones included. A named set
// this CPU cannot run is skipped.
int cpu_bench(const std::string& model_path, const std::vector<int>& thread_counts, int prompt,
              int steps, int reps, const std::vector<std::string>& kernels = {});

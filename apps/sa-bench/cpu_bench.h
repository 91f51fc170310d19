// sa-bench cpu: prefill and decode speed on the CPU for every kernel set this CPU runs, and
// the bytes a decode step must read against the machine's streaming read bandwidth.
#pragma once

#include <string>
#include <vector>

// Prints, for each kernel set and thread count, prefill tokens/s over `prompt` random tokens
// and decode tokens/s over `steps` greedy steps after them (best of `reps` runs), and the
// weight bytes a decode step reads / its time beside a read-bandwidth probe with as many threads.
int cpu_bench(const std::string& model_path, const std::vector<int>& thread_counts, int prompt,
              int steps, int reps);

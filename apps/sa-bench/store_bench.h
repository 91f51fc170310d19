// sa-bench store: save and resume cost of the session store.
#pragma once

#include <string>

// Prints save time (incremental and full), resume time and stored bytes per 1K tokens for
// dense (full) and cascade memory as the stream grows by 1K tokens up to max_len.
int store_bench(const std::string& model_path, int threads, long long max_len, int reps);

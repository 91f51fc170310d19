// sa-bench sparse: decode speed and KV bytes read per step, dense against the query-aware
// sparse methods, side by side on the same prefix.
#pragma once

#include <string>
#include <vector>

int sparse_decode(const std::string& model_path, int threads, const std::vector<int>& lengths,
                  int steps);

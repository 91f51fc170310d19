// Quantized input rows in one buffer, laid out as an int8 product lays them out: the levels
// q [nx][n] and their biased copy u (q + 128), each row's block scales d [nx][n / block] and
// 16-element sums [nx][n / 16], and the rows' views for the kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/cpu/kernel_set.h"

namespace sa_test {

struct int8_inputs {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int16_t> sums;
  std::vector<uint8_t> u;
  std::vector<sa::cpu::q8_row> rows;

  // nx rows of n floats, row i = row_of(i), quantized in blocks of `block` (sa::cpu::q8_block).
  int8_inputs(int64_t nx, int64_t n, int64_t block, const std::function<std::vector<float>(int64_t)>& row_of);
};

}  // namespace sa_test

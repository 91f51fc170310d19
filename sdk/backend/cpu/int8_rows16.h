// Weight rows in the vector lanes: the int8 sets' prefill products take tiles of 16 weight rows,
// rearranged once per call so that lane (or tile column) r of every vector is row r.
// kernels_int8.cpp holds the layouts and the AVX-512 VNNI kernels over them, kernels_amx.cpp the
// AMX ones. x86-64 only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/kernel_set.h"

namespace sa::cpu::rows16 {

// Bytes of one block of a packed tile:
//   Q4_K: levels [group g: 64][row r: 16][4] u8 (elements 4g .. 4g + 3), scales [8][16] int32,
//         mins [8][16] int32 (m | m << 16), d [16] and dmin [16] f32.
//   Q6_K: levels [group g: 64][row r: 16][4] u8 (0..63), scales [16][16] int32, scale pairs
//         [8][16] int32 (s[2t] | s[2t + 1] << 16 as i16), d [16] f32.
//   Q8_0, Q4_0: levels [group g: 8][row r: 16][4] s8, start [16] int32 (-128 * the row's level
//         sum, for biased inputs), d [16] f32.
constexpr int64_t k_q4_k_block = 64 * 64 + 8 * 64 + 8 * 64 + 64 + 64;
constexpr int64_t k_q6_k_block = 64 * 64 + 16 * 64 + 8 * 64 + 64;
constexpr int64_t k_q32_block = 8 * 64 + 64 + 64;
// The rearranging is paid once per call: fewer inputs than this go through kernels::dot_q8.
constexpr int64_t k_min_inputs = 8;

// k_q4_k_block, k_q6_k_block, k_q32_block, or 0 for a type without a layout.
int64_t block_bytes(dtype type);

// Whether a call of rows weight rows against x[nx] goes through a tile: a type with a layout,
// rows <= 16, nx >= k_min_inputs, and for Q8_0 / Q4_0 every input's biased levels (q8_row::u).
bool takes(dtype type, int64_t rows, const q8_row* x, int64_t nx);

// Rows [0, rows) of w (rows <= 16; the other lanes zero), nb blocks each, into p [nb][block_bytes].
void pack(dtype type, const uint8_t* w, size_t row_size, int64_t rows, int64_t nb, uint8_t* p);

// pack() into this thread's buffer (reused by the next call on the thread), which it returns.
const uint8_t* packed_tile(dtype type, const uint8_t* w, size_t row_size, int64_t rows, int64_t nb);

// A packed tile against inputs x[nx] with AVX-512 VNNI: out[i * 16 + r] = row r . x[i], the
// oracle's bits (dot_q8_scalar).
void vnni(dtype type, const uint8_t* packed, int64_t nb, const q8_row* x, int64_t nx, float* out);

}  // namespace sa::cpu::rows16

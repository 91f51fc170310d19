// The avx512-amx kernels (kernels_amx.cpp) on CPUs without AMX: the file is compiled here with
// its tile instructions replaced by a software model of them (palette 1: LDTILECFG, TILELOADD,
// TILESTORED, TILEZERO, TDPBSSD, TDPBSUD, TILERELEASE, as Intel's reference defines them), and
// its 16-row product is held to the scalar oracle bit for bit. cpu_kernels_test checks the same
// kernels on the instructions themselves, but only on a CPU with AMX; this test runs wherever
// AVX-512 VNNI does (the kernels' float steps and the rest of the set), CI included.
#include <gtest/gtest.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace amx_model {

// Palette 1: 8 tiles of up to 16 rows of 64 bytes; a configuration gives each its rows and bytes
// per row. `errors` counts operations whose shapes do not agree (the instruction would fault).
struct tile_state {
  uint8_t rows[8] = {}, pad_[8] = {};
  uint16_t colsb[8] = {};
  uint8_t data[8][16][64] = {};
  int errors = 0;
};
thread_local tile_state tiles;

inline void load_config(const void* cfg) {
  const auto* c = static_cast<const uint8_t*>(cfg);
  if (c[0] != 1) ++tiles.errors;  // palette 1 only
  for (int t = 0; t < 8; ++t) {
    std::memcpy(&tiles.colsb[t], c + 16 + 2 * t, 2);
    tiles.rows[t] = c[48 + t];
    if (tiles.rows[t] > 16 || tiles.colsb[t] > 64) ++tiles.errors;
  }
}

inline void release() {
  for (int t = 0; t < 8; ++t) tiles.rows[t] = 0, tiles.colsb[t] = 0;
}

inline void load(int t, const void* base, int64_t stride) {
  if (tiles.rows[t] == 0) ++tiles.errors;
  std::memset(tiles.data[t], 0, sizeof tiles.data[t]);  // bytes past a row's colsb read as zero
  for (int r = 0; r < tiles.rows[t]; ++r)
    std::memcpy(tiles.data[t][r], static_cast<const uint8_t*>(base) + r * stride, tiles.colsb[t]);
}

inline void store(int t, void* base, int64_t stride) {
  if (tiles.rows[t] == 0) ++tiles.errors;
  for (int r = 0; r < tiles.rows[t]; ++r)
    std::memcpy(static_cast<uint8_t*>(base) + r * stride, tiles.data[t][r], tiles.colsb[t]);
}

inline void zero(int t) { std::memset(tiles.data[t], 0, sizeof tiles.data[t]); }

// C[m][n] += sum over k < colsb(A) / 4, e < 4 of A[m][4k + e] * B[k][4n + e] (A signed; B signed
// or unsigned), int32 with wrap-around.
template <bool B_SIGNED>
void dot_product(int c, int a, int b) {
  const int k_groups = tiles.colsb[a] / 4;
  if (tiles.rows[c] != tiles.rows[a] || tiles.rows[b] != k_groups || tiles.colsb[c] != tiles.colsb[b]) ++tiles.errors;
  for (int m = 0; m < tiles.rows[c]; ++m)
    for (int n = 0; n < tiles.colsb[c] / 4; ++n) {
      uint32_t acc;
      std::memcpy(&acc, &tiles.data[c][m][4 * n], 4);
      for (int k = 0; k < k_groups; ++k)
        for (int e = 0; e < 4; ++e) {
          const int32_t av = static_cast<int8_t>(tiles.data[a][m][4 * k + e]);
          const uint8_t braw = tiles.data[b][k][4 * n + e];
          const int32_t bv = B_SIGNED ? static_cast<int32_t>(static_cast<int8_t>(braw)) : static_cast<int32_t>(braw);
          acc += static_cast<uint32_t>(av * bv);
        }
      std::memcpy(&tiles.data[c][m][4 * n], &acc, 4);
    }
}

}  // namespace amx_model

#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbssd
#undef _tile_dpbsud
#define _tile_loadconfig amx_model::load_config
#define _tile_release amx_model::release
#define _tile_loadd(t, base, stride) amx_model::load(t, base, stride)
#define _tile_stored(t, base, stride) amx_model::store(t, base, stride)
#define _tile_zero(t) amx_model::zero(t)
#define _tile_dpbssd(c, a, b) amx_model::dot_product<true>(c, a, b)
#define _tile_dpbsud(c, a, b) amx_model::dot_product<false>(c, a, b)
#define avx512_amx_kernels avx512_amx_model_kernels
#include "backend/cpu/kernels_amx.cpp"
#undef avx512_amx_kernels

#include <algorithm>

#include "core/dtype.h"
#include "int8_inputs.h"
#include "quant/quants.h"
#include "test_util.h"

namespace {

using sa::dtype;

// Random blocks (any level, any scale short of inf/NaN) for `rows` rows of n_in weights.
std::vector<uint8_t> random_blocks(dtype type, int64_t rows, int64_t n_in, uint64_t seed) {
  const size_t row = static_cast<size_t>(sa::row_bytes(type, n_in)), bytes = static_cast<size_t>(sa::traits(type).block_bytes);
  std::vector<uint8_t> w(row * static_cast<size_t>(rows));
  uint64_t s = seed;
  for (uint8_t& b : w) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    b = static_cast<uint8_t>(s >> 56);
  }
  const int scales = type == dtype::q4_k ? 2 : 1;  // f16 scales with a small exponent
  for (size_t b = 0; b + 2 <= w.size(); b += bytes)
    for (int k = 0; k < scales; ++k) w[b + 2 * k + 1] &= 0x93;
  return w;
}

TEST(cpu_amx_model, tile_kernels_equal_the_scalar_oracle_bitwise) {
  if (sa::cpu::avx512_vnni_kernels() == nullptr) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  int checked = 0;
  for (dtype type : {dtype::q8_0, dtype::q4_0, dtype::q4_k, dtype::q6_k}) {
    const int64_t block = sa::cpu::q8_block(type);
    for (int64_t blocks : {1, 3, 5})
      for (int64_t rows : {16, 13})
        // 16: one tile; 21: a tile and 5 inputs in lanes; 37 with two inputs swapped: the
        // groups not evenly spaced
        for (int64_t nx : {16, 21, 37}) {
          const int64_t n = blocks * block;
          const size_t row = static_cast<size_t>(sa::row_bytes(type, n));
          const std::vector<uint8_t> w = random_blocks(type, rows, n, static_cast<uint64_t>(blocks * 1000 + rows * 10 + nx));
          const sa_test::int8_inputs in(nx, n, block, [&](int64_t i) {
            std::vector<float> xi = sa_test::random_normal(static_cast<size_t>(n), static_cast<uint64_t>(77 + i));
            for (int64_t e = i % 5; e < n; e += 5) xi[static_cast<size_t>(e)] = e % 2 ? 9.0f : -9.0f;  // levels of +-127
            return xi;
          });
          std::vector<sa::cpu::q8_row> xr = in.rows;
          if (nx == 37) std::swap(xr[3], xr[4]);
          std::vector<float> got(static_cast<size_t>(nx * 16));
          amx_model::tiles.errors = 0;
          ASSERT_TRUE(sa::cpu::dot_q8_rows16_amx(type, w.data(), row, rows, xr.data(), nx, n, got.data()))
              << sa::traits(type).name;
          EXPECT_EQ(amx_model::tiles.errors, 0) << sa::traits(type).name << ": tile shapes that would fault";
          for (int64_t r0 = 0; r0 < rows; r0 += 4) {
            const int64_t nr = std::min<int64_t>(4, rows - r0);
            std::vector<float> want(static_cast<size_t>(4 * nx));
            sa::cpu::dot_q8_scalar(type, w.data() + static_cast<size_t>(r0) * row, row, nr, xr.data(), nx, n, want.data());
            for (int64_t i = 0; i < nx; ++i)
              for (int64_t r = 0; r < nr; ++r, ++checked)
                ASSERT_EQ(std::memcmp(&want[static_cast<size_t>(i * 4 + r)], &got[static_cast<size_t>(i * 16 + r0 + r)], 4), 0)
                    << sa::traits(type).name << ", " << blocks << " blocks, " << rows << " rows x " << nx
                    << " inputs: row " << r0 + r << " input " << i;
          }
        }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace

#else

TEST(cpu_amx_model, tile_kernels_equal_the_scalar_oracle_bitwise) { GTEST_SKIP() << "x86-64 only"; }

#endif

// The avx512-amx kernel set: avx512-vnni with a prefill's integer products on AMX tiles (Intel's
// matrix unit, Sapphire Rapids and later). Opt-in like the other int8 sets, and bit for bit the
// same oracle (dot_q8_scalar): AMX's int8 dot products are exact int32 sums, so only the order
// of exact integer additions changes, and every float step is the oracle's.
//
// A tile of 16 weight rows is packed as for avx512-vnni (int8_rows16.h); its block of a
// 32-element type, or a 32-element sub-block of Q4_K, is already the B operand AMX takes: K / 4
// rows of 64 bytes, each 16 columns (weight rows) of 4 consecutive levels. Sixteen input rows
// (contiguous, one stride apart, as a product's quantized inputs are) are the A operand, 16 rows
// of 32 levels. One tile multiply then gives C[input][weight row], the block's (or sub-block's)
// exact sums for 256 outputs, which leave through memory for the float step (Q4_K: first each
// sub-block's scale, as in the VNNI kernel):
//   TDPBSSD (signed x signed) for Q8_0 and Q4_0, so the inputs need no bias;
//   TDPBSUD (signed inputs x unsigned levels 0..15) for Q4_K.
// Inputs past the last full group of 16, or not evenly spaced, and Q6_K take the VNNI kernels.
#include "backend/cpu/kernel_set.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "backend/cpu/int8_rows16.h"
#include "backend/cpu/x86_targets.h"

SA_KERNELS_BEGIN

namespace sa::cpu {

namespace {

// LDTILECFG's 64 bytes: palette 1; tmm0 C [16][16] int32, tmm1 A [16 inputs][32 levels],
// tmm2 B [8][64] (32 levels x 16 weight rows).
struct alignas(64) tile_config {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 32, 64};
  uint8_t rows[16] = {16, 16, 8};
};
static_assert(sizeof(tile_config) == 64);

// The tiles for the length of a call (the tile registers are per thread; released after, so an
// idle thread carries no AMX state through context switches).
struct tiles_in_use {
  SA_AMX tiles_in_use() {
    static const tile_config cfg;
    _tile_loadconfig(&cfg);
  }
  SA_AMX ~tiles_in_use() { _tile_release(); }
  tiles_in_use(const tiles_in_use&) = delete;
  tiles_in_use& operator=(const tiles_in_use&) = delete;
};

// Q8_0 / Q4_0: 16 inputs (x[0].q + i * stride) against a packed tile's nb blocks, out[i * 16 + r].
SA_AMX void q32_group(const uint8_t* packed, int64_t nb, const q8_row* x, int64_t stride, float* out) {
  alignas(64) int32_t c[16 * 16];
  alignas(64) float acc[16 * 8 * 16] = {};  // [input][chain][row]
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = packed + b * rows16::k_q32_block;
    _tile_zero(0);
    _tile_loadd(1, x[0].q + 32 * b, stride);
    _tile_loadd(2, pb, 64);
    _tile_dpbssd(0, 1, 2);
    _tile_stored(0, c, 64);
    const __m512 dw = _mm512_loadu_ps(pb + 576);
    for (int i = 0; i < 16; ++i) {
      float* a = acc + (8 * i + (b & 7)) * 16;
      const __m512 s = _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * i));
      _mm512_store_ps(a, _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x[i].d[b])), s, _mm512_load_ps(a)));
    }
  }
  for (int i = 0; i < 16; ++i) {
    const float* k = acc + 128 * i;
    const __m512 v = _mm512_add_ps(
        _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(k), _mm512_load_ps(k + 64)),
                      _mm512_add_ps(_mm512_load_ps(k + 16), _mm512_load_ps(k + 80))),
        _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(k + 32), _mm512_load_ps(k + 96)),
                      _mm512_add_ps(_mm512_load_ps(k + 48), _mm512_load_ps(k + 112))));
    _mm512_storeu_ps(out + 16 * i, v);
  }
}

// Q4_K: 16 inputs against a packed tile's nb blocks. Per block, sub-block j's 16 x 16 sums
// times the rows' scales sc[j] into T, the mins against the input sums into M (dpwssd, as the
// VNNI kernel), then the oracle's two fused steps on chain b mod 2.
SA_AMX void q4_k_group(const uint8_t* packed, int64_t nb, const q8_row* x, int64_t stride, float* out) {
  alignas(64) int32_t c[16 * 16];
  alignas(64) float acc[16 * 2 * 16] = {};  // [input][chain][row]
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = packed + b * rows16::k_q4_k_block;
    __m512i t[16];
    for (int i = 0; i < 16; ++i) t[i] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      _tile_zero(0);
      _tile_loadd(1, x[0].q + 256 * b + 32 * j, stride);
      _tile_loadd(2, pb + 512 * j, 64);
      _tile_dpbsud(0, 1, 2);
      _tile_stored(0, c, 64);
      const __m512i sc = _mm512_loadu_si512(pb + 4096 + 64 * j);
      for (int i = 0; i < 16; ++i) t[i] = _mm512_add_epi32(t[i], _mm512_mullo_epi32(_mm512_load_si512(c + 16 * i), sc));
    }
    const __m512 d = _mm512_loadu_ps(pb + 5120), dmin = _mm512_loadu_ps(pb + 5184);
    for (int i = 0; i < 16; ++i) {
      __m512i m = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j) {
        int32_t s2;
        std::memcpy(&s2, x[i].sums + 16 * b + 2 * j, 4);
        m = _mm512_dpwssd_epi32(m, _mm512_loadu_si512(pb + 4608 + 64 * j), _mm512_set1_epi32(s2));
      }
      const __m512 dx = _mm512_set1_ps(x[i].d[b]);
      float* a = acc + (2 * i + (b & 1)) * 16;
      __m512 v = _mm512_load_ps(a);
      v = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(t[i]), v);
      v = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dx), _mm512_cvtepi32_ps(m), v);
      _mm512_store_ps(a, v);
    }
  }
  for (int i = 0; i < 16; ++i)
    _mm512_storeu_ps(out + 16 * i, _mm512_add_ps(_mm512_load_ps(acc + 32 * i), _mm512_load_ps(acc + 32 * i + 16)));
}

// Whether x[0 .. 16) are one stride apart (the A tile's rows), and that stride.
bool evenly_spaced(const q8_row* x, int64_t* stride) {
  *stride = x[1].q - x[0].q;
  if (*stride <= 0) return false;
  for (int i = 1; i < 16; ++i)
    if (x[i].q - x[i - 1].q != *stride) return false;
  return true;
}

// kernels::dot_q8_rows16 of avx512-amx.
SA_AMX bool dot_q8_rows16_amx(dtype type, const uint8_t* w, size_t row_size, int64_t rows, const q8_row* x,
                              int64_t nx, int64_t n_in, float* out) {
  if (!rows16::takes(type, rows, x, nx)) return false;
  const int64_t nb = n_in / q8_block(type);
  const uint8_t* packed = rows16::packed_tile(type, w, row_size, rows, nb);
  int64_t g = 0;
  if (type == dtype::q6_k) {  // no tile kernel for Q6_K (yet): the VNNI one
    rows16::vnni(type, packed, nb, x, nx, out);
    return true;
  }
  const tiles_in_use tiles;
  for (; g + 16 <= nx; g += 16) {
    int64_t stride = 0;
    if (!evenly_spaced(x + g, &stride)) break;
    if (type == dtype::q4_k) q4_k_group(packed, nb, x + g, stride, out + g * 16);
    else q32_group(packed, nb, x + g, stride, out + g * 16);
  }
  if (g < nx) rows16::vnni(type, packed, nb, x + g, nx - g, out + g * 16);
  return true;
}

// AMX-TILE and AMX-INT8 (CPUID leaf 7: EDX bits 24, 25), and the kernel's permission for the
// tile data (Linux asks each process to request it).
bool amx_usable() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (!(d & (1u << 24)) || !(d & (1u << 25))) return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long k_req_xcomp_perm = 0x1023, k_xfeature_xtiledata = 18;
  return syscall(SYS_arch_prctl, k_req_xcomp_perm, k_xfeature_xtiledata) == 0;
#else
  return false;
#endif
}

}  // namespace

const kernels* avx512_amx_kernels() {
  static const kernels* const k = [] {
    const kernels* base = avx512_vnni_kernels();
    if (base == nullptr || !amx_usable()) return static_cast<const kernels*>(nullptr);
    static kernels set = *base;
    set.dot_q8_rows16 = dot_q8_rows16_amx;
    return static_cast<const kernels*>(&set);
  }();
  return k;
}

}  // namespace sa::cpu

SA_KERNELS_END

#else

namespace sa::cpu {
const kernels* avx512_amx_kernels() { return nullptr; }
}  // namespace sa::cpu

#endif

// Operands for a library GEMM (cuBLASLt) as f16: prefill rows converted from f32, weight rows
// of the other types dequantized. The conversions round to nearest even, as the tensor-core
// tiles of gemm_mma.cu do, so both prefill paths multiply the same f16 operands.
//
// rows_to_half: x [n_elems] f32 -> out [n_elems] f16 (x 16-byte aligned). Bytes: 6 per element.
// dequantize_rows: w rows [first, first + count) of any weight type -> out [count][cols] f16,
// 16 elements per thread (tile16 of quant_blocks.cuh). Bytes: the weight rows + 2 per element.
#include "quant_blocks.cuh"

namespace sa::cuda {

namespace {

constexpr int k_threads = 256;

__global__ void __launch_bounds__(k_threads) rows_to_half_kernel(const float* x, int64_t n_elems,
                                                                  uint16_t* out) {
  pdl_begin();
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * k_threads + threadIdx.x) * 4;
  if (i >= n_elems) return;
  if (i + 4 <= n_elems) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(x + i));
    const __half2 a = __floats2half2_rn(v.x, v.y), b = __floats2half2_rn(v.z, v.w);
    uint2 packed;
    packed.x = *reinterpret_cast<const uint32_t*>(&a);
    packed.y = *reinterpret_cast<const uint32_t*>(&b);
    *reinterpret_cast<uint2*>(out + i) = packed;
    return;
  }
  for (int64_t j = i; j < n_elems; ++j) out[j] = __half_as_ushort(__float2half_rn(x[j]));
}

template <etype T>
__global__ void __launch_bounds__(k_threads) dequantize_rows_kernel(wview w, int64_t first, int64_t count,
                                                                     int64_t cols, uint4* out) {
  pdl_begin();
  const int64_t tiles_per_row = cols / 16;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (t >= count * tiles_per_row) return;
  const int64_t r = t / tiles_per_row, k0 = (t % tiles_per_row) * 16;
  uint4 lo, hi;
  tile16<T>(w, first + r, k0, lo, hi);
  out[2 * t] = lo;
  out[2 * t + 1] = hi;
}

template <etype T>
void dequantize(const weight_ref& wr, int64_t first, int64_t count, void* out, cudaStream_t s) {
  const int64_t threads = count * (wr.cols / 16);
  launch_kernel(dequantize_rows_kernel<T>, dim3(static_cast<unsigned>(ceil_div(threads, k_threads))),
                dim3(k_threads), 0, s, view_of(wr), first, count, wr.cols, static_cast<uint4*>(out));
}

}  // namespace

cudaError_t launch_rows_to_half(const float* x, int64_t n_elems, void* out, cudaStream_t s) {
  if (n_elems <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(ceil_div(ceil_div(n_elems, 4), k_threads)));
  launch_kernel(rows_to_half_kernel, grid, dim3(k_threads), 0, s, x, n_elems, static_cast<uint16_t*>(out));
  return cudaGetLastError();
}

cudaError_t launch_dequantize_rows(const weight_ref& w, int64_t first, int64_t count, void* out,
                                   cudaStream_t s) {
  if (w.cols % 16 != 0 || first < 0 || count < 0 || first + count > w.rows) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  switch (w.type) {
    case etype::f16: dequantize<etype::f16>(w, first, count, out, s); break;
    case etype::bf16: dequantize<etype::bf16>(w, first, count, out, s); break;
    case etype::f32: dequantize<etype::f32>(w, first, count, out, s); break;
    case etype::q8_0: dequantize<etype::q8_0>(w, first, count, out, s); break;
    case etype::q4_0: dequantize<etype::q4_0>(w, first, count, out, s); break;
    case etype::q4_k: dequantize<etype::q4_k>(w, first, count, out, s); break;
    case etype::q6_k: dequantize<etype::q6_k>(w, first, count, out, s); break;
  }
  return cudaGetLastError();
}

}  // namespace sa::cuda

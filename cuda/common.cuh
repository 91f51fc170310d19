// Device helpers shared by the kernels: element conversions, vector loads, warp reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <utility>

#include "launchers.h"

namespace sa::cuda {

constexpr int k_warp = 32;

// ---- element types of K/V caches and activations ------------------------------------------
// kv_f32 / kv_f16 / kv_bf16: the storage type of a cache element, with its conversions.
struct kv_f32 {
  using storage = float;
  static constexpr etype code = etype::f32;
  static __device__ __forceinline__ float load(const storage* p) { return *p; }
  static __device__ __forceinline__ storage from(float x) { return x; }
};
struct kv_f16 {
  using storage = __half;
  static constexpr etype code = etype::f16;
  static __device__ __forceinline__ float load(const storage* p) { return __half2float(*p); }
  static __device__ __forceinline__ storage from(float x) { return __float2half_rn(x); }
};
struct kv_bf16 {
  using storage = __nv_bfloat16;
  static constexpr etype code = etype::bf16;
  static __device__ __forceinline__ float load(const storage* p) { return __bfloat162float(*p); }
  static __device__ __forceinline__ storage from(float x) { return __float2bfloat16_rn(x); }
};

// The raw 16 (f16/bf16) or 32 (f32) bytes of eight elements, for loads issued ahead of use.
template <typename T>
struct raw8 {
  uint4 a, b;  // b unused unless T is f32
};
template <typename T>
__device__ __forceinline__ raw8<T> fetch8(const typename T::storage* p) {
  raw8<T> r;
  r.a = __ldg(reinterpret_cast<const uint4*>(p));
  if constexpr (sizeof(typename T::storage) == 4)
    r.b = __ldg(reinterpret_cast<const uint4*>(p) + 1);
  else
    r.b = make_uint4(0, 0, 0, 0);
  return r;
}
template <typename T>
__device__ __forceinline__ void unpack8(const raw8<T>& r, float (&out)[8]) {
  if constexpr (sizeof(typename T::storage) == 4) {
    out[0] = __uint_as_float(r.a.x), out[1] = __uint_as_float(r.a.y);
    out[2] = __uint_as_float(r.a.z), out[3] = __uint_as_float(r.a.w);
    out[4] = __uint_as_float(r.b.x), out[5] = __uint_as_float(r.b.y);
    out[6] = __uint_as_float(r.b.z), out[7] = __uint_as_float(r.b.w);
  } else if constexpr (T::code == etype::bf16) {
    const uint32_t w[4] = {r.a.x, r.a.y, r.a.z, r.a.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __uint_as_float(w[i] << 16);
      out[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
  } else {
    const __half2* h = reinterpret_cast<const __half2*>(&r.a);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
}

// ---- reductions ----------------------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
// Sum over aligned groups of `width` lanes (a power of two <= 32); every lane gets its group's.
template <int WIDTH>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
  for (int o = WIDTH / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Block-wide sum; every thread gets the result. `scratch` holds 32 floats; blockDim.x % 32 == 0.
__device__ __forceinline__ float block_sum(float x, float* scratch) {
  const int lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp;
  const int n_warps = blockDim.x / k_warp;
  x = warp_sum(x);
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < n_warps ? scratch[lane] : 0.0f;
  return warp_sum(x);
}

// Eight elements of a cache row as floats from global memory (p 16-byte aligned).
template <typename T>
__device__ __forceinline__ void load8(const typename T::storage* p, float (&out)[8]) {
  unpack8<T>(fetch8<T>(p), out);
}
// The same from shared memory (plain loads: __ldg reads the global space only).
template <typename T>
__device__ __forceinline__ void load8_shared(const typename T::storage* p, float (&out)[8]) {
  raw8<T> r;
  r.a = *reinterpret_cast<const uint4*>(p);
  if constexpr (sizeof(typename T::storage) == 4)
    r.b = *(reinterpret_cast<const uint4*>(p) + 1);
  else
    r.b = make_uint4(0, 0, 0, 0);
  unpack8<T>(r, out);
}

// Runs f with the cache element type of a runtime etype.
template <typename F>
__host__ cudaError_t with_kv_type(etype t, F&& f) {
  switch (t) {
    case etype::f32: return f(kv_f32{});
    case etype::f16: return f(kv_f16{});
    case etype::bf16: return f(kv_bf16{});
    default: return cudaErrorInvalidValue;
  }
}

// f(T, S) with T the keys' element type and S their page summaries' (f32 or T itself).
template <typename F>
__host__ cudaError_t with_summary_types(etype kv_type, etype sum_type, F&& f) {
  return with_kv_type(kv_type, [&](auto t) {
    using T = decltype(t);
    if (sum_type == etype::f32) return f(T{}, kv_f32{});
    if (sum_type == T::code) return f(T{}, T{});
    return cudaErrorInvalidValue;
  });
}

// ---- asynchronous copies into shared memory (sm_80+) -----------------------------------------
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(smem))),
               "l"(gmem));
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(smem))),
               "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ---- whole rows into shared memory, a stage at a time --------------------------------------
// The tiles of the decode attention and of Quest's scoring are rows gathered from scattered
// places (a page's keys, a page's summaries). On sm_90 each row is one bulk copy (cp.async.bulk,
// the TMA unit), its bytes counted on its stage's mbarrier: one instruction a row, where 16-byte
// cp.async copies took one, and their address arithmetic, per 16 bytes. Before sm_90, the row's
// 16-byte cp.async copies in one commit group a stage. Rows are 16-byte multiples, 16-byte
// aligned at both ends.
//
// Use, with STAGES stages and stage s's k-th fill waited on with parity k & 1:
//   init() by thread 0 and a barrier; then per fill: expect() by one thread, a barrier, every
//   thread's copy() of its rows, commit() by every thread; wait<PENDING>(s, parity) by every
//   thread before reading the stage (PENDING: the commit groups issued after this stage's, for
//   the cp.async form).
struct row_stages {
  uint64_t* bar;  // [stages] mbarriers in shared memory

  static __device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
  }
  __device__ __forceinline__ void init(int stages) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    for (int i = 0; i < stages; ++i)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(bar + i)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
    (void)stages;
#endif
  }
  // The stage's next fill brings `bytes` (its one arrival).
  __device__ __forceinline__ void expect(int stage, uint32_t bytes) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar + stage)),
                 "r"(bytes)
                 : "memory");
#else
    (void)stage, (void)bytes;
#endif
  }
  __device__ __forceinline__ void copy(void* dst, const void* src, uint32_t bytes, int stage) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
            smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar + stage))
        : "memory");
#else
    (void)stage;
    for (uint32_t o = 0; o < bytes; o += 16) cp_async16(static_cast<char*>(dst) + o, static_cast<const char*>(src) + o);
#endif
  }
  __device__ __forceinline__ void commit() const {
#if !(defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
    cp_async_commit();
#endif
  }
  template <int PENDING>
  __device__ __forceinline__ void wait(int stage, uint32_t parity) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t done = 0;
    do {
      asm volatile(
          "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(smem_addr(bar + stage)), "r"(parity)
          : "memory");
    } while (!done);
#else
    (void)stage, (void)parity;
    cp_async_wait<PENDING>();
#endif
  }
};

// ---- programmatic dependent launch (sm_90+) ---------------------------------------------------
// Every kernel is launched through launch_kernel() below, which lets it start while the kernel before
// it on the stream finishes (its blocks are scheduled, its prologue runs), and every kernel
// calls pdl_begin() first: it waits there until the previous kernel has completed and its
// writes are visible, then lets the next kernel start in turn. So kernels still run in stream
// order, each one waiting for its predecessor, which waited for its own: what a kernel reads
// was written by a kernel that has completed. What it saves is the launch gap between small
// kernels (a decode step is hundreds of them). On devices before sm_90, or with
// SA_CUDA_PDL=0 (a diagnostic), launches are plain.
__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Whether launches on the current device may overlap (sm_90+, not disabled by SA_CUDA_PDL=0).
bool pdl_enabled();

// kernel<<<grid, block, smem, s>>>(args...), with programmatic dependent launch when enabled,
// at the stream's priority (a recorded step keeps it per kernel: the backend's main stream
// ranks above its side stream, so a side kernel takes the SMs the main one leaves). Like <<<>>>,
// a failed launch is reported by cudaGetLastError().
template <typename... Params, typename... Args>
__host__ void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                     Args&&... args) {
  cudaLaunchAttribute attr[2];
  int n = 0;
  int priority = 0;
  if (cudaStreamGetPriority(s, &priority) == cudaSuccess && priority != 0) {
    attr[n].id = cudaLaunchAttributePriority;
    attr[n++].val.priority = priority;
  }
  if (pdl_enabled()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = static_cast<unsigned>(n);
  (void)cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// ---- misc -----------------------------------------------------------------------------------
__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace sa::cuda

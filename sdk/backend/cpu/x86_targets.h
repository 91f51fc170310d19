// The instruction sets the x86-64 kernel files compile their functions for, as function
// attributes (the library itself is built for the baseline; kernel_set.cpp picks a set the CPU
// runs). Each set extends the one before it. x86-64 with GCC or Clang only.
#pragma once

#define SA_TARGET_AVX2 "avx2,f16c,fma"
#define SA_TARGET_AVX512 SA_TARGET_AVX2 ",avx512f,avx512bw,avx512dq,avx512vl"
#define SA_TARGET_VNNI SA_TARGET_AVX512 ",avx512vnni"
#define SA_TARGET_AMX SA_TARGET_VNNI ",amx-tile,amx-int8"

#define SA_AVX2 __attribute__((target(SA_TARGET_AVX2)))
#define SA_AVX512 __attribute__((target(SA_TARGET_AVX512)))
#define SA_VNNI __attribute__((target(SA_TARGET_VNNI)))
#define SA_AMX __attribute__((target(SA_TARGET_AMX)))

// Around a kernel file's intrinsics code: GCC's AVX-512 intrinsics start their results from a
// self-initialised "undefined" register, which its uninitialised-use analysis reports once
// inlined; the values are never read.
#if defined(__GNUC__) && !defined(__clang__)
#define SA_KERNELS_BEGIN                                          \
  _Pragma("GCC diagnostic push")                                  \
  _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")   \
  _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define SA_KERNELS_END _Pragma("GCC diagnostic pop")
#else
#define SA_KERNELS_BEGIN
#define SA_KERNELS_END
#endif

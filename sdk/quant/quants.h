// Tensor element formats: conversion, dequantization, fused dot products and reference
// quantizers for F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K (block layouts as in GGUF/ggml).
//
//   Q8_0  32 elems, 34 B:  f16 d | int8 qs[32]                      x = d*q
//   Q4_0  32 elems, 18 B:  f16 d | u8 qs[16] (low nibble -> j, high -> j+16)   x = d*(q-8)
//   Q4_K 256 elems, 144 B: f16 d | f16 dmin | u8 scales[12] (8 six-bit scales + 8 six-bit mins)
//                          | u8 qs[128]                           x = d*sc*q - dmin*m
//   Q6_K 256 elems, 210 B: u8 ql[128] | u8 qh[64] | int8 scales[16] | f16 d   x = d*sc*(q-32)
//
// All functions take n = number of elements, a multiple of the type's block size.
// These are the CPU reference; every other backend is checked against them.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace sa {

float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);  // round to nearest even; overflow -> inf; NaN stays NaN
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);  // round to nearest even

// dst[0..n) = the values stored in src. dst must not overlap src; src needs no alignment.
void dequantize_row(dtype t, const void* src, float* dst, int64_t n);

// sum_i value_i(src) * x[i], accumulated in fp32 (per-block partial sums allowed).
float dot_row(dtype t, const void* src, const float* x, int64_t n);

// Reference quantizer: writes row_bytes(t, n) bytes. Deterministic. For F32/F16/BF16 it converts.
void quantize_row(dtype t, const float* src, void* dst, int64_t n);

}  // namespace sa

// Dense attention with log-sum-exp: row i of q attends to keys [0, kv_len[i]) of its GQA
// group's KV head (values through v_rows when given); decode rows and prefill chunks alike.
// The body, its shapes, work split and bytes: attention_split.glsl. GMAX = 8 query vectors (rows x
// heads of one group) per workgroup share every K/V read.
// The _g4 variants bound the vectors at 4 (a decode row of a group of up to 4 heads), with
// half the registers and more loads in flight.
//! variant attention_f32 KV=0 GMAX=8u
//! variant attention_f16 KV=1 GMAX=8u
//! variant attention_bf16 KV=2 GMAX=8u
//! variant attention_g4_f32 KV=0 GMAX=4u
//! variant attention_g4_f16 KV=1 GMAX=4u
//! variant attention_g4_bf16 KV=2 GMAX=4u
#version 460
#extension GL_GOOGLE_include_directive : require
#define SETS 0
#include "attention_split.glsl"

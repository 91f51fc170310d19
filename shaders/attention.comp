// Dense attention with log-sum-exp: row i of q attends to keys [0, kv_len[i]) of its GQA
// group's KV head (values through v_rows when given); decode rows and prefill chunks alike.
// The body, its shapes, work split and bytes: attention_split.glsl. GMAX = 8 query vectors (rows x
// heads of one group) per workgroup share every K/V read.
//! variant attention_f32 KV=0
//! variant attention_f16 KV=1
//! variant attention_bf16 KV=2
#version 460
#extension GL_GOOGLE_include_directive : require
#define GMAX 8u
#define SETS 0
#include "attention_split.glsl"

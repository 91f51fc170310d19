// Partial attention over key sets: item (row i, head h) attends to the cache rows
// slots[offsets[item] .. offsets[item + 1]) of KV head h / group, key j's score plus
// log_weights[j] when given; an empty set gives out 0, lse -inf. The body, its shapes, work
// split and bytes: attention_split.glsl, here with one query vector per workgroup (each item has its
// own keys); a set longer than the split length is cut over workgroups and merged.
//! variant attention_sets_f32 KV=0
//! variant attention_sets_f16 KV=1
//! variant attention_sets_bf16 KV=2
#version 460
#extension GL_GOOGLE_include_directive : require
#define GMAX 1u
#define SETS 1
#include "attention_split.glsl"

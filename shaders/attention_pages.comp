// Attention of one decode row over the pages Quest selected (backend::attention_pages): query
// head h attends to the keys of the page list of its ranker (list h, or with group_mean the
// list of its KV head h / group), the list's n_selected ascending page ids giving cache rows
//   key j -> ids[j / page_size] * page_size + j % page_size,   j < n_selected_keys =
//   (n_selected - 1) * page_size + n_keys - (n_pages - 1) * page_size
// (the newest, partial page is forced, so it is the list's last), all from the device page
// plan {n_keys, n_pages, n_selected, take}: a recorded step replays for any plan within
// select_bound pages. A masked table (PRR's mask_pages: flags & 4) may hold ids of -1, whose
// keys get no weight, and need not end with the newest page (it is compacted), so its keys
// are cut at n_keys one by one.
//   q f32 [n_heads][head_dim]; k, v [n_kv_heads][capacity][head_dim] of the cache type;
//   ids i32 [n_rankers][select_bound]; out f32 [n_heads][head_dim], lse f32 [n_heads]
// The body, its work split and bytes: attention_split.glsl (one row: rb = 1). Per-head lists
// take one query vector per workgroup (GMAX 1, as attention_sets); group lists take the
// group's heads (GMAX 4 or 8, as dense attention), so they share every K/V read: K and V of
// the selected pages read once per KV head (group_mean) or per query head. The keys are cut
// over splits (a launch shape: select_bound * page_size) merged by attention_combine.comp.
//! variant attention_pages_f32 KV=0 GMAX=1u
//! variant attention_pages_f16 KV=1 GMAX=1u
//! variant attention_pages_bf16 KV=2 GMAX=1u
//! variant attention_pages_g4_f32 KV=0 GMAX=4u
//! variant attention_pages_g4_f16 KV=1 GMAX=4u
//! variant attention_pages_g4_bf16 KV=2 GMAX=4u
//! variant attention_pages_g8_f32 KV=0 GMAX=8u
//! variant attention_pages_g8_f16 KV=1 GMAX=8u
//! variant attention_pages_g8_bf16 KV=2 GMAX=8u
#version 460
#extension GL_GOOGLE_include_directive : require
#define SETS 0
#define PAGES 1
#include "attention_split.glsl"

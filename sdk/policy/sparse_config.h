// Settings of query-aware page sparsity over the full cache (sa_session_params' sparse fields).
#pragma once

#include <cstdint>

namespace sa {

enum class sparse_method { none, quest, vattention, oracle };
enum class select_granularity { per_head, per_group };  // Quest / ReSA
enum class topk_source { quest, oracle };               // vAttention's deterministic top-k
enum class speculation { none, superset, strict };      // PRR and its two outputs

struct sparse_config {
  sparse_method method = sparse_method::none;
  int32_t page_size = 16;
  int32_t budget_tokens = 0;     // 0: budget_ratio of the tokens held
  float budget_ratio = 0.125f;
  int32_t sink_pages = 1;
  int32_t local_pages = 1;       // the page of the new token included
  int32_t min_pages = 3;
  int32_t dense_layers = 2;
  select_granularity granularity = select_granularity::per_head;
  int32_t rectify_every = 0;     // ReSA f; 0 = never
  float epsilon = 0.05f;         // vAttention
  float delta = 0.05f;
  float pilot_ratio = 0.1f;
  topk_source topk = topk_source::quest;
  bool check_error = false;
  int32_t retro_window = 0;      // RetroAttention's window w (>= 2); 0 = off
  speculation prr = speculation::none;
  float prr_ratio = 1.0f;        // PRR's r: predicted pages per page Quest picks by score
  int32_t prr_calib_rows = 64;   // prefill rows a calibration replays (the chunk's last)
  bool prr_ahead = true;         // PRR: a step's repairs predict the next step's P (tests turn it off)
  uint64_t seed = 0;             // vAttention's sampling stream (the session's seed)

  bool enabled() const { return method != sparse_method::none; }
};

// Throws SA_ERR_INVALID_ARG naming the first setting out of its range (the ranges sa.h
// documents). Sessions check their settings here, however they were made (created or resumed).
void check(const sparse_config& c);

}  // namespace sa

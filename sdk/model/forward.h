// The forward pass of a Llama-family decoder over a batch of rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "memory/kv_memory.h"
#include "model/device_weights.h"

namespace sa {

// Activation buffers for up to max_rows rows, allocated once per session.
struct workspace {
  workspace(backend& be, const hparams& hp, int64_t max_rows, int64_t max_logit_rows);

  int64_t max_rows, max_logit_rows;
  tensor x;       // [rows][n_embd]            residual stream
  tensor xn;      // [rows][n_embd]            normalised input of a sub-block
  tensor q;       // [rows][n_heads][head_dim]
  tensor k, v;    // [rows][n_kv_heads][head_dim]
  tensor att;     // [rows][n_heads][head_dim] attention output
  tensor lse;     // [rows][n_heads]           its log-sum-exp
  tensor gate;    // [rows][n_ff]
  tensor up;      // [rows][n_ff]
  tensor logits;  // [max_logit_rows][n_vocab]

 private:
  std::vector<buffer_ptr> buffers_;
};

// Runs every layer over a batch of tokens appended to `mem` (which gives their positions and
// keeps their K/V), commits the batch, and computes the logits of the last n_logit_rows rows
// into workspace::logits. Returns the K/V bytes attention read.
uint64_t forward(backend& be, const hparams& hp, const device_weights& w, kv_memory& mem,
                 workspace& ws, std::span<const int32_t> tokens, int64_t n_logit_rows);

}  // namespace sa

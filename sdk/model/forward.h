// The forward pass of a Llama-family decoder over a batch of rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/step_buffer.h"
#include "memory/kv_memory.h"
#include "model/device_weights.h"
#include "policy/sparse_attention.h"

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
  tensor ffn;     // [rows][n_ff]              silu(gate) * up
  tensor logits;  // [max_logit_rows][n_vocab]
  tensor token;   // i32 [1]                   the token drawn from the last logits

 private:
  std::vector<buffer_ptr> buffers_;
};

// What a forward pass runs on.
struct forward_env {
  backend& be;
  const hparams& hp;
  const device_weights& w;
  kv_memory& mem;
  sparse_attention* sparse;  // query-aware sparsity over the full memory, or nullptr
  step_buffer& step;
  workspace& ws;
};

// Draw the next token from the last row's logits, on the backend, into workspace::token.
struct token_draw {
  sampler_config config;
  double u = 0;  // the session generator's uniform (see backend::sample)
};

// Runs every layer over a batch (appended to or rewritten in `mem`, which gives the rows'
// positions and keeps their K/V), commits it, computes the logits of the last n_logit_rows
// rows into workspace::logits and, with `draw`, the next token. Returns the K/V bytes
// attention read, or k_kv_read_deferred when a sparse row's figures are still on the backend
// (its sparse_attention::keys_read() fetches them).
constexpr uint64_t k_kv_read_deferred = ~uint64_t{0};
uint64_t forward(const forward_env& e, const batch& b, int64_t n_logit_rows,
                 const token_draw* draw);

}  // namespace sa

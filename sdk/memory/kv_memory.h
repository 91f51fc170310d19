// What the forward pass asks of a KV memory.
//
// A batch is n rows appended at once (a prefill chunk or one decode step):
//   begin(n)         the RoPE positions of the rows' queries;
//   attend(layer...) keep the rows' keys/values in that layer and compute the rows' attention
//                    over what the memory holds plus the batch itself (causally);
//   commit()         after every layer ran, the batch is part of the memory.
// Keys reach attend() before RoPE; where and how they are rotated is the memory's business
// (dense memory stores them rotated, cascade memory stores them raw and re-indexes positions).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "memory/memory_state.h"
#include "model/hparams.h"

namespace sa {

struct memory_stats {
  uint64_t tokens_held = 0;    // tokens whose K/V are kept
  uint64_t bytes_held = 0;     // K/V bytes in use
  uint64_t bytes_capacity = 0; // K/V bytes allocated
};

// What one (layer, query head) did in the last decode step (query-aware sparsity).
struct head_stat {
  int32_t layer = 0, head = 0;
  int32_t keys_attended = 0;  // keys read (sampled and pilot keys included)
  int32_t keys_total = 0;     // keys dense attention reads
  int32_t sample_budget = -1; // vAttention: the CLT's sample size before clamping; -1 otherwise
  float rel_error = -1.0f;    // with check_error: |o - o_dense| / |o_dense|; -1 otherwise
  bool sparse = false;        // false: the head ran dense
};

class kv_memory {
 public:
  virtual ~kv_memory() = default;

  // Tokens that may still be appended; INT64_MAX for memories of bounded size.
  virtual int64_t room() const = 0;
  // Starts a batch of n rows; fills the positions of its queries.
  virtual void begin(int64_t n, std::vector<int32_t>& positions) = 0;
  // q [n][n_heads][head_dim] already rotated; k, v [n][n_kv_heads][head_dim], k not rotated
  // (attend may rotate k in place). Writes out [n][n_heads][head_dim], lse [n][n_heads].
  // Returns the K/V bytes attention read.
  virtual uint64_t attend(int32_t layer, const tensor& q, const tensor& k, const tensor& v,
                          const tensor& out, const tensor& lse) = 0;
  virtual void commit() = 0;
  virtual memory_stats stats() const = 0;

  // Whole-state copies for rolling back a multi-chunk call (cancellation). A memory whose
  // batches can be undone by forgetting them returns an empty snapshot (nullptr).
  struct snapshot {
    virtual ~snapshot() = default;
  };
  virtual std::unique_ptr<snapshot> save() const = 0;
  virtual void restore(const snapshot* s) = 0;  // s from save() of this memory
  virtual void reset() = 0;

  // Per-head figures of the last single-row batch; empty when it was a prefill or the memory
  // does no query-aware sparsity.
  virtual const std::vector<head_stat>& head_stats() const {
    static const std::vector<head_stat> none;
    return none;
  }

  // ---- persistence (memory_state.h; used by the session store) ----
  // Describes the committed state as named blobs (a batch in progress is never part of it).
  // Does not change the memory: the store calls state_saved() once the save has committed.
  virtual void write_state(state_writer& w) const {
    (void)w;
    fail(SA_ERR_UNSUPPORTED, "this memory cannot be saved");
  }
  // The store committed what write_state() described: immutable blobs written so far are now
  // in the store (a memory that skips unchanged blobs moves its watermarks here).
  virtual void state_saved() {}
  // Replaces the state with the one write_state() described (the memory was constructed with
  // the same configuration). Throws SA_ERR_STORE naming the blob when the state is missing,
  // corrupt or does not fit this memory; on failure the memory is reset.
  virtual void read_state(state_reader& r) {
    (void)r;
    fail(SA_ERR_UNSUPPORTED, "this memory cannot be restored");
  }
};

}  // namespace sa

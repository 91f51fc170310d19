// What the forward pass asks of a KV memory.
//
// A batch is n rows run through every layer at once, of one kind (batch_kind):
//   begin(batch)      plan where the rows go: their positions, the cache slots their K/V take,
//                     the keys each row attends to; the plan's arrays go into the step buffer;
//   write(layer...)   rotate the rows' queries and keys to their positions and keep K/V in that
//                     layer; returns the view of the keys and values attention reads;
//   mass(layer)       the per-key attention mass the memory wants from that attention (the
//                     cascade's scores), or nullptr;
//   observe(layer)    after the layer's attention (the cascade folds the mass into its scores
//                     and pushes the batch);
//   commit()          after every layer ran, the batch is part of the memory.
// Keys reach write() before RoPE; where and how they are rotated is the memory's business
// (dense memory stores them rotated, cascade memory stores them raw and re-indexes positions).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/step_buffer.h"
#include "memory/memory_state.h"
#include "model/hparams.h"

namespace sa {

enum class batch_kind {
  prefill,  // new tokens appended; each row attends to the memory and the batch causally
  decode,   // one new token appended (query-aware sparsity applies to it)
  rewrite,  // tokens already held run again in place (ReSA's rectification): their K/V are
            // replaced in every layer; the memory does not grow
  retro,    // RetroAttention's decode step: the last n - 1 tokens held run again in place
            // (their K/V replaced) and one new token is appended; the full memory only
};

struct batch {
  batch_kind kind = batch_kind::prefill;
  std::span<const int32_t> tokens;
  int64_t first_slot = 0;  // rewrite: the first slot run again
};

// A batch's rows as the memory planned them: arrays on the backend (in the step buffer) and
// the host values that shape the launches.
struct batch_meta {
  int64_t n = 0;          // rows
  tensor positions;       // i32 [n] RoPE position of each row's query
  tensor slots;           // i32 [n] cache row each row's K/V is written to
  tensor kv_len;          // i32 [n] keys row i attends to (the first kv_len[i] of the view)
  int64_t kv_bound = 0;   // >= every kv_len: attention's launch shape
  int64_t keys_read = 0;  // sum of kv_len: keys dense attention reads per query head
  // Dense memory: the slots the batch writes, [first_slot, end_slot), and the keys held once
  // it is in (what a decode row attends to). Bounded memories leave them 0.
  int64_t first_slot = 0, end_slot = 0, n_keys = 0;
  // Nonzero when a step of this batch may be recorded and replayed (every value that changes
  // between such steps is in the arrays above); equal keys mean equal launch shapes.
  uint64_t shape_key = 0;
};

struct memory_stats {
  uint64_t tokens_held = 0;    // tokens whose K/V are kept
  uint64_t bytes_held = 0;     // K/V bytes in use
  uint64_t bytes_capacity = 0; // K/V bytes allocated
  uint64_t tokens_seen = 0;    // tokens appended since the memory was empty (held or not)
};

class kv_memory {
 public:
  virtual ~kv_memory() = default;

  // Tokens that may still be appended; INT64_MAX for memories of bounded size.
  virtual int64_t room() const = 0;
  // Plans a batch; puts its arrays into `step` (the caller flushes).
  virtual batch_meta begin(const batch& b, step_buffer& step) = 0;
  // q [n][n_heads][head_dim], k, v [n][n_kv_heads][head_dim] (not rotated): rotates q and k in
  // place to the batch's positions, keeps K/V in layer `layer`, and returns what that layer's
  // attention reads (valid until the next write). With `page` (Quest's summaries of the pages
  // holding the batch's rows, when they are the last m.n keys: a decode row or a RetroAttention
  // window), a memory may recompute those pages in the same pass and say so in the view
  // (newest_page_summarized); one that does not leaves it to the caller.
  virtual kv_view write(int32_t layer, const tensor& q, const tensor& k, const tensor& v,
                        const batch_meta& m, const backend::newest_page* page = nullptr) = 0;
  virtual const key_mass* mass(int32_t layer) {
    (void)layer;
    return nullptr;
  }
  virtual void observe(int32_t layer) { (void)layer; }
  virtual void commit() = 0;
  virtual memory_stats stats() const = 0;
  // The tokens whose K/V layer `layer` holds for KV head `kv_head`, by original index (0 = the
  // first token appended since the memory was empty), ascending and unique; replaces `out`.
  // -1 for either is the union over every layer or every KV head; other values are in range
  // (the caller checks). Bookkeeping only: never reads K/V (the cascade copies its scores and
  // indices back from the backend first when its copy is stale).
  virtual void held_positions(int32_t layer, int32_t kv_head, std::vector<uint64_t>& out) const = 0;
  // K and V bytes of one key in one layer (all KV heads): what reading a key costs.
  virtual uint64_t key_bytes() const = 0;
  virtual dtype kv_type() const = 0;

  // Whole-state copies for rolling back a multi-chunk call (cancellation). A memory whose
  // batches can be undone by forgetting them returns an empty snapshot (nullptr).
  struct snapshot {
    virtual ~snapshot() = default;
  };
  virtual std::unique_ptr<snapshot> save() const = 0;
  virtual void restore(const snapshot* s) = 0;  // s from save() of this memory
  virtual void reset() = 0;

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

// The launch shape attention gets for rows that see at most n keys: the next power of two from
// 256, capped at the capacity, so that steps whose lengths fall in one bucket share one
// recorded step and a 128K-token generation records about ten.
int64_t attention_bucket(int64_t n, int64_t capacity);

}  // namespace sa

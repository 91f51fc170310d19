// Named, chunked, checksummed blobs of one stored session: the store's side of
// state_writer / state_reader (sdk/memory/memory_state.h).
//
// A blob is a row of `blobs` (name, size, chunk count, immutable flag) and its chunks: at most
// k_chunk_bytes each, numbered from 0, each with checksum64(data, seed = seq). Reading checks
// the chunk numbering, every size and every checksum.
//
// Blob names used by the session itself (sdk/store/session_saver.cpp):
//   session/config         the session's settings as text lines "key=value"        (mutable)
//   session/sampler        u64[4] xoshiro256** state                                (mutable)
//   session/logits         f32[n_vocab] logits after the last token, or empty       (mutable)
//   session/tokens/p<i>    i32 tokens [i*T, (i+1)*T), T = k_token_page           (immutable)
//   session/tokens/tail    i32 the tokens after the last full page                  (mutable)
// and the memory's own blobs (dense/..., cascade/..., see those memories).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "memory/memory_state.h"
#include "store/session_store.h"

namespace sa::store {

// Writes one session's blobs inside the caller's write transaction.
class blob_writer final : public state_writer {
 public:
  // incremental: the stored blobs are the ones this session's saver wrote last, so has() may
  // report immutable ones as present.
  blob_writer(session_store& store, int64_t session_rowid, std::string session_name,
              bool incremental);
  bool has(const std::string& name) override;
  void keep(const std::string& name) override;
  void put(const std::string& name, const void* data, size_t n, blob_kind kind) override;
  // Deletes the session's blobs that this save neither put nor kept.
  void finish();
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  struct existing {
    int64_t id;
    bool immutable;
  };
  session_store& store_;
  int64_t session_;
  std::string session_name_;
  bool incremental_;
  std::map<std::string, existing> existing_;
  std::set<std::string> listed_;
  uint64_t bytes_written_ = 0;
  statement delete_blob_, insert_blob_, insert_chunk_;
};

// Reads one session's blobs (inside the caller's read transaction).
class blob_reader final : public state_reader {
 public:
  blob_reader(session_store& store, int64_t session_rowid, std::string session_name);
  bool has(const std::string& name) override;
  std::vector<uint8_t> get(const std::string& name) override;
  void get_into(const std::string& name, void* dst, size_t n) override;

 private:
  struct entry {
    int64_t id;
    int64_t size;
    int64_t n_chunks;
  };
  const entry& find(const std::string& name) const;
  // Reads the chunks of blob e (named name) into dst (exactly e.size bytes).
  void read_chunks(const std::string& name, const entry& e, uint8_t* dst);

  session_store& store_;
  std::string session_name_;
  std::map<std::string, entry> blobs_;
  statement select_chunks_;
};

}  // namespace sa::store

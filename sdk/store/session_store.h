// The session store: one SQLite file holding many saved sessions.
//
// File: application_id 0x73615353 ("saSS") marks an sa store; PRAGMA user_version is the schema
// version, upgraded by forward migrations in one transaction when an older store is opened for
// writing. Pages of 16 KiB, WAL journal, synchronous FULL (a save reported as done survives a
// power cut), incremental auto-vacuum (space of deleted sessions is returned), the WAL file
// trimmed to 32 MiB after checkpoints; SQLite removes it when the last connection closes.
//
// Schema (version 1):
//   sessions(id INTEGER PRIMARY KEY, name TEXT UNIQUE, model_fingerprint, model_name, memory,
//            n_tokens, state_version, save_token, created, updated)      one row per session
//   blobs(id INTEGER PRIMARY KEY, session -> sessions.id ON DELETE CASCADE, name, size,
//         n_chunks, immutable, UNIQUE(session, name))                    named state blobs
//   chunks(blob -> blobs.id ON DELETE CASCADE, seq, checksum, data, PRIMARY KEY(blob, seq))
//         a blob's bytes in chunks of at most k_chunk_bytes, each with checksum64(data, seed=seq)
// A session's blobs are listed in blob_io.h; save_token is a random number replaced at every
// save, so a saver knows whether the stored blobs are still the ones it wrote last.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/sqlite_db.h"

namespace sa::store {

constexpr uint32_t k_application_id = 0x73615353u;  // "saSS"
constexpr int64_t k_schema_version = 1;
constexpr size_t k_chunk_bytes = size_t{1} << 20;

struct session_row {
  int64_t rowid = 0;
  std::string name;
  uint64_t model_fingerprint = 0;
  std::string model_name;
  std::string memory;        // "dense", "streaming", "cascade"
  int64_t n_tokens = 0;
  int64_t state_version = 0;
  uint64_t save_token = 0;
  int64_t created = 0, updated = 0;  // Unix seconds
  uint64_t bytes = 0;        // sum of the session's blob sizes (filled by list())
};

class session_store {
 public:
  enum class open_mode {
    create,    // create the file if absent, migrate an older schema (writers)
    existing,  // the file must exist; opened read-write when possible, else read-only; a
               // file without a schema yet (e.g. empty) is read as a store of no sessions and
               // left exactly as it is
  };
  // Throws SA_ERR_STORE naming the reason: not SQLite, another application's database, a newer
  // schema, corrupt, unwritable (create mode).
  session_store(const std::string& path, open_mode mode);

  sqlite_db& db() { return *db_; }
  const std::string& path() const { return db_->path(); }
  bool writable() const { return !db_->read_only(); }

  std::optional<session_row> find(const std::string& name);
  std::vector<session_row> list();
  // False when no session has that name.
  bool remove(const std::string& name);

 private:
  // may_create: an empty file may receive the schema (create mode only).
  void check_and_migrate(bool may_write, bool may_create);
  std::unique_ptr<sqlite_db> db_;
  bool empty_ = false;  // a file without any schema yet, left as it is
};

}  // namespace sa::store

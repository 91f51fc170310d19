// Saving a whole session into the store and resuming it.
//
// A save is one write transaction: the session's row, its settings, sampler state, logits,
// token history and the memory's blobs (blob_io.h lists them). Either all of it commits or
// the stored session stays exactly as the previous save left it — also when the process is
// killed in the middle. Saves are incremental: immutable blobs already stored by this saver's
// previous save (full token pages, full dense K/V pages that were not rewritten) are kept,
// not written again.
//
// A saver is bound to one session name in one store file. It only overwrites a stored session
// it wrote itself or resumed from (the stored save_token must be the one it knows), so a new
// session cannot silently replace a conversation saved earlier under the same name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "session/session.h"
#include "store/session_store.h"

namespace sa::store {

// Version of the session-level blob layout (session/*); the memories version their own.
constexpr int64_t k_state_version = 1;
constexpr size_t k_token_page = 4096;  // tokens per immutable page of the history

class session_saver {
 public:
  session_saver(std::string path, std::string name);

  // Saves s (see above). Throws SA_ERR_STORE (the store failed or refuses; the message says
  // why), SA_ERR_MISUSE (s is unusable after a failed step), SA_ERR_NOMEM.
  void save(session& s);

  // Rebuilds the session stored under `name` in the store at `path` on model m, computing
  // with `backend` and `n_threads` (every other setting comes from the store), and returns it
  // with a saver bound to it. Throws SA_ERR_INVALID_ARG when there is no such file or session,
  // SA_ERR_STORE when the store or the session is foreign, newer, corrupt or was saved with
  // another model.
  static std::unique_ptr<session> resume(std::shared_ptr<const model> m, const std::string& path,
                                         const std::string& name, backend_kind backend,
                                         int32_t device, int32_t n_threads,
                                         std::unique_ptr<session_saver>& saver);

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }
  // The store connection, opened (and created) on first use. Tests set limits through it.
  session_store& store();
  uint64_t last_save_bytes() const { return last_save_bytes_; }

 private:
  uint64_t fingerprint(const model& m);

  std::string path_, name_;
  std::unique_ptr<session_store> store_;
  uint64_t save_token_ = 0;   // the stored session's token after our last save/resume; 0: none
  size_t tokens_saved_ = 0;   // history length at that point and its checksum
  uint64_t tokens_hash_ = 0;
  const model* fingerprint_of_ = nullptr;
  uint64_t fingerprint_ = 0;
  uint64_t last_save_bytes_ = 0;
};

}  // namespace sa::store

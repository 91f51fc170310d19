#include "store/blob_io.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/error.h"
#include "store/checksum.h"

namespace sa::store {

blob_writer::blob_writer(session_store& store, int64_t session_rowid, std::string session_name,
                         bool incremental)
    : store_(store),
      session_(session_rowid),
      session_name_(std::move(session_name)),
      incremental_(incremental),
      delete_blob_(store.db(), "DELETE FROM blobs WHERE id = ?", "deleting a blob"),
      insert_blob_(store.db(),
                   "INSERT INTO blobs(session, name, size, n_chunks, immutable) "
                   "VALUES (?, ?, ?, ?, ?)",
                   "writing a blob"),
      insert_chunk_(store.db(), "INSERT INTO chunks(blob, seq, checksum, data) VALUES (?, ?, ?, ?)",
                    "writing a chunk") {
  statement st(store.db(), "SELECT name, id, immutable FROM blobs WHERE session = ?",
               "listing the session's blobs");
  st.bind(1, session_rowid);
  while (st.step()) existing_[st.column_text(0)] = {st.column_int(1), st.column_int(2) != 0};
}

bool blob_writer::has(const std::string& name) {
  if (!incremental_) return false;
  const auto it = existing_.find(name);
  return it != existing_.end() && it->second.immutable;
}

void blob_writer::keep(const std::string& name) {
  if (!has(name))
    fail(SA_ERR_INTERNAL, "blob_writer: keep('%s') of a blob that is not stored", name.c_str());
  listed_.insert(name);
}

void blob_writer::put(const std::string& name, const void* data, size_t n, blob_kind kind) {
  if (!listed_.insert(name).second)
    fail(SA_ERR_INTERNAL, "blob_writer: blob '%s' written twice in one save", name.c_str());
  if (const auto it = existing_.find(name); it != existing_.end()) {
    delete_blob_.bind(1, it->second.id).run();  // its chunks go with it (ON DELETE CASCADE)
    existing_.erase(it);
  }
  const size_t n_chunks = (n + k_chunk_bytes - 1) / k_chunk_bytes;
  insert_blob_.bind(1, session_)
      .bind(2, name)
      .bind(3, static_cast<int64_t>(n))
      .bind(4, static_cast<int64_t>(n_chunks))
      .bind(5, int64_t{kind == blob_kind::immutable_blob ? 1 : 0})
      .run();
  const int64_t blob = store_.db().last_insert_rowid();
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t seq = 0; seq < n_chunks; ++seq) {
    const size_t off = seq * k_chunk_bytes, len = std::min(k_chunk_bytes, n - off);
    insert_chunk_.bind(1, blob)
        .bind(2, static_cast<int64_t>(seq))
        .bind(3, std::bit_cast<int64_t>(checksum64(p + off, len, seq)))
        .bind_blob(4, p + off, len)
        .run();
  }
  bytes_written_ += n;
}

void blob_writer::finish() {
  for (const auto& [name, e] : existing_)
    if (!listed_.count(name)) delete_blob_.bind(1, e.id).run();
}

blob_reader::blob_reader(session_store& store, int64_t session_rowid, std::string session_name)
    : store_(store),
      session_name_(std::move(session_name)),
      select_chunks_(store.db(), "SELECT seq, checksum, data FROM chunks WHERE blob = ? ORDER BY seq",
                     "reading a blob") {
  statement st(store.db(), "SELECT name, id, size, n_chunks FROM blobs WHERE session = ?",
               "listing the session's blobs");
  st.bind(1, session_rowid);
  while (st.step())
    blobs_[st.column_text(0)] = {st.column_int(1), st.column_int(2), st.column_int(3)};
}

bool blob_reader::has(const std::string& name) { return blobs_.count(name) != 0; }

const blob_reader::entry& blob_reader::find(const std::string& name) const {
  const auto it = blobs_.find(name);
  if (it == blobs_.end())
    fail(SA_ERR_STORE, "store '%s': session '%s' lacks its blob '%s' (the store is incomplete)",
         store_.path().c_str(), session_name_.c_str(), name.c_str());
  const entry& e = it->second;
  const auto chunk = static_cast<int64_t>(k_chunk_bytes);
  // Chunks for the size, counted without overflow (a hostile size may be near INT64_MAX).
  if (e.size < 0 || e.n_chunks != e.size / chunk + (e.size % chunk != 0 ? 1 : 0))
    fail(SA_ERR_STORE, "store '%s': blob '%s' of session '%s' claims %lld bytes in %lld chunks",
         store_.path().c_str(), name.c_str(), session_name_.c_str(),
         static_cast<long long>(e.size), static_cast<long long>(e.n_chunks));
  return e;
}

void blob_reader::read_chunks(const std::string& name, const entry& e, uint8_t* dst) {
  select_chunks_.bind(1, e.id);
  int64_t seq = 0;
  size_t at = 0;
  const size_t size = static_cast<size_t>(e.size);
  try {
    while (select_chunks_.step()) {
      const size_t len = select_chunks_.column_bytes(2);
      const void* data = select_chunks_.column_blob(2);
      const size_t expect = std::min(k_chunk_bytes, size - std::min(at, size));
      if (select_chunks_.column_int(0) != seq || seq >= e.n_chunks || len != expect)
        fail(SA_ERR_STORE,
             "store '%s': chunk %lld of blob '%s' of session '%s' is missing or has the wrong "
             "size (the store is corrupt)",
             store_.path().c_str(), static_cast<long long>(seq), name.c_str(),
             session_name_.c_str());
      const uint64_t sum = checksum64(data, len, static_cast<uint64_t>(seq));
      if (sum != std::bit_cast<uint64_t>(select_chunks_.column_int(1)))
        fail(SA_ERR_STORE,
             "store '%s': chunk %lld of blob '%s' of session '%s' fails its checksum (the store "
             "is corrupt)",
             store_.path().c_str(), static_cast<long long>(seq), name.c_str(),
             session_name_.c_str());
      if (len) std::memcpy(dst + at, data, len);
      at += len;
      ++seq;
    }
    if (seq != e.n_chunks)
      fail(SA_ERR_STORE,
           "store '%s': blob '%s' of session '%s' has %lld of its %lld chunks (the store is "
           "corrupt)",
           store_.path().c_str(), name.c_str(), session_name_.c_str(), static_cast<long long>(seq),
           static_cast<long long>(e.n_chunks));
  } catch (...) {
    select_chunks_.reset();
    throw;
  }
  select_chunks_.reset();
}

std::vector<uint8_t> blob_reader::get(const std::string& name) {
  const entry& e = find(name);
  // The size is checked against the chunks as they are read; allocate from what is present.
  if (e.size > static_cast<int64_t>(k_chunk_bytes)) {
    const int64_t present = store_.db().query_int(
        ("SELECT coalesce(sum(length(data)), 0) FROM chunks WHERE blob = " + std::to_string(e.id))
            .c_str(),
        "measuring a blob");
    if (present != e.size)
      fail(SA_ERR_STORE, "store '%s': blob '%s' of session '%s' holds %lld of its %lld bytes",
           store_.path().c_str(), name.c_str(), session_name_.c_str(),
           static_cast<long long>(present), static_cast<long long>(e.size));
  }
  std::vector<uint8_t> out(static_cast<size_t>(e.size));
  read_chunks(name, e, out.data());
  return out;
}

void blob_reader::get_into(const std::string& name, void* dst, size_t n) {
  const entry& e = find(name);
  if (static_cast<uint64_t>(e.size) != n)
    fail(SA_ERR_STORE, "store '%s': blob '%s' of session '%s' has %lld bytes, %zu expected",
         store_.path().c_str(), name.c_str(), session_name_.c_str(),
         static_cast<long long>(e.size), n);
  read_chunks(name, e, static_cast<uint8_t*>(dst));
}

}  // namespace sa::store

// A thin RAII layer over the system SQLite library: a connection, prepared statements and
// write transactions. Every SQLite failure becomes sa::error(SA_ERR_STORE) whose message names
// the store file, what was being done and SQLite's own explanation; SQLite running out of
// memory (SQLITE_NOMEM) becomes SA_ERR_NOMEM with the same message.
//
// A connection is used by one thread at a time (the session that owns it, or one call of
// sa_store_*). Several connections, in one process or several, may write to one file: writers
// take the lock with BEGIN IMMEDIATE and wait for each other through a busy timeout.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace sa::store {

class sqlite_db {
 public:
  // immutable: read-only, and SQLite assumes nobody changes the file (no locks, no WAL index):
  // how a store in a read-only directory without a pending WAL file is read.
  enum class access { read_write, read_write_create, read_only, immutable };
  // Throws SA_ERR_STORE when the file cannot be opened.
  sqlite_db(const std::string& path, access a);
  ~sqlite_db();
  sqlite_db(const sqlite_db&) = delete;
  sqlite_db& operator=(const sqlite_db&) = delete;

  // Runs one or more statements that return no rows we need.
  void exec(const char* sql, const char* what);
  // Runs a statement returning one integer (e.g. a PRAGMA); throws if it returns no row.
  int64_t query_int(const char* sql, const char* what);
  // Puts the file in WAL journal mode (a persistent property of the file). Switching needs the
  // file to itself, and SQLite reports a concurrent opener as SQLITE_BUSY at once instead of
  // calling the busy handler, so this retries within the busy timeout.
  void use_wal();
  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  // False when opened read-only or when SQLite fell back to read-only (a read-only file).
  bool writable() const;
  bool read_only() const { return !writable(); }
  // True when the file this connection has open is no longer the one at its path: deleted,
  // renamed, or replaced by another file (SQLITE_FCNTL_HAS_MOVED).
  bool has_moved() const;
  // Best effort: checkpoints the WAL into the database file and truncates it to zero bytes
  // (SQLITE_CHECKPOINT_TRUNCATE); failures are ignored.
  void empty_wal();
  // Rows changed by the last INSERT, UPDATE or DELETE on this connection.
  int64_t changes() const;
  int64_t last_insert_rowid() const;
  // Throws SA_ERR_STORE (SA_ERR_NOMEM for SQLITE_NOMEM): "store 'path': <what>: <SQLite's
  // message> (<code name>)".
  [[noreturn]] void fail_with(int rc, const char* what) const;

 private:
  std::string path_;
  access access_;
  sqlite3* db_ = nullptr;
};

class statement {
 public:
  statement(sqlite_db& db, const char* sql, const char* what);
  ~statement();
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  statement& bind(int i, int64_t x);
  statement& bind(int i, std::string_view text);
  statement& bind_blob(int i, const void* data, size_t n);
  // True when a row is ready; false when the statement is done. Throws on failure.
  bool step();
  // step() for statements that return no row.
  void run() { step(); reset(); }
  void reset();
  int64_t column_int(int i) const;
  std::string column_text(int i) const;
  const void* column_blob(int i) const;
  size_t column_bytes(int i) const;

 private:
  sqlite_db& db_;
  const char* what_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE (a writer) or BEGIN (a consistent read); rolls back unless commit() ran.
class transaction {
 public:
  enum class kind { read, write };
  transaction(sqlite_db& db, kind k);
  ~transaction();
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  void commit();

 private:
  sqlite_db& db_;
  bool open_ = false;
};

}  // namespace sa::store

#include "store/sqlite_db.h"

#include <sqlite3.h>

#include <cctype>
#include <chrono>
#include <thread>

#include "core/error.h"

namespace sa::store {

namespace {

// How long a connection waits for another writer before giving up with SQLITE_BUSY.
constexpr int k_busy_timeout_ms = 60000;

// A file name as the path of a file: URI ('/' kept, everything but unreserved bytes escaped).
std::string uri_escape(const std::string& path) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// SQLite running out of memory is the process running out of memory, not a store failure.
sa_status status_of(int rc) {
  return (rc & 0xff) == SQLITE_NOMEM || rc == SQLITE_IOERR_NOMEM ? SA_ERR_NOMEM : SA_ERR_STORE;
}

}  // namespace

sqlite_db::sqlite_db(const std::string& path, access a) : path_(path), access_(a) {
  int flags = SQLITE_OPEN_NOMUTEX;  // one thread at a time per connection (see the header)
  std::string name = path;
  switch (a) {
    case access::read_write: flags |= SQLITE_OPEN_READWRITE; break;
    case access::read_write_create: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE; break;
    case access::read_only: flags |= SQLITE_OPEN_READONLY; break;
    case access::immutable:
      flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
      name = "file:" + uri_escape(path) + "?immutable=1";
      break;
  }
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    fail(status_of(rc), "store '%s': cannot open: %s (%s)", path.c_str(), msg.c_str(),
         sqlite3_errstr(rc));
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, k_busy_timeout_ms);
}

sqlite_db::~sqlite_db() { sqlite3_close_v2(db_); }

bool sqlite_db::writable() const {
  return access_ != access::read_only && access_ != access::immutable &&
         sqlite3_db_readonly(db_, "main") == 0;
}

bool sqlite_db::has_moved() const {
  int moved = 0;
  return sqlite3_file_control(db_, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved != 0;
}

void sqlite_db::empty_wal() {
  sqlite3_wal_checkpoint_v2(db_, "main", SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
}

int64_t sqlite_db::changes() const { return sqlite3_changes64(db_); }

int64_t sqlite_db::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

void sqlite_db::fail_with(int rc, const char* what) const {
  const char* explain = "";
  switch (rc & 0xff) {
    case SQLITE_NOTADB: explain = " — the file is not an SQLite database"; break;
    case SQLITE_CORRUPT: explain = " — the file is corrupt"; break;
    case SQLITE_FULL: explain = " — the disk or the store's size limit is full"; break;
    case SQLITE_READONLY: explain = " — the file or its directory is read-only"; break;
    case SQLITE_CANTOPEN: explain = " — cannot open (is the directory writable?)"; break;
    case SQLITE_BUSY: explain = " — another writer held the store too long"; break;
    default: break;
  }
  fail(status_of(rc), "store '%s': %s: %s (%s)%s", path_.c_str(), what, sqlite3_errmsg(db_),
       sqlite3_errstr(rc), explain);
}

void sqlite_db::exec(const char* sql, const char* what) {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail_with(rc, what);
}

void sqlite_db::use_wal() {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(k_busy_timeout_ms);
  for (int attempt = 0;; ++attempt) {
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(db_, "PRAGMA journal_mode = WAL", -1, &st, nullptr);
    if (rc != SQLITE_OK) fail_with(rc, "switching to WAL");
    rc = sqlite3_step(st);
    const unsigned char* mode = rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : nullptr;
    const bool wal = mode && std::string_view(reinterpret_cast<const char*>(mode)) == "wal";
    sqlite3_finalize(st);
    if (wal) return;
    if (rc == SQLITE_ROW)
      fail(SA_ERR_STORE, "store '%s': the journal cannot be switched to WAL", path_.c_str());
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= give_up)
      fail_with(rc, "switching to WAL");
    // Another connection holds the file (most often it is switching it to WAL itself).
    std::this_thread::sleep_for(std::chrono::milliseconds(attempt < 10 ? 1 : 10));
  }
}

int64_t sqlite_db::query_int(const char* sql, const char* what) {
  statement st(*this, sql, what);
  if (!st.step()) fail(SA_ERR_STORE, "store '%s': %s: no result", path_.c_str(), what);
  return st.column_int(0);
}

statement::statement(sqlite_db& db, const char* sql, const char* what) : db_(db), what_(what) {
  const int rc = sqlite3_prepare_v2(db.handle(), sql, -1, &stmt_, nullptr);
  if (rc != SQLITE_OK) db.fail_with(rc, what);
}

statement::~statement() { sqlite3_finalize(stmt_); }

statement& statement::bind(int i, int64_t x) {
  const int rc = sqlite3_bind_int64(stmt_, i, x);
  if (rc != SQLITE_OK) db_.fail_with(rc, what_);
  return *this;
}

statement& statement::bind(int i, std::string_view text) {
  const int rc = sqlite3_bind_text64(stmt_, i, text.data(), text.size(), SQLITE_TRANSIENT,
                                     SQLITE_UTF8);
  if (rc != SQLITE_OK) db_.fail_with(rc, what_);
  return *this;
}

statement& statement::bind_blob(int i, const void* data, size_t n) {
  // Zero-length blobs are bound as empty blobs, not NULL.
  const int rc = n == 0 ? sqlite3_bind_zeroblob(stmt_, i, 0)
                        : sqlite3_bind_blob64(stmt_, i, data, n, SQLITE_STATIC);
  if (rc != SQLITE_OK) db_.fail_with(rc, what_);
  return *this;
}

bool statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sqlite3_reset(stmt_);
  db_.fail_with(rc, what_);
}

void statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t statement::column_int(int i) const { return sqlite3_column_int64(stmt_, i); }

std::string statement::column_text(int i) const {
  const unsigned char* p = sqlite3_column_text(stmt_, i);
  const int n = sqlite3_column_bytes(stmt_, i);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

const void* statement::column_blob(int i) const { return sqlite3_column_blob(stmt_, i); }

size_t statement::column_bytes(int i) const {
  return static_cast<size_t>(sqlite3_column_bytes(stmt_, i));
}

transaction::transaction(sqlite_db& db, kind k) : db_(db) {
  db.exec(k == kind::write ? "BEGIN IMMEDIATE" : "BEGIN",
          k == kind::write ? "starting a write transaction" : "starting a read transaction");
  open_ = true;
}

transaction::~transaction() {
  if (open_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void transaction::commit() {
  db_.exec("COMMIT", "committing");
  open_ = false;
}

}  // namespace sa::store

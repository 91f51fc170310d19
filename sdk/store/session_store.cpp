#include "store/session_store.h"

#include <bit>
#include <filesystem>

#include "core/error.h"

namespace sa::store {

namespace {

// migrations[v] upgrades a store of schema version v to v + 1 (inside one transaction).
// Append a new entry (and raise k_schema_version) for every schema change; never edit one.
constexpr const char* k_migrations[] = {
    // 0 -> 1: the first schema.
    "CREATE TABLE sessions("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  model_fingerprint INTEGER NOT NULL,"
    "  model_name TEXT NOT NULL,"
    "  memory TEXT NOT NULL,"
    "  n_tokens INTEGER NOT NULL,"
    "  state_version INTEGER NOT NULL,"
    "  save_token INTEGER NOT NULL,"
    "  created INTEGER NOT NULL,"
    "  updated INTEGER NOT NULL);"
    "CREATE TABLE blobs("
    "  id INTEGER PRIMARY KEY,"
    "  session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    "  name TEXT NOT NULL,"
    "  size INTEGER NOT NULL,"
    "  n_chunks INTEGER NOT NULL,"
    "  immutable INTEGER NOT NULL,"
    "  UNIQUE(session, name));"
    "CREATE TABLE chunks("
    "  blob INTEGER NOT NULL REFERENCES blobs(id) ON DELETE CASCADE,"
    "  seq INTEGER NOT NULL,"
    "  checksum INTEGER NOT NULL,"
    "  data BLOB NOT NULL,"
    "  PRIMARY KEY(blob, seq));",
};
static_assert(std::size(k_migrations) == k_schema_version);

session_row read_row(const statement& st) {
  session_row r;
  r.rowid = st.column_int(0);
  r.name = st.column_text(1);
  r.model_fingerprint = std::bit_cast<uint64_t>(st.column_int(2));
  r.model_name = st.column_text(3);
  r.memory = st.column_text(4);
  r.n_tokens = st.column_int(5);
  r.state_version = st.column_int(6);
  r.save_token = std::bit_cast<uint64_t>(st.column_int(7));
  r.created = st.column_int(8);
  r.updated = st.column_int(9);
  return r;
}

constexpr const char* k_row_columns =
    "id, name, model_fingerprint, model_name, memory, n_tokens, state_version, save_token, "
    "created, updated";

}  // namespace

session_store::session_store(const std::string& path, open_mode mode) {
  if constexpr (std::endian::native != std::endian::little)
    fail(SA_ERR_UNSUPPORTED, "the session store needs a little-endian host");
  if (mode == open_mode::create) {
    db_ = std::make_unique<sqlite_db>(path, sqlite_db::access::read_write_create);
    check_and_migrate(true, true);
    return;
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    fail(SA_ERR_INVALID_ARG, "no session store at '%s'", path.c_str());
  try {
    db_ = std::make_unique<sqlite_db>(path, sqlite_db::access::read_write);
    check_and_migrate(db_->writable(), false);
  } catch (const sa::error& first) {
    if (first.status() != SA_ERR_STORE) throw;
    // A store in a read-only place can still be read: read-only, or, when the directory does
    // not let SQLite create its WAL index and no WAL file is pending, as an immutable file
    // (nobody can write there, so the main file holds every committed save).
    try {
      db_ = std::make_unique<sqlite_db>(path, sqlite_db::access::read_only);
      check_and_migrate(false, false);
    } catch (const sa::error&) {
      if (std::filesystem::exists(path + "-wal", ec)) throw first;
      try {
        db_ = std::make_unique<sqlite_db>(path, sqlite_db::access::immutable);
        check_and_migrate(false, false);
      } catch (const sa::error&) {
        throw first;
      }
    }
  }
}

void session_store::check_and_migrate(bool may_write, bool may_create) {
  sqlite_db& db = *db_;
  // Reading the header is where a file that is not SQLite fails (SQLITE_NOTADB). The three
  // figures come from one snapshot: another connection may be creating the store right now.
  uint32_t app = 0;
  int64_t version = 0, tables = 0;
  {
    transaction snapshot(db, transaction::kind::read);
    app = static_cast<uint32_t>(db.query_int("PRAGMA application_id", "reading the application id"));
    version = db.query_int("PRAGMA user_version", "reading the schema version");
    tables = db.query_int("SELECT count(*) FROM sqlite_master", "reading the schema");
    snapshot.commit();
  }
  if (app == 0 && version == 0) {
    if (tables > 0)
      fail(SA_ERR_STORE,
           "store '%s' is an SQLite database of another application (application_id 0, %lld "
           "schema objects), not an sa session store",
           db.path().c_str(), static_cast<long long>(tables));
    if (!may_write || !may_create) {
      empty_ = true;  // an empty file: no sessions yet, and nothing written to it
      return;
    }
    // Settings that only a new, empty database accepts come first.
    db.exec("PRAGMA page_size = 16384; PRAGMA auto_vacuum = INCREMENTAL",
            "setting up a new store");
  } else if (app != k_application_id) {
    fail(SA_ERR_STORE, "store '%s' is an SQLite database of another application "
         "(application_id 0x%08x, an sa store has 0x%08x)",
         db.path().c_str(), app, k_application_id);
  } else if (version > k_schema_version) {
    fail(SA_ERR_STORE, "store '%s' has schema version %lld, newer than this library's %lld: "
         "open it with a newer version of sa",
         db.path().c_str(), static_cast<long long>(version),
         static_cast<long long>(k_schema_version));
  } else if (version < 1) {
    fail(SA_ERR_STORE, "store '%s' has schema version %lld, which no version of sa wrote",
         db.path().c_str(), static_cast<long long>(version));
  }
  if (!may_write) {
    if (version < k_schema_version)
      fail(SA_ERR_STORE, "store '%s' has the older schema version %lld and is read-only, so it "
           "cannot be upgraded to %lld", db.path().c_str(), static_cast<long long>(version),
           static_cast<long long>(k_schema_version));
    return;
  }
  db.use_wal();
  // The WAL file shrinks back to 32 MiB after a checkpoint instead of keeping the size of the
  // largest save.
  db.exec("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; "
          "PRAGMA journal_size_limit = 33554432",
          "configuring the connection");
  if (version == k_schema_version) return;
  transaction tx(db, transaction::kind::write);
  // Another connection may have created or upgraded the file since the check above.
  version = db.query_int("PRAGMA user_version", "reading the schema version");
  for (int64_t v = version; v < k_schema_version; ++v)
    db.exec(k_migrations[v], "upgrading the schema");
  if (version < k_schema_version) {
    const std::string set = "PRAGMA application_id = " + std::to_string(k_application_id) +
                            "; PRAGMA user_version = " + std::to_string(k_schema_version);
    db.exec(set.c_str(), "writing the schema version");
  }
  tx.commit();
}

std::optional<session_row> session_store::find(const std::string& name) {
  if (empty_) return std::nullopt;
  const std::string sql = std::string("SELECT ") + k_row_columns + " FROM sessions WHERE name = ?";
  statement st(*db_, sql.c_str(), "looking up a session");
  st.bind(1, name);
  if (!st.step()) return std::nullopt;
  return read_row(st);
}

std::vector<session_row> session_store::list() {
  std::vector<session_row> out;
  if (empty_) return out;
  const std::string sql = std::string("SELECT ") + k_row_columns +
                          ", (SELECT coalesce(sum(size), 0) FROM blobs WHERE session = s.id) "
                          "FROM sessions AS s ORDER BY updated DESC, name";
  transaction tx(*db_, transaction::kind::read);
  statement st(*db_, sql.c_str(), "listing sessions");
  while (st.step()) {
    out.push_back(read_row(st));
    out.back().bytes = static_cast<uint64_t>(st.column_int(10));
  }
  return out;
}

bool session_store::remove(const std::string& name) {
  if (empty_) return false;
  if (!writable())
    fail(SA_ERR_STORE, "store '%s' is read-only: cannot delete session '%s'", path().c_str(),
         name.c_str());
  {
    transaction tx(*db_, transaction::kind::write);
    statement st(*db_, "DELETE FROM sessions WHERE name = ?", "deleting a session");
    st.bind(1, name).run();
    if (db_->changes() == 0) return false;
    tx.commit();
  }
  // Return the freed pages to the file system (best effort: the session is already gone).
  try {
    db_->exec("PRAGMA incremental_vacuum", "vacuuming");
  } catch (const sa::error&) {
  }
  return true;
}

}  // namespace sa::store

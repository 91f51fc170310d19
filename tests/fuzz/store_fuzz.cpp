// store_fuzz: the input is a session store (an SQLite file) saved from the shipped model,
// mutated. It is written to a temporary file, listed (sa_store_list) and resumed
// (sa_session_resume, session "fuzz", CPU); a session that resumes takes one decode step and is
// destroyed. Every failure must be a documented status (SA_ERR_STORE for corrupt data).
//
// Checksum fix-up. The store keeps each blob in chunks with checksum64(data, seed = seq) in
// chunks.checksum, and resuming refuses a chunk whose checksum fails before any decoder sees it.
// A mutation of the file's bytes almost always lands in chunk data (K/V, tokens, the config
// text), so without help nearly every input would stop at that check. After writing the file,
// and before the library opens it, the target therefore recomputes every chunk's checksum
// through SQLite (UPDATE chunks SET checksum = ...; a file SQLite cannot update is left as it
// is): the mutated data then reaches the session-config codec and the memories' state readers.
// SQLite keeps no page checksums, so nothing else needs repair. The fix-up uses the store's own
// checksum function; everything else is the public C ABI. The checksum check itself is covered
// by the store's unit tests (tests/unit/store_test.cpp).
//
// Seeds (make_fuzz_seeds.cpp): stores of short sessions of each memory kind - dense, streaming,
// cascade, dense with Quest.
#include <sqlite3.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "store/checksum.h"

using sa_fuzz::expect_status;
using sa_fuzz::require;

namespace {

sa_model* shipped_model() {
  static sa_model* model = [] {
    sa_model_params params;
    sa_model_params_init(&params);
    sa_model* m = nullptr;
    const sa_status st = sa_model_load(SA_MODELS_DIR "/sa-default-q8_0.gguf", &params, &m);
    require(st == SA_OK, "cannot load the shipped model", st);
    return m;
  }();
  return model;
}

std::string store_path() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("sa_store_fuzz_" + std::to_string(getpid()) + ".db"))
          .string();
  return path;
}

void remove_store(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
}

// checksum(data, seq): the chunk checksum the store verifies, as SQLite's signed 64-bit integer.
void sql_checksum(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const void* data = sqlite3_value_blob(argv[0]);
  const auto n = static_cast<size_t>(sqlite3_value_bytes(argv[0]));
  const auto seq = static_cast<uint64_t>(sqlite3_value_int64(argv[1]));
  sqlite3_result_int64(ctx, std::bit_cast<sqlite3_int64>(sa::store::checksum64(data, n, seq)));
}

void fix_checksums(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK &&
      sqlite3_create_function(db, "checksum", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr,
                              sql_checksum, nullptr, nullptr) == SQLITE_OK) {
    sqlite3_exec(db, "UPDATE chunks SET checksum = checksum(data, seq)", nullptr, nullptr, nullptr);
  }
  sqlite3_close(db);  // NULL: no-op
}

int32_t list_one(const sa_stored_session* s, void* user_data) {
  require(s->struct_size >= sizeof(sa_stored_session), "sa_stored_session.struct_size");
  // Reading every byte of the strings lets ASan check them.
  *static_cast<size_t*>(user_data) += std::strlen(s->session_id) + std::strlen(s->model_name);
  return 0;
}

void use_session(sa_session* session) {
  sa_model_desc desc;
  std::memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  require(sa_model_info(shipped_model(), &desc) == SA_OK, "sa_model_info");

  size_t n_positions = 0;
  const sa_status ps = sa_session_memory_positions(session, -1, -1, nullptr, 0, &n_positions);
  expect_status(ps, {SA_ERR_BUFFER_TOO_SMALL}, "sa_session_memory_positions");
  std::vector<uint64_t> positions(n_positions);
  expect_status(sa_session_memory_positions(session, -1, -1, positions.data(), positions.size(),
                                            &n_positions),
                {}, "sa_session_memory_positions");

  int32_t next = -1;
  const sa_status st = sa_decode_step(session, 1, &next);
  expect_status(st, {SA_DONE, SA_ERR_CONTEXT_FULL, SA_ERR_NOMEM, SA_ERR_BACKEND},
                "sa_decode_step");
  if (st == SA_OK || st == SA_DONE)
    require(next >= 0 && next < desc.n_vocab, "sa_decode_step gave a token out of range");
  sa_stats stats;
  std::memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  expect_status(sa_session_stats(session, &stats), {}, "sa_session_stats");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sa_model* model = shipped_model();
  const std::string path = store_path();
  remove_store(path);
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    require(f != nullptr, "cannot write the temporary store");
    require(size == 0 || std::fwrite(data, 1, size, f) == size, "cannot write the temporary store");
    std::fclose(f);
  }
  fix_checksums(path);

  size_t listed = 0;
  expect_status(sa_store_list(path.c_str(), list_one, &listed), {SA_ERR_STORE}, "sa_store_list");

  sa_session_params params;
  sa_session_params_init(&params);
  params.backend = SA_BACKEND_CPU;
  params.n_threads = 1;
  params.store_path = path.c_str();
  params.session_id = "fuzz";
  sa_session* session = nullptr;
  const sa_status st = sa_session_resume(model, &params, &session);
  expect_status(st, {SA_ERR_INVALID_ARG, SA_ERR_STORE, SA_ERR_UNSUPPORTED, SA_ERR_NOMEM},
                "sa_session_resume");
  require((st == SA_OK) == (session != nullptr), "the session handle disagrees with the status", st);
  if (session) {
    use_session(session);
    sa_session_destroy(session);
  }
  remove_store(path);
  return 0;
}

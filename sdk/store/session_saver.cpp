#include "store/session_saver.h"

#include <array>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>

#include "core/error.h"
#include "store/blob_io.h"
#include "store/checksum.h"
#include "store/model_fingerprint.h"
#include "store/session_config_codec.h"

namespace sa::store {

namespace {

uint64_t new_save_token() {
  static thread_local std::random_device rd;
  uint64_t t = 0;
  while (t == 0)
    t = (static_cast<uint64_t>(rd()) << 32 ^ rd()) ^
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return t;
}

uint64_t tokens_checksum(const std::vector<int32_t>& t, size_t n) {
  return checksum64(t.data(), n * sizeof(int32_t));
}

std::string token_page(size_t p) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "session/tokens/p%zu", p);
  return buf;
}

}  // namespace

session_saver::session_saver(std::string path, std::string name)
    : path_(std::move(path)), name_(std::move(name)) {
  if (path_.empty()) fail(SA_ERR_INVALID_ARG, "the store path is empty");
  if (name_.empty() || name_.size() > 1024)
    fail(SA_ERR_INVALID_ARG, "a session id must be 1 to 1024 bytes, not %zu", name_.size());
}

session_store& session_saver::store() {
  // The file deleted or replaced since it was opened: SQLite would go on writing into the
  // unlinked file. The path is opened anew; but first our WAL, still at the path and not
  // removed when a moved file is closed, is emptied into the old file, so that SQLite cannot
  // pair its frames with the new file there (which would corrupt that file).
  if (store_ && store_->db().has_moved()) {
    store_->db().empty_wal();
    store_.reset();
  }
  if (!store_) store_ = std::make_unique<session_store>(path_, session_store::open_mode::create);
  return *store_;
}

uint64_t session_saver::fingerprint(const model& m) {
  if (fingerprint_of_ != &m) {
    fingerprint_ = model_fingerprint(m);
    fingerprint_of_ = &m;
  }
  return fingerprint_;
}

void session_saver::save(session& s) {
  if (!s.usable())
    fail(SA_ERR_MISUSE, "cannot save session '%s': an earlier step failed and left it unusable",
         name_.c_str());
  const uint64_t fp = fingerprint(s.get_model());
  session_store& st = store();
  if (!st.writable())
    fail(SA_ERR_STORE, "store '%s' is read-only: cannot save session '%s'", path_.c_str(),
         name_.c_str());
  sqlite_db& db = st.db();
  transaction tx(db, transaction::kind::write);
  const std::optional<session_row> row = st.find(name_);
  if (row && (save_token_ == 0 || row->save_token != save_token_))
    fail(SA_ERR_STORE,
         "store '%s' already holds a session '%s' that this session neither resumed nor saved "
         "last; resume it, delete it, or save under another id",
         path_.c_str(), name_.c_str());
  const auto now = static_cast<int64_t>(std::time(nullptr));
  int64_t rowid = 0;
  if (row) {
    rowid = row->rowid;
  } else {
    statement ins(db,
                  "INSERT INTO sessions(name, model_fingerprint, model_name, memory, n_tokens, "
                  "state_version, save_token, created, updated) VALUES (?, 0, '', '', 0, 0, 0, ?, ?)",
                  "adding the session");
    ins.bind(1, name_).bind(2, now).bind(3, now).run();
    rowid = db.last_insert_rowid();
  }

  blob_writer w(st, rowid, name_, row.has_value());
  const std::string cfg = encode_config(s.config());
  w.put("session/config", cfg.data(), cfg.size(), blob_kind::mutable_blob);
  const std::array<uint64_t, 4> rng = s.sampling().state();
  w.put("session/sampler", rng.data(), sizeof rng, blob_kind::mutable_blob);
  w.put("session/logits", s.logits().data(), s.logits().size() * sizeof(float),
        blob_kind::mutable_blob);
  const std::array<uint64_t, 2> rect = s.rectify_state();
  w.put("session/rectify", rect.data(), sizeof rect, blob_kind::mutable_blob);
  const std::vector<int32_t>& tokens = s.tokens();
  const bool same_prefix = tokens.size() >= tokens_saved_ &&
                           tokens_checksum(tokens, tokens_saved_) == tokens_hash_;
  const size_t full = tokens.size() / k_token_page;
  for (size_t p = 0; p < full; ++p) {
    const std::string name = token_page(p);
    if (same_prefix && (p + 1) * k_token_page <= tokens_saved_ && w.has(name)) {
      w.keep(name);
      continue;
    }
    w.put(name, tokens.data() + p * k_token_page, k_token_page * sizeof(int32_t),
          blob_kind::immutable_blob);
  }
  if (tokens.size() > full * k_token_page)
    w.put("session/tokens/tail", tokens.data() + full * k_token_page,
          (tokens.size() - full * k_token_page) * sizeof(int32_t), blob_kind::mutable_blob);
  s.mutable_memory().write_state(w);
  s.write_policy_state(w);
  w.finish();

  const uint64_t token = new_save_token();
  statement upd(db,
                "UPDATE sessions SET model_fingerprint = ?, model_name = ?, memory = ?, "
                "n_tokens = ?, state_version = ?, save_token = ?, updated = ? WHERE id = ?",
                "updating the session");
  upd.bind(1, std::bit_cast<int64_t>(fp))
      .bind(2, s.get_model().name())
      .bind(3, std::string(memory_name(s.config().memory)))
      .bind(4, static_cast<int64_t>(tokens.size()))
      .bind(5, k_state_version)
      .bind(6, std::bit_cast<int64_t>(token))
      .bind(7, now)
      .bind(8, rowid)
      .run();
  tx.commit();

  save_token_ = token;
  tokens_saved_ = tokens.size();
  tokens_hash_ = tokens_checksum(tokens, tokens.size());
  last_save_bytes_ = w.bytes_written();
  s.mutable_memory().state_saved();
}

std::unique_ptr<session> session_saver::resume(std::shared_ptr<const model> m,
                                               const std::string& path, const std::string& name,
                                               backend_kind backend, int32_t device,
                                               int32_t n_threads,
                                               std::unique_ptr<session_saver>& saver) {
  auto out_saver = std::make_unique<session_saver>(path, name);
  auto st = std::make_unique<session_store>(path, session_store::open_mode::existing);
  const uint64_t fp = out_saver->fingerprint(*m);
  const int32_t n_vocab = m->hp().n_vocab;
  std::unique_ptr<session> s;
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  std::array<uint64_t, 4> rng{};
  std::array<uint64_t, 2> rect{};
  session_row row;
  {
    transaction tx(st->db(), transaction::kind::read);
    const std::optional<session_row> found = st->find(name);
    if (!found)
      fail(SA_ERR_INVALID_ARG, "store '%s' holds no session named '%s'", path.c_str(),
           name.c_str());
    row = *found;
    const std::string what = "store '" + path + "', session '" + name + "'";
    if (row.model_fingerprint != fp)
      fail(SA_ERR_STORE,
           "%s was saved with a different model: '%s' (fingerprint %016llx), this one is '%s' "
           "(%016llx)",
           what.c_str(), row.model_name.c_str(),
           static_cast<unsigned long long>(row.model_fingerprint), m->name().c_str(),
           static_cast<unsigned long long>(fp));
    if (row.state_version != k_state_version)
      fail(SA_ERR_STORE, "%s has state format %lld; this version of sa reads format %lld",
           what.c_str(), static_cast<long long>(row.state_version),
           static_cast<long long>(k_state_version));
    if (row.n_tokens < 0 || row.n_tokens > INT32_MAX)
      fail(SA_ERR_STORE, "%s claims %lld tokens", what.c_str(),
           static_cast<long long>(row.n_tokens));

    blob_reader r(*st, row.rowid, name);
    const std::vector<uint8_t> cfg_bytes = r.get("session/config");
    session_config c = decode_config(std::string(cfg_bytes.begin(), cfg_bytes.end()),
                                     what + " settings");
    if (row.memory != memory_name(c.memory))
      fail(SA_ERR_STORE, "%s: its row says memory '%s', its settings '%s'", what.c_str(),
           row.memory.c_str(), memory_name(c.memory));
    c.backend = backend;
    c.device = device;
    c.n_threads = n_threads;
    try {
      s = std::make_unique<session>(m, c);
    } catch (const sa::error& e) {
      if (e.status() != SA_ERR_INVALID_ARG && e.status() != SA_ERR_UNSUPPORTED) throw;
      fail(SA_ERR_STORE, "%s has settings this library refuses: %s", what.c_str(), e.what());
    }
    s->mutable_memory().read_state(r);
    s->read_policy_state(r);
    r.get_into("session/sampler", rng.data(), sizeof rng);
    if (r.has("session/rectify")) r.get_into("session/rectify", rect.data(), sizeof rect);

    const std::vector<uint8_t> lg = r.get("session/logits");
    if (lg.size() != 0 && lg.size() != static_cast<size_t>(n_vocab) * sizeof(float))
      fail(SA_ERR_STORE, "%s: its logits have %zu bytes, not %d floats", what.c_str(), lg.size(),
           n_vocab);
    logits.resize(lg.size() / sizeof(float));
    if (!lg.empty()) std::memcpy(logits.data(), lg.data(), lg.size());

    const auto n = static_cast<size_t>(row.n_tokens);
    tokens.resize(n);
    const size_t full = n / k_token_page;
    for (size_t p = 0; p < full; ++p)
      r.get_into(token_page(p), tokens.data() + p * k_token_page, k_token_page * sizeof(int32_t));
    if (n > full * k_token_page)
      r.get_into("session/tokens/tail", tokens.data() + full * k_token_page,
                 (n - full * k_token_page) * sizeof(int32_t));
    for (size_t i = 0; i < n; ++i)
      if (tokens[i] < 0 || tokens[i] >= n_vocab)
        fail(SA_ERR_STORE, "%s: token %zu of its history (%d) is outside the vocabulary",
             what.c_str(), i, tokens[i]);
    const memory_stats ms = s->memory().stats();
    if (ms.tokens_held > n || ms.tokens_seen != n || logits.empty() != (n == 0))
      fail(SA_ERR_STORE, "%s is inconsistent: %zu tokens in its history, its memory saw %llu and holds %llu, %s logits",
           what.c_str(), n, static_cast<unsigned long long>(ms.tokens_seen),
           static_cast<unsigned long long>(ms.tokens_held), logits.empty() ? "no" : "with");
    tx.commit();
  }
  s->restore_history(std::move(tokens), std::move(logits));
  s->set_sampler_state(rng);
  // Pending rectification exists only for sparse sessions that rectify, and never reaches a
  // whole period (the step that completes one rectifies).
  const int32_t period = s->config().sparse.enabled() ? s->config().sparse.rectify_every : 0;
  if (rect[0] > s->tokens().size() || (period == 0 ? rect[0] != 0 : rect[0] >= static_cast<uint64_t>(period)) ||
      rect[1] > s->tokens().size())
    fail(SA_ERR_STORE, "session '%s': %llu tokens awaiting rectification and %llu rectified, of %zu, with a "
         "period of %d", name.c_str(), static_cast<unsigned long long>(rect[0]),
         static_cast<unsigned long long>(rect[1]), s->tokens().size(), period);
  s->set_rectify_state(rect);
  out_saver->save_token_ = row.save_token;
  out_saver->tokens_saved_ = s->tokens().size();
  out_saver->tokens_hash_ = tokens_checksum(s->tokens(), s->tokens().size());
  if (st->writable()) out_saver->store_ = std::move(st);
  saver = std::move(out_saver);
  return s;
}

}  // namespace sa::store

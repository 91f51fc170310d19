#include "chat_engine.h"

#include <QDateTime>
#include <QElapsedTimer>
#include <algorithm>
#include <vector>

#include "conversation_titles.h"

namespace {

constexpr qint64 figures_every_ms = 100;     // panel updates while a reply streams
constexpr qint64 memory_map_every_ms = 500;  // memory map updates while a reply streams
constexpr qint64 progress_every_ms = 30;     // prefill progress reports

QString new_session_id() {
  return QStringLiteral("chat-") +
         QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMdd-HHmmss-zzz"));
}

// A conversation's default title: the start of its first message, on one line.
QString title_from(const QString& message) {
  QString t = message.simplified();
  if (t.size() > 48) t = t.left(47) + QChar(0x2026);
  return t;
}

int kv_element_bytes(int32_t kv_type) {
  return kv_type == SA_KV_F16 || kv_type == SA_KV_BF16 ? 2 : 4;
}

QString backend_name(int32_t kind, int32_t device) {
  const char* label = kind == SA_BACKEND_CUDA     ? "cuda"
                      : kind == SA_BACKEND_VULKAN ? "vulkan"
                                                  : "cpu";
  for (int32_t i = 0; i < sa_backend_count(); ++i) {
    sa_backend_desc d{};
    d.struct_size = sizeof d;
    if (sa_backend_info(i, &d) == SA_OK && d.kind == kind && d.device == device)
      return QStringLiteral("%1:%2 %3").arg(QLatin1String(label)).arg(device).arg(QString::fromUtf8(d.name));
  }
  return QStringLiteral("%1:%2").arg(QLatin1String(label)).arg(device);
}

}  // namespace

chat_engine::chat_engine() {
  qRegisterMetaType<chat_settings>();
  qRegisterMetaType<chat_message>();
  qRegisterMetaType<QList<chat_message>>();
  qRegisterMetaType<stored_conversation>();
  qRegisterMetaType<QList<stored_conversation>>();
  qRegisterMetaType<model_summary>();
  qRegisterMetaType<session_figures>();
  qRegisterMetaType<turn_result>();
  qRegisterMetaType<memory_map>();
  thread_.setObjectName(QStringLiteral("sa-desktop engine"));
  moveToThread(&thread_);
  thread_.start();
}

chat_engine::~chat_engine() {
  stop();
  thread_.quit();
  thread_.wait();  // the turn in progress ends, closes and saves first
  close_session();
  sa_model_destroy(model_);
}

// ---- the queued entry points --------------------------------------------------------------

void chat_engine::configure(const chat_settings& s) {
  QMetaObject::invokeMethod(this, [this, s] { do_configure(s); }, Qt::QueuedConnection);
}
void chat_engine::open_store(const QString& path) {
  QMetaObject::invokeMethod(this, [this, path] { do_open_store(path); }, Qt::QueuedConnection);
}
void chat_engine::refresh_conversations() {
  QMetaObject::invokeMethod(this, [this] { do_list(); }, Qt::QueuedConnection);
}
void chat_engine::open_conversation(const QString& id) {
  stop();
  QMetaObject::invokeMethod(this, [this, id] { do_open(id); }, Qt::QueuedConnection);
}
void chat_engine::new_conversation() {
  stop();
  QMetaObject::invokeMethod(this, [this] { do_new(); }, Qt::QueuedConnection);
}
void chat_engine::rename_conversation(const QString& id, const QString& title) {
  QMetaObject::invokeMethod(this, [this, id, title] { do_rename(id, title); }, Qt::QueuedConnection);
}
void chat_engine::delete_conversation(const QString& id) {
  QMetaObject::invokeMethod(this, [this, id] { do_delete(id); }, Qt::QueuedConnection);
}
void chat_engine::send(const QString& text) {
  const quint64 ticket = ++issued_;
  QMetaObject::invokeMethod(this, [this, text, ticket] { do_send(text, ticket); }, Qt::QueuedConnection);
}
void chat_engine::set_memory_map_selection(int32_t layer, int32_t kv_head) {
  QMetaObject::invokeMethod(this, [this, layer, kv_head] { do_set_map(layer, kv_head); },
                            Qt::QueuedConnection);
}

void chat_engine::load_messages(qsizetype first, qsizetype count) {
  QMetaObject::invokeMethod(this, [this, first, count] { do_load_messages(first, count); },
                            Qt::QueuedConnection);
}

void chat_engine::stop() { stop_below_.store(issued_.load()); }

void chat_engine::inspect(const std::function<void(const sa_model*, const sa_session*)>& f) {
  if (QThread::currentThread() == thread()) {
    f(model_, session_);
    return;
  }
  QMetaObject::invokeMethod(this, [this, &f] { f(model_, session_); }, Qt::BlockingQueuedConnection);
}

// ---- model, store, conversations ---------------------------------------------------------

void chat_engine::fail(const QString& what, const char* sdk_message) {
  const QString detail = QString::fromUtf8(sdk_message ? sdk_message : "");
  emit error_occurred(detail.isEmpty() ? what : what + QStringLiteral(": ") + detail);
}

void chat_engine::do_configure(const chat_settings& s) {
  const bool reload = model_ == nullptr || s.model_path != model_info_.path;
  settings_ = s;
  if (reload) {
    do_load_model(s.model_path);
    return;
  }
  template_ = s.template_override.isEmpty() ? model_template_ : chat_template::named(s.template_override);
  model_info_.template_name = template_.name;
  emit model_loaded(model_info_);
}

void chat_engine::do_load_model(const QString& path) {
  sa_model* loaded = nullptr;
  const QByteArray p = path.toUtf8();
  if (sa_model_load(p.constData(), nullptr, &loaded) != SA_OK) {
    fail(QStringLiteral("Cannot load the model %1").arg(path), sa_last_error());
    settings_.model_path = model_info_.path;  // the model in use stays
    return;
  }
  close_session();
  emit conversation_opened(QString(), {});
  sa_model_destroy(model_);
  model_ = loaded;

  sa_model_desc d{};
  d.struct_size = sizeof d;
  sa_model_info(model_, &d);
  model_info_ = {};
  model_info_.path = path;
  model_info_.name = QString::fromUtf8(d.name);
  model_info_.architecture = QString::fromUtf8(d.architecture);
  model_info_.n_layers = d.n_layers;
  model_info_.n_kv_heads = d.n_kv_heads;
  model_info_.head_dim = d.head_dim;
  model_info_.n_params = d.n_params;
  std::string jinja;
  size_t len = 0;
  if (sa_model_meta_string(model_, "tokenizer.chat_template", nullptr, 0, &len) ==
      SA_ERR_BUFFER_TOO_SMALL) {
    jinja.resize(len + 1);
    if (sa_model_meta_string(model_, "tokenizer.chat_template", jinja.data(), jinja.size(), &len) == SA_OK)
      jinja.resize(len);
    else
      jinja.clear();
  }
  model_template_ = chat_template::from_metadata(jinja);
  template_ = settings_.template_override.isEmpty() ? model_template_
                                                    : chat_template::named(settings_.template_override);
  model_info_.template_name = template_.name;
  model_info_.model_template = model_template_.name;
  emit model_loaded(model_info_);
  emit_figures();
  emit_memory_map();
}

void chat_engine::do_open_store(const QString& path) {
  close_session();
  store_path_ = path;
  emit conversation_opened(QString(), {});
  emit_figures();
  emit_memory_map();
  do_list();
}

void chat_engine::do_list() {
  QList<stored_conversation> list;
  QString error;
  if (!list_store(store_path_, &list, &error))
    fail(QStringLiteral("Cannot read the conversation store %1").arg(store_path_), error.toUtf8().constData());
  const conversation_titles titles(store_path_);
  for (stored_conversation& c : list) c.title = titles.title(c.id);
  emit conversations_listed(list);
}

void chat_engine::close_session() {
  sa_session_destroy(session_);  // every turn was saved when it ended
  session_ = nullptr;
  session_id_.clear();
  session_memory_.clear();
  tokens_per_s_ = 0;
}

std::string chat_engine::history_text() const {
  const int32_t* tokens = nullptr;
  size_t n = 0;
  std::string out;
  sa_detokenizer* d = nullptr;
  if (sa_session_tokens(session_, &tokens, &n) != SA_OK ||
      sa_detokenizer_create(model_, SA_PIECE_RENDER_SPECIAL, &d) != SA_OK)
    return out;
  std::vector<char> buf(256);
  size_t len = 0;
  for (size_t i = 0; i < n; ++i) {
    sa_status st = sa_detokenizer_push(d, tokens[i], buf.data(), buf.size(), &len);
    if (st == SA_ERR_BUFFER_TOO_SMALL) {
      buf.resize(len);
      st = sa_detokenizer_push(d, tokens[i], buf.data(), buf.size(), &len);
    }
    if (st == SA_OK) out.append(buf.data(), len);
  }
  if (sa_detokenizer_flush(d, buf.data(), buf.size(), &len) == SA_OK) out.append(buf.data(), len);
  sa_detokenizer_destroy(d);
  return out;
}

void chat_engine::do_open(const QString& id) {
  close_session();
  if (model_ == nullptr) {
    fail(QStringLiteral("Cannot open the conversation"), "no model is loaded");
    emit conversation_opened(QString(), {});
    return;
  }
  const QByteArray store = store_path_.toUtf8(), sid = id.toUtf8();
  const sa_session_params p = session_params(settings_, store.constData(), sid.constData());
  if (sa_session_resume(model_, &p, &session_) != SA_OK) {
    fail(QStringLiteral("Cannot resume the conversation %1").arg(id), sa_last_error());
    session_ = nullptr;
    emit conversation_opened(QString(), {});
    emit_figures();
    emit_memory_map();
    return;
  }
  session_id_ = id;
  QList<stored_conversation> list;
  QString ignored;
  if (list_store(store_path_, &list, &ignored))
    for (const stored_conversation& c : list)
      if (c.id == id) session_memory_ = memory_name(c.memory);
  emit conversation_opened(id, template_.parse(history_text()));
  emit_figures();
  emit_memory_map();
}

void chat_engine::do_new() {
  close_session();
  emit conversation_opened(QString(), {});
  emit_figures();
  emit_memory_map();
}

void chat_engine::do_rename(const QString& id, const QString& title) {
  conversation_titles(store_path_).set_title(id, title);
  do_list();
}

void chat_engine::do_delete(const QString& id) {
  if (id == session_id_) do_new();
  const QByteArray store = store_path_.toUtf8(), sid = id.toUtf8();
  if (sa_store_delete(store.constData(), sid.constData()) != SA_OK)
    fail(QStringLiteral("Cannot delete the conversation %1").arg(id), sa_last_error());
  else
    conversation_titles(store_path_).remove(id);
  do_list();
}

void chat_engine::do_set_map(int32_t layer, int32_t kv_head) {
  map_layer_ = layer;
  map_head_ = kv_head;
  emit_memory_map();
}

void chat_engine::do_load_messages(qsizetype first, qsizetype count) {
  if (session_ == nullptr || first < 0 || count <= 0) return;
  const QList<chat_message> all = template_.parse(history_text());
  if (first >= all.size()) return;
  emit earlier_messages(session_id_, first, all.mid(first, std::min(count, all.size() - first)));
}

// ---- a turn ---------------------------------------------------------------------------------

std::vector<int32_t> chat_engine::tokenize(const std::string& text, uint32_t flags) const {
  size_t n = 0;
  sa_tokenize(model_, text.data(), text.size(), flags, nullptr, 0, &n);
  std::vector<int32_t> t(n);
  if (sa_tokenize(model_, text.data(), text.size(), flags, t.data(), n, &n) != SA_OK) t.clear();
  return t;
}

bool chat_engine::ensure_session(const QString& first_message) {
  if (session_ != nullptr) return true;
  if (model_ == nullptr) {
    fail(QStringLiteral("Cannot start a conversation"),
         "no model is loaded (choose a GGUF file in Settings)");
    return false;
  }
  const QString id = new_session_id();
  const QByteArray store = store_path_.toUtf8(), sid = id.toUtf8();
  const sa_session_params p = session_params(settings_, store.constData(), sid.constData());
  if (sa_session_create(model_, &p, &session_) != SA_OK) {
    fail(QStringLiteral("Cannot start a conversation"), sa_last_error());
    session_ = nullptr;
    return false;
  }
  session_id_ = id;
  session_memory_ = memory_name(settings_.memory);
  conversation_titles(store_path_).set_title(id, title_from(first_message));
  return true;
}

int32_t chat_engine::on_progress(size_t done, size_t total, void* user_data) {
  auto* e = static_cast<chat_engine*>(user_data);
  const qint64 now = QDateTime::currentMSecsSinceEpoch();
  if (now - e->prefill_reported_ms_ >= progress_every_ms) {
    e->prefill_reported_ms_ = now;
    emit e->prefill_progress(static_cast<qint64>(done), static_cast<qint64>(total));
  }
  return e->stopping(e->prefill_ticket_) ? 1 : 0;
}

// The last sampled token is not in the history yet: a reply cut short keeps it (it was shown),
// then the template's end of turn closes the turn, so the history ends at a turn boundary.
bool chat_engine::close_turn(int32_t last_token, bool keep_last) {
  std::vector<int32_t> close = tokenize(template_.turn_end(), SA_TOKENIZE_PARSE_SPECIAL);
  if (keep_last) close.insert(close.begin(), last_token);
  if (sa_prefill(session_, close.data(), close.size(), nullptr, nullptr) != SA_OK) {
    fail(QStringLiteral("Cannot close the turn"), sa_session_errmsg(session_));
    return false;
  }
  return true;
}

void chat_engine::do_send(const QString& text, quint64 ticket) {
  turn_result r;
  if (stopping(ticket)) {  // stopped before it started
    r.cancelled = true;
    emit reply_finished(r);
    return;
  }
  if (!ensure_session(text)) {
    r.failed = true;
    emit reply_finished(r);
    return;
  }
  const int32_t* history = nullptr;
  size_t n_history = 0;
  sa_session_tokens(session_, &history, &n_history);

  // The user's text is tokenized without control-token parsing, so typing "<|im_end|>" cannot
  // forge a turn; the template around it is parsed. BOS (when the model asks for it) opens the
  // conversation.
  std::vector<int32_t> prompt = tokenize(
      template_.user_open, SA_TOKENIZE_PARSE_SPECIAL | (n_history == 0 ? SA_TOKENIZE_ADD_SPECIAL : 0u));
  for (const std::vector<int32_t>& part :
       {tokenize(text.toStdString(), 0u), tokenize(template_.user_close + template_.assistant_open,
                                                   SA_TOKENIZE_PARSE_SPECIAL)})
    prompt.insert(prompt.end(), part.begin(), part.end());

  prefill_ticket_ = ticket;
  prefill_reported_ms_ = 0;
  emit prefill_progress(0, static_cast<qint64>(prompt.size()));
  sa_status st = sa_prefill(session_, prompt.data(), prompt.size(), on_progress, this);
  if (st == SA_ERR_CANCELLED) {  // the session is as before the turn
    r.cancelled = true;
    emit reply_finished(r);
    return;
  }
  if (st != SA_OK) {
    fail(QStringLiteral("Cannot process the message"), sa_session_errmsg(session_));
    r.failed = true;
    emit reply_finished(r);
    return;
  }
  r.added = true;
  emit prefill_progress(static_cast<qint64>(prompt.size()), static_cast<qint64>(prompt.size()));
  emit reply_started();

  sa_detokenizer* d = nullptr;
  sa_detokenizer_create(model_, 0, &d);
  std::vector<char> buf(1024);
  size_t len = 0;
  const auto push = [&](int32_t token) {
    sa_status s = sa_detokenizer_push(d, token, buf.data(), buf.size(), &len);
    if (s == SA_ERR_BUFFER_TOO_SMALL) {
      buf.resize(len);
      s = sa_detokenizer_push(d, token, buf.data(), buf.size(), &len);
    }
    return s == SA_OK ? QString::fromUtf8(buf.data(), qsizetype(len)) : QString();
  };

  QElapsedTimer clock;
  clock.start();
  qint64 figures_at = 0, map_at = 0;
  int32_t t = -1;
  bool ended = false, shown = false;  // the model ended the turn; t was shown
  st = sa_sample(session_, &t);
  while (st == SA_OK || st == SA_DONE) {
    if (st == SA_DONE) {
      ended = true;
      break;
    }
    if (stopping(ticket)) {
      r.stopped = true;
      break;
    }
    const QString piece = push(t);
    shown = true;
    ++r.n_tokens;
    if (!piece.isEmpty()) {
      r.reply += piece;
      emit piece_generated(piece);
    }
    if (r.n_tokens >= settings_.max_reply_tokens) break;
    st = sa_decode_step(session_, t, &t);
    shown = false;
    const qint64 ms = clock.elapsed();
    if (ms - figures_at >= figures_every_ms) {
      figures_at = ms;
      tokens_per_s_ = ms > 0 ? 1000.0 * r.n_tokens / static_cast<double>(ms) : 0;
      emit_figures();
    }
    if (ms - map_at >= memory_map_every_ms) {
      map_at = ms;
      emit_memory_map();
    }
  }
  if (sa_detokenizer_flush(d, buf.data(), buf.size(), &len) == SA_OK && len > 0) {
    const QString rest = QString::fromUtf8(buf.data(), qsizetype(len));
    r.reply += rest;
    emit piece_generated(rest);
  }
  sa_detokenizer_destroy(d);
  const qint64 ms = clock.elapsed();
  if (ms > 0 && r.n_tokens > 0) tokens_per_s_ = 1000.0 * r.n_tokens / static_cast<double>(ms);
  if (st != SA_OK && st != SA_DONE) {
    fail(QStringLiteral("Generation failed"), sa_session_errmsg(session_));
    r.failed = true;
  }
  emit reply_finished(r);  // the window is free again; closing and saving follow

  if (close_turn(t, shown && !ended)) {
    if (sa_session_save(session_) != SA_OK) {
      fail(QStringLiteral("Cannot save the conversation"), sa_session_errmsg(session_));
    } else {
      emit turn_saved(session_id_);
      do_list();
    }
  }
  emit_figures();
  emit_memory_map();
}

// ---- what the panel shows -----------------------------------------------------------------

void chat_engine::emit_figures() {
  session_figures f;
  f.stats.struct_size = sizeof f.stats;
  if (session_ == nullptr || sa_session_stats(session_, &f.stats) != SA_OK) {
    f.stats = {};
    f.stats.struct_size = sizeof f.stats;
    emit figures_updated(f);
    return;
  }
  const quint64 per_token = 2ull * static_cast<quint64>(model_info_.n_layers) *
                            static_cast<quint64>(model_info_.n_kv_heads) *
                            static_cast<quint64>(model_info_.head_dim) *
                            static_cast<quint64>(kv_element_bytes(f.stats.kv_type));
  f.dense_bytes = f.stats.n_tokens * per_token;
  f.tokens_per_s = tokens_per_s_;
  f.backend = backend_name(f.stats.backend, f.stats.device);
  f.memory = session_memory_;
  emit figures_updated(f);
}

void chat_engine::emit_memory_map() {
  memory_map map;
  map.layer = map_layer_;
  map.kv_head = map_head_;
  if (session_ != nullptr) {
    QString error;
    if (!build_memory_map(session_, model_, map_layer_, map_head_, memory_map_limits{}, &map, &error) &&
        SA_DESKTOP_MEMORY_MAP)
      emit error_occurred(QStringLiteral("Cannot read the memory map: ") + error);
  }
  emit memory_map_updated(map);
}

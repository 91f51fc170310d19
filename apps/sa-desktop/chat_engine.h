// chat_engine: the app's whole use of the SDK — model, session, store — on a worker thread.
//
// Every public method may be called from any thread: it queues the work on the engine's own
// thread and returns at once, so the window never waits for a prefill, a decode step or a save.
// Results come back as signals (queued to the receivers' threads). stop() is the exception: it
// flags the turn in progress (and any queued before it) at once, and the worker sees the flag
// between decode steps and in sa_prefill's progress callback.
//
// A turn: the user's message is wrapped in the chat template and prefilled; the reply is
// sampled token by token, each token turned into text by an sa_detokenizer and emitted as a
// piece; then the turn is closed as the template closes it and the session saved to the store,
// so a crash loses at most the turn in progress.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>
#include <atomic>
#include <functional>
#include <string>

#include "chat_settings.h"
#include "chat_template.h"
#include "memory_map.h"
#include "sa/sa.h"
#include "store_listing.h"

// The loaded model, as the settings and the memory panel need it.
struct model_summary {
  QString path, name, architecture;
  QString template_name;  // the chat template in use
  QString model_template; // the one the model's metadata names
  int32_t n_layers = 0, n_kv_heads = 0, head_dim = 0;
  quint64 n_params = 0;
};
Q_DECLARE_METATYPE(model_summary)

// What the memory panel shows: the session's counters and what follows from them.
struct session_figures {
  sa_stats stats{};           // sa_session_stats as read after the last step
  quint64 dense_bytes = 0;    // K/V bytes a dense memory would hold for stats.n_tokens tokens
  double tokens_per_s = 0;    // decode rate of the current (or last) reply
  QString backend;            // "cpu: CPU (16 threads, avx2 kernels)"
  QString memory;             // "cascade", "dense", ...
};
Q_DECLARE_METATYPE(session_figures)

// How a turn ended.
struct turn_result {
  QString reply;             // the assistant's text as shown (kept when stopped)
  bool stopped = false;      // the user stopped it (the partial reply is kept)
  bool cancelled = false;    // stopped during the prefill: nothing was added to the history
  bool added = false;        // the user's message reached the history (the turn is kept)
  bool failed = false;       // an error; the message came through error_occurred
  int n_tokens = 0;          // reply tokens generated
};
Q_DECLARE_METATYPE(turn_result)

class chat_engine : public QObject {
  Q_OBJECT

 public:
  chat_engine();
  ~chat_engine() override;  // stops the turn in progress, lets it save, ends the thread

  // Queued on the worker thread.
  void configure(const chat_settings& settings);  // loads the model if its path changed
  void open_store(const QString& path);           // and lists it
  void refresh_conversations();
  void open_conversation(const QString& id);      // resume it from the store
  void new_conversation();                        // the next send starts a new session
  void rename_conversation(const QString& id, const QString& title);
  void delete_conversation(const QString& id);
  void send(const QString& text);
  void set_memory_map_selection(int32_t layer, int32_t kv_head);  // -1 = union
  // Messages [first, first + count) of the open conversation, read back from its history (the
  // chat view shows only the newest ones); answered by earlier_messages.
  void load_messages(qsizetype first, qsizetype count);

  // Immediate: stop the turn in progress and every turn queued so far.
  void stop();

  // Run f on the worker thread with the current model and session (either may be NULL) and
  // wait for it; for tests and diagnostics that read the session through the C ABI.
  void inspect(const std::function<void(const sa_model*, const sa_session*)>& f);

 signals:
  void model_loaded(const model_summary& model);
  void error_occurred(const QString& message);
  void conversations_listed(const QList<stored_conversation>& conversations);
  void conversation_opened(const QString& id, const QList<chat_message>& messages);
  void prefill_progress(qint64 done, qint64 total);
  void reply_started();
  void piece_generated(const QString& text);
  void reply_finished(const turn_result& result);
  void turn_saved(const QString& id);
  void figures_updated(const session_figures& figures);
  void memory_map_updated(const memory_map& map);
  void earlier_messages(const QString& id, qsizetype first, const QList<chat_message>& messages);

 private:
  void do_configure(const chat_settings& s);
  void do_load_model(const QString& path);
  void do_open_store(const QString& path);
  void do_list();
  void do_open(const QString& id);
  void do_new();
  void do_rename(const QString& id, const QString& title);
  void do_delete(const QString& id);
  void do_send(const QString& text, quint64 ticket);
  void do_set_map(int32_t layer, int32_t kv_head);
  void do_load_messages(qsizetype first, qsizetype count);

  bool ensure_session(const QString& first_message);
  bool close_turn(int32_t last_token, bool keep_last);
  void close_session();
  void fail(const QString& what, const char* sdk_message);
  bool stopping(quint64 ticket) const { return ticket <= stop_below_.load(); }
  void emit_figures();
  void emit_memory_map();
  std::vector<int32_t> tokenize(const std::string& text, uint32_t flags) const;
  std::string history_text() const;  // the history as text, control tokens included
  static int32_t on_progress(size_t done, size_t total, void* user_data);

  QThread thread_;
  chat_settings settings_;
  QString store_path_;
  sa_model* model_ = nullptr;
  model_summary model_info_;
  chat_template template_ = chat_template::named(QStringLiteral("chatml"));  // in use
  chat_template model_template_ = template_;  // named by the model's metadata
  sa_session* session_ = nullptr;
  QString session_id_;        // the open conversation ("" before its first turn)
  QString session_memory_;    // its memory kind, for the panel
  int32_t map_layer_ = -1, map_head_ = -1;
  double tokens_per_s_ = 0;
  // Stop flags: turns are numbered as they are queued; every turn numbered <= stop_below_ stops.
  std::atomic<quint64> issued_{0};
  std::atomic<quint64> stop_below_{0};
  // The turn the progress callback belongs to, and when it last reported.
  quint64 prefill_ticket_ = 0;
  qint64 prefill_reported_ms_ = 0;
};

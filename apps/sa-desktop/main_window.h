// main_window: conversations on the left, the chat in the middle, the memory panel on the
// right. It only draws and forwards: every SDK call runs in its chat_engine's thread.
#pragma once

#include <QElapsedTimer>
#include <QMainWindow>
#include <memory>

#include "chat_engine.h"

class QAction;
class QLabel;
class QProgressBar;
class QPushButton;
class QSplitter;
class chat_view;
class conversation_list;
class memory_panel;
class message_input;

class main_window : public QMainWindow {
  Q_OBJECT

 public:
  main_window(const QString& store_path, const chat_settings& settings, QWidget* parent = nullptr);
  ~main_window() override;

  void send_message(const QString& text);  // as if typed and Enter pressed
  void stop();                             // as if Stop was clicked

  const chat_settings& settings() const { return settings_; }
  void apply_settings(const chat_settings& s);
  void open_store(const QString& path);

  // The parts, for tests and scripted runs.
  chat_engine* engine() const { return engine_.get(); }
  chat_view* chat() const { return chat_; }
  message_input* input() const { return input_; }
  QPushButton* send_button() const { return send_; }
  QPushButton* stop_button() const { return stop_; }
  QProgressBar* progress() const { return progress_; }
  conversation_list* conversations() const { return list_; }
  memory_panel* memory() const { return memory_; }
  QString error_text() const;        // the error banner's text, "" when hidden
  bool busy() const { return busy_; }
  const QString& current_conversation() const { return current_; }

 signals:
  void turn_done();  // a reply ended (finished, stopped, cancelled or failed) and the UI is idle
  void settings_changed(const chat_settings& settings);

 private:
  void build_ui();
  void connect_engine();
  void set_busy(bool busy);
  void show_error(const QString& message);
  void edit_settings();
  void choose_store();
  void on_reply_finished(const turn_result& r);

  std::unique_ptr<chat_engine> engine_;
  chat_settings settings_;
  model_summary model_;
  QString store_path_;
  QString current_;       // the conversation shown ("" for a new one)
  bool busy_ = false;
  bool open_newest_ = true;  // open the newest conversation when the store is first listed
  QString pending_text_;  // the message of the turn in progress (restored if cancelled early)

  conversation_list* list_;
  chat_view* chat_;
  message_input* input_;
  QPushButton* send_;
  QPushButton* stop_;
  QProgressBar* progress_;
  QLabel* error_;
  QWidget* error_bar_;
  memory_panel* memory_;
  QSplitter* splitter_;
  QLabel* status_model_;
};

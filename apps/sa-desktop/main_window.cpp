#include "main_window.h"

#include <QApplication>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenuBar>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QStatusBar>
#include <QToolBar>
#include <QVBoxLayout>

#include "chat_view.h"
#include "conversation_list.h"
#include "memory_panel.h"
#include "message_input.h"
#include "settings_dialog.h"

main_window::main_window(const QString& store_path, const chat_settings& settings, QWidget* parent)
    : QMainWindow(parent), engine_(std::make_unique<chat_engine>()), settings_(settings),
      store_path_(store_path) {
  build_ui();
  connect_engine();
  engine_->configure(settings_);
  engine_->open_store(store_path_);
}

main_window::~main_window() = default;  // the engine stops the turn in progress and saves it

void main_window::build_ui() {
  setWindowTitle(QStringLiteral("sa-desktop"));
  resize(1280, 780);

  list_ = new conversation_list(this);

  auto* center = new QWidget(this);
  error_bar_ = new QWidget(center);
  error_bar_->setStyleSheet(QStringLiteral("background:#fdecea; color:#8a1c12; border-radius:4px;"));
  error_ = new QLabel(error_bar_);
  error_->setWordWrap(true);
  error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* dismiss = new QPushButton(tr("Dismiss"), error_bar_);
  auto* error_layout = new QHBoxLayout(error_bar_);
  error_layout->addWidget(error_, 1);
  error_layout->addWidget(dismiss);
  error_bar_->hide();
  connect(dismiss, &QPushButton::clicked, error_bar_, &QWidget::hide);

  chat_ = new chat_view(center);
  progress_ = new QProgressBar(center);
  progress_->setFormat(tr("Reading the message: %v / %m tokens"));
  progress_->hide();
  input_ = new message_input(center);
  send_ = new QPushButton(tr("Send"), center);
  stop_ = new QPushButton(tr("Stop"), center);
  stop_->setEnabled(false);
  auto* buttons = new QVBoxLayout;
  buttons->addWidget(send_);
  buttons->addWidget(stop_);
  buttons->addStretch();
  auto* input_row = new QHBoxLayout;
  input_row->addWidget(input_, 1);
  input_row->addLayout(buttons);
  auto* center_layout = new QVBoxLayout(center);
  center_layout->setContentsMargins(0, 0, 0, 0);
  center_layout->addWidget(error_bar_);
  center_layout->addWidget(chat_, 1);
  center_layout->addWidget(progress_);
  center_layout->addLayout(input_row);

  memory_ = new memory_panel(this);

  splitter_ = new QSplitter(this);
  splitter_->addWidget(list_);
  splitter_->addWidget(center);
  splitter_->addWidget(memory_);
  splitter_->setStretchFactor(0, 0);
  splitter_->setStretchFactor(1, 1);
  splitter_->setStretchFactor(2, 0);
  splitter_->setSizes({240, 620, 420});
  auto* frame = new QWidget(this);
  auto* frame_layout = new QVBoxLayout(frame);
  frame_layout->setContentsMargins(8, 8, 8, 8);
  frame_layout->addWidget(splitter_);
  setCentralWidget(frame);

  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* new_chat = file->addAction(tr("&New chat"), QKeySequence::New, list_, &conversation_list::new_requested);
  file->addAction(tr("&Open store…"), this, &main_window::choose_store);
  file->addAction(tr("&Settings…"), QKeySequence::Preferences, this, &main_window::edit_settings);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  QMenu* view = menuBar()->addMenu(tr("&View"));
  QAction* show_memory = view->addAction(tr("&Memory panel"));
  show_memory->setCheckable(true);
  show_memory->setChecked(true);
  connect(show_memory, &QAction::toggled, memory_, &QWidget::setVisible);

  QToolBar* tools = addToolBar(tr("Chat"));
  tools->setMovable(false);
  tools->addAction(new_chat);
  tools->addAction(tr("Settings…"), this, &main_window::edit_settings);
  tools->addAction(show_memory);

  status_model_ = new QLabel(this);
  statusBar()->addPermanentWidget(status_model_);

  connect(input_, &message_input::submitted, this, &main_window::send_message);
  connect(send_, &QPushButton::clicked, this, [this] {
    const QString text = input_->toPlainText();
    if (text.trimmed().isEmpty() || busy_) return;
    input_->clear();
    send_message(text);
  });
  connect(stop_, &QPushButton::clicked, this, &main_window::stop);
}

void main_window::connect_engine() {
  chat_engine* e = engine_.get();
  connect(e, &chat_engine::error_occurred, this, &main_window::show_error);
  connect(e, &chat_engine::model_loaded, this, [this](const model_summary& m) {
    model_ = m;
    settings_.model_path = m.path;
    memory_->set_model(m);
    status_model_->setText(tr("%1 (%2, %3 template) · store %4")
                               .arg(m.name.isEmpty() ? m.path : m.name, m.architecture, m.template_name,
                                    store_path_));
  });
  connect(e, &chat_engine::conversations_listed, this, [this](const QList<stored_conversation>& list) {
    list_->set_conversations(list, current_);
    if (open_newest_ && current_.isEmpty() && !list.isEmpty() && !busy_) {
      engine_->open_conversation(list.front().id);
    }
    open_newest_ = false;
  });
  connect(e, &chat_engine::conversation_opened, this, [this](const QString& id, const QList<chat_message>& m) {
    // A turn sent before this arrived was queued after the open, so it belongs to this
    // conversation: keep showing it at the end.
    QList<chat_message> shown = m;
    const QList<chat_message>& now = chat_->messages();
    if (busy_ && now.size() >= 2) shown << now[now.size() - 2] << now.back();
    current_ = id;
    chat_->set_messages(shown);
    list_->set_current(id);
  });
  connect(e, &chat_engine::prefill_progress, this, [this](qint64 done, qint64 total) {
    if (total < 256) return;  // short prompts take no noticeable time
    progress_->setRange(0, static_cast<int>(total));
    progress_->setValue(static_cast<int>(done));
    progress_->setVisible(done < total);
  });
  connect(e, &chat_engine::reply_started, this, [this] { progress_->hide(); });
  connect(e, &chat_engine::piece_generated, chat_, &chat_view::append_to_last);
  connect(chat_, &chat_view::earlier_wanted, e, &chat_engine::load_messages, Qt::DirectConnection);
  connect(e, &chat_engine::earlier_messages, this,
          [this](const QString& id, qsizetype first, const QList<chat_message>& m) {
            if (id == current_) chat_->show_earlier(first, m);
          });
  connect(e, &chat_engine::reply_finished, this, &main_window::on_reply_finished);
  connect(e, &chat_engine::turn_saved, this, [this](const QString& id) {
    current_ = id;
    statusBar()->showMessage(tr("Saved"), 2000);
  });
  connect(e, &chat_engine::figures_updated, memory_, &memory_panel::set_figures);
  connect(e, &chat_engine::memory_map_updated, memory_, &memory_panel::set_map);
  connect(memory_, &memory_panel::map_selection_changed, e, &chat_engine::set_memory_map_selection,
          Qt::DirectConnection);  // set_memory_map_selection queues by itself

  connect(list_, &conversation_list::conversation_selected, this, [this](const QString& id) {
    if (id == current_ && !busy_) return;
    set_busy(false);
    engine_->open_conversation(id);
  });
  connect(list_, &conversation_list::new_requested, this, [this] {
    open_newest_ = false;
    set_busy(false);
    engine_->new_conversation();
  });
  connect(list_, &conversation_list::rename_requested, e, &chat_engine::rename_conversation,
          Qt::DirectConnection);
  connect(list_, &conversation_list::delete_requested, e, &chat_engine::delete_conversation,
          Qt::DirectConnection);
}

void main_window::set_busy(bool busy) {
  busy_ = busy;
  send_->setEnabled(!busy);
  stop_->setEnabled(busy);
  input_->set_can_send(!busy);
  if (!busy) progress_->hide();
}

void main_window::show_error(const QString& message) {
  error_->setText(message);
  error_bar_->show();
  statusBar()->showMessage(message, 8000);
}

QString main_window::error_text() const { return error_bar_->isHidden() ? QString() : error_->text(); }

void main_window::send_message(const QString& text) {
  if (busy_ || text.trimmed().isEmpty()) return;
  error_bar_->hide();
  open_newest_ = false;
  pending_text_ = text;
  chat_->add_message({QStringLiteral("user"), text});
  chat_->add_message({QStringLiteral("assistant"), QString()});
  set_busy(true);
  engine_->send(text);
}

void main_window::stop() {
  if (!busy_) return;
  engine_->stop();
  statusBar()->showMessage(tr("Stopping…"));
}

void main_window::on_reply_finished(const turn_result& r) {
  if (!busy_) return;  // a turn abandoned by switching conversations
  if (!r.added) {
    // Nothing reached the history: take the turn back and return the text to the box.
    chat_->remove_last();
    chat_->remove_last();
    if (input_->toPlainText().isEmpty()) input_->setPlainText(pending_text_);
  }
  statusBar()->showMessage(r.cancelled ? tr("Cancelled") : r.stopped ? tr("Stopped: the partial reply is kept")
                                       : r.failed ? tr("Failed") : tr("%1 tokens").arg(r.n_tokens), 4000);
  set_busy(false);
  emit turn_done();
}

void main_window::apply_settings(const chat_settings& s) {
  settings_ = s;
  engine_->configure(s);
  emit settings_changed(s);
}

void main_window::edit_settings() {
  settings_dialog d(settings_, model_.model_template, this);
  if (d.exec() == QDialog::Accepted) apply_settings(d.settings());
}

void main_window::open_store(const QString& path) {
  set_busy(false);
  store_path_ = path;
  current_.clear();
  open_newest_ = true;
  engine_->open_store(path);
}

void main_window::choose_store() {
  const QString f = QFileDialog::getSaveFileName(this, tr("Conversation store"), store_path_,
                                                 tr("sa stores (*.db);;All files (*)"), nullptr,
                                                 QFileDialog::DontConfirmOverwrite);
  if (!f.isEmpty()) open_store(f);
}

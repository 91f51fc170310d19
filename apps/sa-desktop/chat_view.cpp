#include "chat_view.h"

#include <QScrollBar>
#include <QTextBlock>
#include <QTextCursor>

#include <algorithm>

namespace {

QTextCharFormat label_format(const QString& role) {
  QTextCharFormat f;
  f.setFontWeight(QFont::Bold);
  f.setForeground(role == QLatin1String("user") ? QColor(0x1f, 0x5f, 0xa8) : QColor(0x2e, 0x7d, 0x32));
  return f;
}

QTextCharFormat note_format() {
  QTextCharFormat f;
  f.setFontItalic(true);
  f.setForeground(QColor(0x75, 0x75, 0x75));
  return f;
}

}  // namespace

chat_view::chat_view(QWidget* parent) : QTextEdit(parent) {
  setReadOnly(true);
  setUndoRedoEnabled(false);
  setAcceptRichText(false);
  document()->setDocumentMargin(12);
  connect(verticalScrollBar(), &QScrollBar::valueChanged, this, &chat_view::on_scrolled);
}

void chat_view::set_max_shown(qsizetype n) { max_shown_ = std::max<qsizetype>(1, n); }

void chat_view::set_messages(const QList<chat_message>& messages) {
  const qsizetype keep = std::min(messages.size(), max_shown_);
  earlier_ = messages.size() - keep;
  messages_ = messages.mid(earlier_);
  asked_ = -1;
  render_all();
  verticalScrollBar()->setValue(verticalScrollBar()->maximum());
}

// Renders the note on earlier messages and every shown message; returns the document position
// where shown message `mark` starts (0 when there is none).
int chat_view::render_all(qsizetype mark) {
  rendering_ = true;  // clear() scrolls to the top: not a user asking for earlier messages
  clear();
  if (earlier_ > 0) {
    QTextCursor c(document());
    c.insertText(tr("%n earlier message(s): scroll up to show them", nullptr, static_cast<int>(earlier_)),
                 note_format());
  }
  int at = 0;
  for (qsizetype i = 0; i < messages_.size(); ++i) {
    const int start = render(messages_[i]);
    if (i == mark) at = start;
  }
  rendering_ = false;
  return at;
}

int chat_view::render(const chat_message& m) {
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  QTextBlockFormat label;
  label.setTopMargin(document()->isEmpty() ? 0 : 14);
  if (!document()->isEmpty()) c.insertBlock(label);
  else c.setBlockFormat(label);
  const int start = c.position();
  c.insertText(m.role == QLatin1String("user") ? tr("You") : tr("Assistant"), label_format(m.role));
  QTextBlockFormat body;
  body.setLeftMargin(8);
  c.insertBlock(body, QTextCharFormat());
  c.insertText(m.text, QTextCharFormat());
  return start;
}

// While the view follows the end, the oldest messages leave it once a quarter more than
// max_shown are shown (one re-render per batch, not one per message).
bool chat_view::following() const {
  const QScrollBar* bar = verticalScrollBar();
  return bar->value() >= bar->maximum() - 4;
}

void chat_view::trim_if_following() {
  if (!following() || messages_.size() <= max_shown_ + std::max<qsizetype>(1, max_shown_ / 4)) return;
  const qsizetype drop = messages_.size() - max_shown_;
  messages_.erase(messages_.begin(), messages_.begin() + drop);
  earlier_ += drop;
  asked_ = -1;
  render_all();
  verticalScrollBar()->setValue(verticalScrollBar()->maximum());
}

void chat_view::add_message(const chat_message& message) {
  trim_if_following();
  messages_.append(message);
  render(message);
  verticalScrollBar()->setValue(verticalScrollBar()->maximum());
}

void chat_view::append_to_last(const QString& piece) {
  if (messages_.isEmpty()) return;
  messages_.back().text += piece;
  const bool at_bottom = following();
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  c.insertText(piece, QTextCharFormat());
  if (at_bottom) verticalScrollBar()->setValue(verticalScrollBar()->maximum());
  emit last_message_changed(messages_.back().text);
}

void chat_view::remove_last() {
  if (messages_.isEmpty()) return;
  messages_.removeLast();
  render_all();
}

void chat_view::show_earlier(qsizetype first, const QList<chat_message>& earlier) {
  if (earlier.isEmpty() || first < 0 || first + earlier.size() != earlier_) return;
  messages_ = earlier + messages_;
  earlier_ = first;
  asked_ = -1;
  // Keep the message that was at the top where it was.
  const int anchor = render_all(earlier.size());
  QTextCursor c(document());
  c.setPosition(anchor);
  verticalScrollBar()->setValue(verticalScrollBar()->value() + cursorRect(c).top());
}

void chat_view::on_scrolled(int value) {
  if (rendering_ || value != verticalScrollBar()->minimum() || earlier_ == 0 || asked_ == earlier_)
    return;
  asked_ = earlier_;
  const qsizetype count = std::min(earlier_, earlier_batch);
  emit earlier_wanted(earlier_ - count, count);
}

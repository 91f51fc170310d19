#include "chat_view.h"

#include <QScrollBar>
#include <QTextBlock>
#include <QTextCursor>

namespace {

QTextCharFormat label_format(const QString& role) {
  QTextCharFormat f;
  f.setFontWeight(QFont::Bold);
  f.setForeground(role == QLatin1String("user") ? QColor(0x1f, 0x5f, 0xa8) : QColor(0x2e, 0x7d, 0x32));
  return f;
}

}  // namespace

chat_view::chat_view(QWidget* parent) : QTextEdit(parent) {
  setReadOnly(true);
  setUndoRedoEnabled(false);
  setAcceptRichText(false);
  document()->setDocumentMargin(12);
}

void chat_view::set_messages(const QList<chat_message>& messages) {
  messages_ = messages;
  render_all();
}

void chat_view::render_all() {
  clear();
  for (const chat_message& m : messages_) render(m);
  verticalScrollBar()->setValue(verticalScrollBar()->maximum());
}

void chat_view::render(const chat_message& m) {
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  QTextBlockFormat label;
  label.setTopMargin(document()->isEmpty() ? 0 : 14);
  if (!document()->isEmpty()) c.insertBlock(label);
  else c.setBlockFormat(label);
  c.insertText(m.role == QLatin1String("user") ? tr("You") : tr("Assistant"), label_format(m.role));
  QTextBlockFormat body;
  body.setLeftMargin(8);
  c.insertBlock(body, QTextCharFormat());
  c.insertText(m.text, QTextCharFormat());
}

void chat_view::add_message(const chat_message& message) {
  messages_.append(message);
  render(message);
  verticalScrollBar()->setValue(verticalScrollBar()->maximum());
}

void chat_view::append_to_last(const QString& piece) {
  if (messages_.isEmpty()) return;
  messages_.back().text += piece;
  const QScrollBar* bar = verticalScrollBar();
  const bool at_bottom = bar->value() >= bar->maximum() - 4;
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

#include "message_input.h"

#include <QKeyEvent>

message_input::message_input(QWidget* parent) : QPlainTextEdit(parent) {
  setPlaceholderText(tr("Message (Enter to send, Shift+Enter for a new line)"));
  setTabChangesFocus(true);
  setMaximumHeight(fontMetrics().lineSpacing() * 5 + 16);
}

void message_input::keyPressEvent(QKeyEvent* event) {
  const bool enter = event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter;
  if (enter && !(event->modifiers() & Qt::ShiftModifier)) {
    const QString text = toPlainText();
    if (!text.trimmed().isEmpty() && can_send_) {
      clear();
      emit submitted(text);
    }
    return;
  }
  if (enter) {  // Shift+Enter: a line break, not a paragraph separator
    insertPlainText(QStringLiteral("\n"));
    return;
  }
  QPlainTextEdit::keyPressEvent(event);
}

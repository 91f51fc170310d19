// message_input: the text box. Enter sends, Shift+Enter starts a new line.
#pragma once

#include <QPlainTextEdit>

class message_input : public QPlainTextEdit {
  Q_OBJECT

 public:
  explicit message_input(QWidget* parent = nullptr);
  // While a reply is generated Enter keeps the text (it can be sent when the reply ends).
  void set_can_send(bool can) { can_send_ = can; }

 signals:
  void submitted(const QString& text);  // Enter on a non-blank text; the box is cleared

 protected:
  void keyPressEvent(QKeyEvent* event) override;

 private:
  bool can_send_ = true;
};

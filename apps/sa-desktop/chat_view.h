// chat_view: the conversation as read-only rich text, one labelled block per message; the last
// message grows piece by piece while a reply streams.
#pragma once

#include <QList>
#include <QTextEdit>

#include "chat_template.h"

class chat_view : public QTextEdit {
  Q_OBJECT

 public:
  explicit chat_view(QWidget* parent = nullptr);

  void set_messages(const QList<chat_message>& messages);
  void add_message(const chat_message& message);
  void append_to_last(const QString& piece);  // stream into the last message
  void remove_last();
  const QList<chat_message>& messages() const { return messages_; }

 signals:
  void last_message_changed(const QString& text);  // after each append_to_last

 private:
  void render_all();
  void render(const chat_message& m);

  QList<chat_message> messages_;
};

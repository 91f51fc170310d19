// chat_template: how user and assistant turns are written as text for the model, chosen from
// the model's tokenizer.chat_template metadata (ChatML, Llama 3 or Llama 2 / Mistral), and how
// a stored token history is read back into messages.
#pragma once

#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <string>

struct chat_message {
  QString role;  // "user" or "assistant"
  QString text;
  friend bool operator==(const chat_message& a, const chat_message& b) {
    return a.role == b.role && a.text == b.text;
  }
};
Q_DECLARE_METATYPE(chat_message)

struct chat_template {
  QString name;  // "chatml", "llama3", "llama2"
  std::string user_open, user_close, assistant_open, assistant_close;

  // The template a model's tokenizer.chat_template (Jinja text, maybe empty) describes; ChatML
  // when it names none of the known formats.
  static chat_template from_metadata(const std::string& jinja);
  // A template by name ("chatml", "llama3", "llama2"); ChatML for unknown names.
  static chat_template named(const QString& name);
  static QStringList names();

  // The text appended for one user turn: the user's message, then the assistant's opening.
  std::string user_turn(const std::string& text) const;
  // The text that closes an assistant turn.
  const std::string& turn_end() const { return assistant_close; }
  // The messages of a history rendered as text (control tokens as their text).
  QList<chat_message> parse(const std::string& history) const;
};

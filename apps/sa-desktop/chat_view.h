// chat_view: the conversation as read-only rich text, one labelled block per message; the last
// message grows piece by piece while a reply streams. It shows the newest messages only (at
// most max_shown, trimmed in batches while the view follows the end), so an endless
// conversation does not grow the window's memory; scrolling to the top asks for the earlier
// ones (earlier_wanted), which the conversation's history gives back (show_earlier).
#pragma once

#include <QList>
#include <QTextEdit>

#include "chat_template.h"

class chat_view : public QTextEdit {
  Q_OBJECT

 public:
  static constexpr qsizetype default_max_shown = 200;
  static constexpr qsizetype earlier_batch = 100;  // messages asked for per scroll to the top

  explicit chat_view(QWidget* parent = nullptr);

  // Most messages kept after a trim (>= 1); a trim happens once a quarter more have arrived.
  void set_max_shown(qsizetype n);
  qsizetype max_shown() const { return max_shown_; }

  void set_messages(const QList<chat_message>& messages);  // the newest of them are shown
  void add_message(const chat_message& message);
  void append_to_last(const QString& piece);  // stream into the last message
  void remove_last();
  // Messages [first, first + earlier.size()) of the conversation, which must end where the
  // shown ones begin (first + size == earlier_count()); anything else is stale and ignored.
  void show_earlier(qsizetype first, const QList<chat_message>& earlier);

  const QList<chat_message>& messages() const { return messages_; }  // the shown ones
  qsizetype earlier_count() const { return earlier_; }  // messages before the first shown

 signals:
  void last_message_changed(const QString& text);  // after each append_to_last
  // The view reached its top with earlier messages not shown: [first, first + count) are wanted.
  void earlier_wanted(qsizetype first, qsizetype count);

 private:
  int render_all(qsizetype mark = -1);
  int render(const chat_message& m);  // returns the document position where it starts
  bool following() const;  // scrolled to the end (the view keeps up with new text)
  void trim_if_following();
  void on_scrolled(int value);

  QList<chat_message> messages_;
  qsizetype earlier_ = 0;
  qsizetype max_shown_ = default_max_shown;
  qsizetype asked_ = -1;  // earlier_ when earlier messages were last asked for
  bool rendering_ = false;  // render_all in progress
};

// The settings dialog hands back what it was given (and lists the SDK's backends); the chat
// templates write turns and read a rendered history back into messages.
#include <QComboBox>
#include <algorithm>
#include <QTest>

#include "chat_template.h"
#include "settings_dialog.h"
#include "test_support.h"

class settings_test : public QObject {
  Q_OBJECT

 private slots:
  void dialog_round_trips_the_settings();
  void templates_write_and_read_turns();
};

void settings_test::dialog_round_trips_the_settings() {
  chat_settings s = test_settings();
  s.memory = SA_MEMORY_STREAMING;
  s.cache_tokens = 1024;
  s.n_sinks = 32;
  s.temperature = 0.7f;
  s.top_p = 0.9f;
  s.seed = 42;
  s.max_reply_tokens = 99;
  s.template_override = QStringLiteral("llama3");
  settings_dialog d(s, QStringLiteral("chatml"));
  const chat_settings back = d.settings();
  QCOMPARE(back.model_path, s.model_path);
  QCOMPARE(back.backend, s.backend);
  QCOMPARE(back.memory, s.memory);
  QCOMPARE(back.cache_tokens, s.cache_tokens);
  QCOMPARE(back.n_sinks, s.n_sinks);
  QCOMPARE(back.temperature, s.temperature);
  QCOMPARE(back.top_p, s.top_p);
  QCOMPARE(back.seed, s.seed);
  QCOMPARE(back.max_reply_tokens, s.max_reply_tokens);
  QCOMPARE(back.template_override, s.template_override);
  // Every device sa_backend_info lists is offered, after "Auto".
  const QList<QComboBox*> boxes = d.findChildren<QComboBox*>();
  QVERIFY(std::any_of(boxes.begin(), boxes.end(),
                      [](const QComboBox* b) { return b->count() == 1 + sa_backend_count(); }));
}

void settings_test::templates_write_and_read_turns() {
  const chat_template chatml = chat_template::from_metadata(
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] ... }}");
  QCOMPARE(chatml.name, QStringLiteral("chatml"));
  QCOMPARE(chat_template::from_metadata("... <|start_header_id|> ...").name, QStringLiteral("llama3"));
  QCOMPARE(chat_template::from_metadata("[INST] ...").name, QStringLiteral("llama2"));
  QCOMPARE(chat_template::from_metadata("").name, QStringLiteral("chatml"));
  QCOMPARE(chatml.user_turn("hi"), std::string("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"));

  for (const QString& name : chat_template::names()) {
    const chat_template t = chat_template::named(name);
    const std::string history = "<s>" + t.user_turn("one\ntwo") + "first reply" + t.turn_end() +
                                t.user_turn("three") + "cut sho";  // a reply in progress
    const QList<chat_message> m = t.parse(history);
    QCOMPARE(m.size(), 4);
    QCOMPARE(m[0].role, QStringLiteral("user"));
    QCOMPARE(m[0].text, QStringLiteral("one\ntwo"));
    QCOMPARE(m[1].role, QStringLiteral("assistant"));
    QCOMPARE(m[1].text, QStringLiteral("first reply"));
    QCOMPARE(m[2].text, QStringLiteral("three"));
    QCOMPARE(m[3].text, QStringLiteral("cut sho"));
  }
}

QTEST_MAIN(settings_test)
#include "settings_test.moc"

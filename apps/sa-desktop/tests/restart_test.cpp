// Quit and start again: a second window on the same store lists the conversation, shows it, and
// its next (greedy) reply equals the reply of a session that never stopped.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <memory>

#include "chat_view.h"
#include "conversation_list.h"
#include "main_window.h"
#include "test_support.h"

class restart_test : public QObject {
  Q_OBJECT

 private slots:
  void conversation_survives_a_restart();
  void new_delete_and_rename();

 private:
  QTemporaryDir dir_;
};

namespace {

const QString first = QStringLiteral("My name is Emma and I keep bees.");
const QString second = QStringLiteral("What do I keep?");

}  // namespace

void restart_test::conversation_survives_a_restart() {
  const QString store = dir_.filePath(QStringLiteral("restart.db"));
  QString reply1;
  {
    main_window w(store, test_settings());
    settle(w);
    type_and_send(w, first);
    QVERIFY(wait_turn(w));
    reply1 = last_reply(w);
    settle(w);  // saved
  }  // quit

  main_window again(store, test_settings());
  settle(again);
  settle(again);  // the newest conversation opens by itself
  QCOMPARE(again.conversations()->ids().size(), 1);
  const QList<chat_message> shown = again.chat()->messages();
  QCOMPARE(shown.size(), 2);
  QCOMPARE(shown[0].role, QStringLiteral("user"));
  QCOMPARE(shown[0].text, first);
  QCOMPARE(shown[1].role, QStringLiteral("assistant"));
  QCOMPARE(shown[1].text, reply1);
  type_and_send(again, second);
  QVERIFY(wait_turn(again));
  const QString resumed = last_reply(again);

  // The same two turns in one uninterrupted session.
  main_window once(dir_.filePath(QStringLiteral("once.db")), test_settings());
  settle(once);
  type_and_send(once, first);
  QVERIFY(wait_turn(once));
  QCOMPARE(last_reply(once), reply1);
  type_and_send(once, second);
  QVERIFY(wait_turn(once));
  qInfo("second reply after restart: %s", qPrintable(resumed));
  QCOMPARE(resumed, last_reply(once));
  QVERIFY(!resumed.isEmpty());
}

void restart_test::new_delete_and_rename() {
  const QString store = dir_.filePath(QStringLiteral("list.db"));
  main_window w(store, test_settings());
  settle(w);
  type_and_send(w, QStringLiteral("First conversation."));
  QVERIFY(wait_turn(w));
  settle(w);
  const QString a = w.current_conversation();
  QVERIFY(!a.isEmpty());
  emit w.conversations()->new_requested();
  settle(w);
  QVERIFY(w.chat()->messages().isEmpty());
  QTest::qWait(1100);  // the store orders by the time of the last save, in seconds
  type_and_send(w, QStringLiteral("Second conversation."));
  QVERIFY(wait_turn(w));
  settle(w);
  const QString b = w.current_conversation();
  QVERIFY(b != a);
  QCOMPARE(w.conversations()->ids(), (QStringList{b, a}));  // newest first
  QVERIFY(w.conversations()->list()->item(0)->text().startsWith(QStringLiteral("Second conversation.")));

  w.engine()->rename_conversation(a, QStringLiteral("Renamed"));
  settle(w);
  QVERIFY(w.conversations()->list()->item(1)->text().startsWith(QStringLiteral("Renamed")));

  // Opening the first one shows it; deleting it leaves only the second.
  emit w.conversations()->conversation_selected(a);
  settle(w);
  QCOMPARE(w.current_conversation(), a);
  QCOMPARE(w.chat()->messages().front().text, QStringLiteral("First conversation."));
  w.engine()->delete_conversation(a);
  settle(w);
  QCOMPARE(w.conversations()->ids(), QStringList{b});
  QVERIFY(w.chat()->messages().isEmpty());
  QVERIFY2(w.error_text().isEmpty(), qPrintable(w.error_text()));

  main_window again(store, test_settings());
  settle(again);
  QCOMPARE(again.conversations()->ids(), QStringList{b});
}

QTEST_MAIN(restart_test)
#include "restart_test.moc"

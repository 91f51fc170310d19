// Failures show the SDK's message in the window and leave it usable: a model path that does not
// exist, a file that is not a GGUF model, a store that is not an sa store, a corrupt session.
#include <QFile>
#include <QPushButton>
#include <QTemporaryDir>
#include <QTest>

#include "chat_view.h"
#include "conversation_list.h"
#include "main_window.h"
#include "message_input.h"
#include "test_support.h"

class errors_test : public QObject {
  Q_OBJECT

 private slots:
  void missing_model();
  void not_a_model();
  void corrupt_store();
  void corrupt_session();

 private:
  QTemporaryDir dir_;
  QString path(const char* name) const { return dir_.filePath(QString::fromLatin1(name)); }
};

void errors_test::missing_model() {
  chat_settings s = test_settings();
  s.model_path = path("no-such-model.gguf");
  main_window w(path("a.db"), s);
  w.show();
  settle(w);
  qInfo("shown: %s", qPrintable(w.error_text()));
  QVERIFY(w.error_text().startsWith(QStringLiteral("Cannot load the model")));
  QVERIFY(w.error_text().contains(QStringLiteral("no-such-model.gguf")));

  // Sending without a model says so, and the window stays usable.
  type_and_send(w, QStringLiteral("Hello?"));
  QVERIFY(wait_turn(w));
  QVERIFY(w.error_text().contains(QStringLiteral("no model is loaded")));
  QVERIFY(!w.busy());
  QCOMPARE(w.input()->toPlainText(), QStringLiteral("Hello?"));  // the text comes back
  QVERIFY(w.chat()->messages().isEmpty());

  // Choosing the right model in the settings makes it work.
  w.apply_settings(test_settings());
  settle(w);
  w.input()->clear();
  type_and_send(w, QStringLiteral("Hello again."));
  QVERIFY(wait_turn(w));
  QVERIFY(!last_reply(w).isEmpty());
  QVERIFY2(w.error_text().isEmpty(), qPrintable(w.error_text()));
}

void errors_test::not_a_model() {
  QFile f(path("garbage.gguf"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("GGUF but not really a model, just some bytes");
  f.close();
  chat_settings s = test_settings();
  s.model_path = f.fileName();
  main_window w(path("b.db"), s);
  settle(w);
  qInfo("shown: %s", qPrintable(w.error_text()));
  QVERIFY(w.error_text().startsWith(QStringLiteral("Cannot load the model")));
  QVERIFY(w.error_text().size() > QStringLiteral("Cannot load the model ").size() + f.fileName().size() + 2);

  // A bad model chosen later keeps the good one loaded.
  w.apply_settings(test_settings());
  settle(w);
  w.apply_settings(s);
  settle(w);
  QVERIFY(w.error_text().startsWith(QStringLiteral("Cannot load the model")));
  type_and_send(w, QStringLiteral("Still there?"));
  QVERIFY(wait_turn(w));
  QVERIFY(!last_reply(w).isEmpty());
}

void errors_test::corrupt_store() {
  QFile f(path("corrupt.db"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(QByteArray(8192, 'x'));
  f.close();
  main_window w(f.fileName(), test_settings());
  w.show();
  settle(w);
  qInfo("shown: %s", qPrintable(w.error_text()));
  QVERIFY(w.error_text().startsWith(QStringLiteral("Cannot read the conversation store")));
  QVERIFY(w.conversations()->ids().isEmpty());

  // Chatting still works; the save fails and says so.
  type_and_send(w, QStringLiteral("Is anyone there?"));
  QVERIFY(wait_turn(w));
  QVERIFY(!last_reply(w).isEmpty());
  settle(w);
  qInfo("shown: %s", qPrintable(w.error_text()));
  QVERIFY(w.error_text().startsWith(QStringLiteral("Cannot save the conversation")));

  // Another store works.
  w.open_store(path("fine.db"));
  settle(w);
  type_and_send(w, QStringLiteral("Now?"));
  QVERIFY(wait_turn(w));
  settle(w);
  QCOMPARE(w.conversations()->ids().size(), 1);
}

void errors_test::corrupt_session() {
  const QString store = path("damaged.db");
  {
    main_window w(store, test_settings());
    settle(w);
    type_and_send(w, QStringLiteral("Remember this."));
    QVERIFY(wait_turn(w));
    settle(w);
  }
  // Overwrite the middle of the file: the state's checksums no longer match.
  QFile f(store);
  QVERIFY(f.open(QIODevice::ReadWrite));
  const qint64 size = f.size();
  QVERIFY(size > 65536);
  for (qint64 at = 16384; at < size - 4096; at += 4096) {
    f.seek(at + 100);
    f.write(QByteArray(64, '\x5a'));
  }
  f.close();

  main_window w(store, test_settings());
  w.show();
  settle(w);
  settle(w);
  qInfo("shown: %s", qPrintable(w.error_text()));
  QVERIFY(!w.error_text().isEmpty());
  // A new conversation in another store still works.
  w.open_store(path("fresh.db"));
  settle(w);
  type_and_send(w, QStringLiteral("Fresh start."));
  QVERIFY(wait_turn(w));
  QVERIFY(!last_reply(w).isEmpty());
}

QTEST_MAIN(errors_test)
#include "errors_test.moc"

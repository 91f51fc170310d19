#include "test_support.h"

#include <QCoreApplication>
#include <QFile>
#include <QSignalSpy>
#include <QTest>
#include <unistd.h>

#include "chat_view.h"
#include "main_window.h"
#include "message_input.h"

chat_settings test_settings() {
  chat_settings s;
  s.model_path = default_model_path();
  s.backend = SA_BACKEND_CPU;
  s.n_threads = 2;
  s.memory = SA_MEMORY_CASCADE;
  s.temperature = 0.0f;
  s.max_reply_tokens = 48;
  return s;
}

void settle(main_window& w) {
  for (int i = 0; i < 3; ++i) {
    w.engine()->inspect([](const sa_model*, const sa_session*) {});
    QCoreApplication::sendPostedEvents();
    QCoreApplication::processEvents();
  }
}

void type_and_send(main_window& w, const QString& text) {
  w.input()->setFocus();
  QTest::keyClicks(w.input(), text);
  QTest::keyClick(w.input(), Qt::Key_Return);
}

bool wait_turn(main_window& w, int timeout_ms) {
  if (!w.busy()) return true;
  QSignalSpy done(&w, &main_window::turn_done);
  return done.wait(timeout_ms);
}

QString last_reply(const main_window& w) {
  const QList<chat_message>& m = w.chat()->messages();
  return m.isEmpty() ? QString() : m.back().text;
}

quint64 rss_bytes() {
  QFile f(QStringLiteral("/proc/self/statm"));
  if (!f.open(QIODevice::ReadOnly)) return 0;
  const QList<QByteArray> fields = f.readAll().split(' ');
  if (fields.size() < 2) return 0;
  return fields[1].toULongLong() * static_cast<quint64>(sysconf(_SC_PAGESIZE));
}

// Two figures to quote, printed by this test:
//  - responsiveness: the longest gap between iterations of the UI event loop while replies
//    stream (a 5 ms QTimer probe; the target is < 50 ms);
//  - memory: the process's RSS over a scripted long conversation with the cascade memory,
//    which must stay flat (SA_DESKTOP_TURNS turns, default 250; the README quotes 5,000).
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <algorithm>

#include "chat_view.h"
#include "conversation_list.h"
#include "main_window.h"
#include "memory_panel.h"
#include "test_support.h"

class figures_test : public QObject {
  Q_OBJECT

 private slots:
  void ui_stays_responsive_while_generating();
  void memory_stays_flat_over_a_long_conversation();

 private:
  QTemporaryDir dir_;
};

// Longest time between two ticks of a 5 ms timer while `busy` holds.
class loop_probe : public QObject {
 public:
  loop_probe() {
    connect(&timer_, &QTimer::timeout, this, [this] {
      const qint64 ns = clock_.nsecsElapsed();
      if (last_ >= 0) worst_ns_ = std::max(worst_ns_, ns - last_);
      last_ = ns;
    });
    timer_.setTimerType(Qt::PreciseTimer);
    clock_.start();
    timer_.start(5);
  }
  double worst_ms() const { return static_cast<double>(worst_ns_) / 1e6; }

 private:
  QTimer timer_;
  QElapsedTimer clock_;
  qint64 last_ = -1, worst_ns_ = 0;
};

void figures_test::ui_stays_responsive_while_generating() {
  chat_settings s = test_settings();
  s.max_reply_tokens = 400;
  main_window w(dir_.filePath(QStringLiteral("gap.db")), s);
  w.show();
  settle(w);
  type_and_send(w, QStringLiteral("Warm up."));
  QVERIFY(wait_turn(w));
  settle(w);

  int pieces = 0;
  connect(w.engine(), &chat_engine::piece_generated, this, [&] { ++pieces; });
  QElapsedTimer clock;
  clock.start();
  loop_probe probe;
  for (int i = 0; i < 3; ++i) {  // three new conversations with a long (greedy) reply each
    emit w.conversations()->new_requested();
    type_and_send(w, QStringLiteral("What is the passkey? The passkey is 12345. Repeat the passkey 100 times."));
    QVERIFY(wait_turn(w, 120000));
  }
  const double seconds = static_cast<double>(clock.elapsed()) / 1000.0;
  qInfo("FIGURE ui-gap: longest UI event-loop gap while generating = %.1f ms (%d pieces streamed "
        "in %.1f s, memory map shown, %s)",
        probe.worst_ms(), pieces, seconds, qPrintable(w.memory()->value(QStringLiteral("backend"))));
  QVERIFY(pieces >= 600);
  QVERIFY2(probe.worst_ms() < 50.0, qPrintable(QStringLiteral("%1 ms").arg(probe.worst_ms())));
}

void figures_test::memory_stays_flat_over_a_long_conversation() {
  const int turns = qEnvironmentVariableIsSet("SA_DESKTOP_TURNS")
                        ? qEnvironmentVariableIntValue("SA_DESKTOP_TURNS") : 250;
  chat_settings s = test_settings();
  s.max_reply_tokens = 24;  // cascade of 512 tokens (64 sinks, 4 sub-caches): the default
  main_window w(dir_.filePath(QStringLiteral("long.db")), s);
  w.show();
  settle(w);

  const QStringList lines = {QStringLiteral("Tell me about the harbour."), QStringLiteral("What happened next?"),
                             QStringLiteral("Who was on the ship?"), QStringLiteral("Describe the weather.")};
  QElapsedTimer clock;
  clock.start();
  quint64 rss_warm = 0, rss_last = 0;  // at turn 100 (warmed up), at the end
  for (int i = 1; i <= turns; ++i) {
    w.send_message(lines[i % lines.size()] + QStringLiteral(" (turn %1)").arg(i));
    QVERIFY(wait_turn(w, 60000));
    QVERIFY2(w.error_text().isEmpty(), qPrintable(w.error_text()));
    if (i % 50 == 0 || i == turns) {
      settle(w);  // the turn's save and panel updates
      const quint64 rss = rss_bytes();
      if (i == 100) rss_warm = rss;
      rss_last = rss;
      qInfo("FIGURE rss: turn %4d  tokens seen %7s  held %4s  KV %s  RSS %.1f MiB  (%.1f s)", i,
            qPrintable(w.memory()->value(QStringLiteral("tokens_seen"))),
            qPrintable(w.memory()->value(QStringLiteral("tokens_held"))),
            qPrintable(w.memory()->value(QStringLiteral("kv_held"))), static_cast<double>(rss) / 1048576.0,
            static_cast<double>(clock.elapsed()) / 1000.0);
    }
  }
  settle(w);
  const sa_stats& st = w.memory()->figures().stats;
  if (turns >= 100) {
    QVERIFY(st.n_tokens > 4 * st.n_kv_tokens);  // far past the cache, which stays full
    QCOMPARE(st.n_kv_tokens, quint64{512});
    const double growth = (static_cast<double>(rss_last) - static_cast<double>(rss_warm)) / 1048576.0;
    qInfo("FIGURE rss: %d turns, %llu tokens seen, 512 held; RSS %.1f MiB at turn 100, %.1f MiB at "
          "turn %d: %+.1f MiB",
          turns, static_cast<unsigned long long>(st.n_tokens), static_cast<double>(rss_warm) / 1048576.0,
          static_cast<double>(rss_last) / 1048576.0, turns, growth);
    QVERIFY2(growth < 16.0, qPrintable(QStringLiteral("RSS grew %1 MiB").arg(growth)));
  }
}

QTEST_MAIN(figures_test)
#include "figures_test.moc"

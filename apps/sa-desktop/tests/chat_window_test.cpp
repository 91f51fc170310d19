// The chat window on the shipped model: a typed message streams its reply, Stop cancels at
// once and keeps the partial reply, the memory panel shows sa_session_stats, the memory map
// highlights exactly the positions sa_session_memory_positions reports, long prompts report
// progress, a long conversation shows its newest messages and loads the earlier ones on scrolling
// to the top.
#include <QComboBox>
#include <QElapsedTimer>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "chat_view.h"
#include "main_window.h"
#include "message_input.h"
#include "memory_map_view.h"
#include "memory_panel.h"
#include "test_support.h"

namespace {

// A prompt the shipped model answers at length (greedy): it repeats the passkey on and on.
QString long_reply_prompt() {
  return QStringLiteral("What is the passkey? The passkey is 12345. Repeat the passkey 100 times.");
}

}  // namespace

class chat_window_test : public QObject {
  Q_OBJECT

 private slots:
  void reply_streams_token_by_token();
  void stop_cancels_at_once_and_keeps_the_reply();
  void panel_shows_the_session_stats();
  void memory_map_highlights_the_held_positions();
  void long_prompt_reports_progress();
  void the_view_keeps_the_newest_messages_and_loads_earlier_ones();

 private:
  QTemporaryDir dir_;
  QString store(const char* name) const { return dir_.filePath(QString::fromLatin1(name)); }
};

void chat_window_test::reply_streams_token_by_token() {
  main_window w(store("stream.db"), test_settings());
  w.show();
  settle(w);
  QVERIFY2(w.error_text().isEmpty(), qPrintable(w.error_text()));

  QStringList seen;  // the reply as the view showed it after each update
  connect(w.chat(), &chat_view::last_message_changed, this, [&](const QString& t) { seen << t; });
  type_and_send(w, QStringLiteral("Tell me about the sea and the ships."));
  QVERIFY(w.busy());
  QVERIFY(!w.send_button()->isEnabled());
  QVERIFY(w.stop_button()->isEnabled());
  QVERIFY(wait_turn(w));

  const QString reply = last_reply(w);
  qInfo("reply (%lld updates): %s", static_cast<long long>(seen.size()), qPrintable(reply));
  QVERIFY(seen.size() >= 4);  // at least 3 intermediate states, then the whole reply
  for (qsizetype i = 1; i < seen.size(); ++i) QVERIFY(seen[i].startsWith(seen[i - 1]));
  QCOMPARE(seen.back(), reply);
  QVERIFY(seen.front().size() < reply.size());
  QCOMPARE(w.chat()->messages().size(), 2);
  QCOMPARE(w.chat()->messages().front().text, QStringLiteral("Tell me about the sea and the ships."));
  QVERIFY(!w.busy());
  QVERIFY(w.send_button()->isEnabled());
  QVERIFY(!w.stop_button()->isEnabled());

  // Shift+Enter is a new line in the box, not a send.
  QTest::keyClicks(w.input(), QStringLiteral("line one"));
  QTest::keyClick(w.input(), Qt::Key_Return, Qt::ShiftModifier);
  QTest::keyClicks(w.input(), QStringLiteral("line two"));
  QVERIFY(!w.busy());
  QCOMPARE(w.input()->toPlainText(), QStringLiteral("line one\nline two"));
}

void chat_window_test::stop_cancels_at_once_and_keeps_the_reply() {
  chat_settings s = test_settings();
  s.max_reply_tokens = 1000000;  // the reply goes on until stopped
  main_window w(store("stop.db"), s);
  w.show();
  settle(w);

  int pieces = 0;
  connect(w.engine(), &chat_engine::piece_generated, this, [&] { ++pieces; });
  QSignalSpy saved(w.engine(), &chat_engine::turn_saved);
  type_and_send(w, long_reply_prompt());
  QVERIFY(QTest::qWaitFor([&] { return pieces >= 20 || !w.busy(); }, 60000));
  QVERIFY2(w.busy(), "the reply ended by itself before Stop");

  QElapsedTimer clock;
  clock.start();
  QTest::mouseClick(w.stop_button(), Qt::LeftButton);
  QVERIFY(QTest::qWaitFor([&] { return !w.busy(); }, 5000));
  const qint64 ms = clock.elapsed();
  qInfo("Stop to idle: %lld ms after %d pieces", static_cast<long long>(ms), pieces);
  QVERIFY2(ms < 200, qPrintable(QStringLiteral("Stop took %1 ms").arg(ms)));

  const QString partial = last_reply(w);
  QVERIFY(!partial.isEmpty());
  QVERIFY(saved.wait(10000) || saved.count() > 0);
  // The partial reply is in the saved history, and the next turn goes on after it.
  QString history;
  w.engine()->inspect([&](const sa_model* m, const sa_session* session) {
    const int32_t* t = nullptr;
    size_t n = 0;
    sa_session_tokens(session, &t, &n);
    char buf[256];
    size_t len = 0;
    for (size_t i = 0; i < n; ++i)
      if (sa_token_to_piece(m, t[i], SA_PIECE_RENDER_SPECIAL, buf, sizeof buf, &len) == SA_OK)
        history += QString::fromUtf8(buf, static_cast<qsizetype>(len));
  });
  QVERIFY2(history.endsWith(partial + QStringLiteral("<|im_end|>\n")), qPrintable(history.right(200)));
}

void chat_window_test::panel_shows_the_session_stats() {
  main_window w(store("stats.db"), test_settings());
  w.show();
  settle(w);
  type_and_send(w, QStringLiteral("Hello there!"));
  QVERIFY(wait_turn(w));
  settle(w);

  sa_stats s{};
  s.struct_size = sizeof s;
  sa_status st = SA_ERR_MISUSE;
  w.engine()->inspect([&](const sa_model*, const sa_session* session) { st = sa_session_stats(session, &s); });
  QCOMPARE(st, SA_OK);
  const memory_panel* p = w.memory();
  const sa_stats& shown = p->figures().stats;
  QCOMPARE(shown.n_tokens, s.n_tokens);
  QCOMPARE(shown.n_kv_tokens, s.n_kv_tokens);
  QCOMPARE(shown.kv_bytes_held, s.kv_bytes_held);
  QCOMPARE(shown.backend, s.backend);
  QCOMPARE(p->value(QStringLiteral("tokens_seen")), QString::number(s.n_tokens));
  QCOMPARE(p->value(QStringLiteral("tokens_held")), QString::number(s.n_kv_tokens));
  QVERIFY(p->value(QStringLiteral("kv_held")).contains(QStringLiteral("(%1 bytes)").arg(s.kv_bytes_held)));
  QVERIFY(p->value(QStringLiteral("backend")).startsWith(QStringLiteral("cpu:0")));
  QCOMPARE(p->value(QStringLiteral("memory")), QStringLiteral("cascade"));
  // Dense would hold 2 (K, V) x layers x KV heads x head_dim x element bytes per token seen.
  sa_model_desc d{};
  d.struct_size = sizeof d;
  w.engine()->inspect([&](const sa_model* m, const sa_session*) { sa_model_info(m, &d); });
  const quint64 element = s.kv_type == SA_KV_F32 ? 4 : 2;
  QCOMPARE(p->figures().dense_bytes, s.n_tokens * 2 * static_cast<quint64>(d.n_layers) *
                                         static_cast<quint64>(d.n_kv_heads) *
                                         static_cast<quint64>(d.head_dim) * element);
  QVERIFY(p->figures().tokens_per_s > 0);
}

void chat_window_test::memory_map_highlights_the_held_positions() {
#if !SA_DESKTOP_MEMORY_MAP
  QSKIP("this sa.h has no sa_session_memory_positions");
#else
  chat_settings s = test_settings();
  s.cache_tokens = 64;  // a small cascade, so a few turns evict
  s.n_sinks = 8;
  s.n_cascades = 4;
  s.max_reply_tokens = 64;
  main_window w(store("map.db"), s);
  w.show();
  settle(w);
  for (const char* m : {"The harbour was quiet at dawn and the boats were still tied up.", "Who sailed first?",
                        "And then what happened to the crew?", "Tell me about the sea."}) {
    type_and_send(w, QString::fromLatin1(m));
    QVERIFY(wait_turn(w));
  }
  settle(w);

  QComboBox* layer = w.memory()->layer_choice();
  QComboBox* head = w.memory()->head_choice();
  QCOMPARE(layer->count(), 1 + 6);  // all, then the model's 6 layers
  QCOMPARE(head->count(), 1 + 2);   // all, then its 2 KV heads
  struct choice {
    int32_t layer, head;
  };
  for (const choice c : {choice{-1, -1}, choice{0, 0}, choice{3, 1}, choice{5, -1}, choice{-1, 1}}) {
    layer->setCurrentIndex(layer->findData(c.layer));
    head->setCurrentIndex(head->findData(c.head));
    settle(w);
    std::vector<uint64_t> held;
    size_t n_tokens = 0;
    sa_status count_st = SA_OK, st = SA_ERR_MISUSE;
    w.engine()->inspect([&](const sa_model*, const sa_session* session) {
      size_t n = 0;
      count_st = sa_session_memory_positions(session, c.layer, c.head, nullptr, 0, &n);
      held.resize(n);
      st = sa_session_memory_positions(session, c.layer, c.head, held.data(), held.size(), &n);
      const int32_t* t = nullptr;
      sa_session_tokens(session, &t, &n_tokens);
    });
    QCOMPARE(count_st, SA_ERR_BUFFER_TOO_SMALL);  // asking for the count with no room
    QCOMPARE(st, SA_OK);
    const memory_map& map = w.memory()->map_view()->map();
    QCOMPARE(map.layer, c.layer);
    QCOMPARE(map.kv_head, c.head);
    QVERIFY(map.available);
    QCOMPARE(map.n_tokens, static_cast<quint64>(n_tokens));
    QVERIFY2(held.size() < n_tokens, "the cascade should have evicted tokens");
    const std::set<quint64> shown = w.memory()->map_view()->highlighted_positions();
    const std::set<quint64> expected(held.begin(), held.end());
    qInfo("layer %d, KV head %d: %zu of %zu tokens held; %zu highlighted", c.layer, c.head, held.size(),
          n_tokens, shown.size());
    QVERIFY(shown == expected);
  }
#endif
}

void chat_window_test::long_prompt_reports_progress() {
  main_window w(store("progress.db"), test_settings());
  w.show();
  settle(w);
  QSignalSpy progress(w.engine(), &chat_engine::prefill_progress);
  bool bar_seen = false;
  connect(w.engine(), &chat_engine::prefill_progress, this, [&] { bar_seen |= w.progress()->isVisible(); });
  QString text;
  for (int i = 0; i < 300; ++i) text += QStringLiteral("The ship sailed north past the old lighthouse. ");
  w.send_message(text);
  QVERIFY(wait_turn(w, 120000));
  QVERIFY(progress.count() >= 2);
  const QList<QVariant> last = progress.back();
  QCOMPARE(last.at(0).toLongLong(), last.at(1).toLongLong());  // done == total at the end
  QVERIFY(last.at(1).toLongLong() > 1000);
  QVERIFY(bar_seen);
  QVERIFY(!w.progress()->isVisible());
}

void chat_window_test::the_view_keeps_the_newest_messages_and_loads_earlier_ones() {
  {  // The view alone: the newest of a long list, stale answers ignored.
    chat_view v;
    v.set_max_shown(4);
    QList<chat_message> all;
    for (int i = 0; i < 10; ++i)
      all.append({i % 2 == 0 ? QStringLiteral("user") : QStringLiteral("assistant"), QString::number(i)});
    v.set_messages(all);
    QCOMPARE(v.earlier_count(), qsizetype{6});
    QCOMPARE(v.messages(), all.mid(6));
    v.show_earlier(3, all.mid(3, 2));  // does not end where the shown ones begin
    QCOMPARE(v.earlier_count(), qsizetype{6});
    v.show_earlier(4, all.mid(4, 2));
    QCOMPARE(v.messages(), all.mid(4));
  }

  chat_settings s = test_settings();
  s.max_reply_tokens = 12;
  main_window w(store("long.db"), s);
  w.show();
  settle(w);
  w.chat()->set_max_shown(4);  // a trim once more than 5 are shown
  w.chat()->setFixedHeight(120);
  QList<chat_message> sent;  // every message of the conversation, as shown when it ended
  for (int i = 1; i <= 4; ++i) {
    type_and_send(w, QStringLiteral("Tell me about the harbour (turn %1).").arg(i));
    QVERIFY(wait_turn(w));
    const QList<chat_message>& m = w.chat()->messages();
    sent << m[m.size() - 2] << m.back();
  }
  settle(w);
  // 8 messages: the fourth turn's question trimmed the view to the newest 4, then 2 more came.
  QCOMPARE(w.chat()->earlier_count(), qsizetype{2});
  QCOMPARE(w.chat()->messages(), sent.mid(2));

  QSignalSpy wanted(w.chat(), &chat_view::earlier_wanted);
  QScrollBar* bar = w.chat()->verticalScrollBar();
  QVERIFY(bar->maximum() > 0);
  bar->setValue(bar->minimum());
  QCOMPARE(wanted.size(), 1);
  QCOMPARE(wanted[0][0].value<qsizetype>(), qsizetype{0});
  QCOMPARE(wanted[0][1].value<qsizetype>(), qsizetype{2});
  QTRY_COMPARE(w.chat()->earlier_count(), qsizetype{0});
  QCOMPARE(w.chat()->messages(), sent);  // read back from the session's history
}

QTEST_MAIN(chat_window_test)
#include "chat_window_test.moc"

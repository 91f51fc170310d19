// sa-desktop: a desktop chat on the sa SDK's C ABI, whose conversations go on forever at
// constant memory (the cascade KV cache) and survive restarts (the SDK's session store).
//
//   sa-desktop                         conversations in the user's data folder
//   sa-desktop --store chats.db        another store
//   sa-desktop --send "Hello" --send "And then?"   type these turns at start-up (scripted runs;
//                                      "sa-desktop: script done" is printed after the last reply)
//   sa-desktop --memory cascade --cache 256        memory of new conversations (also in Settings)
//
// Settings (model, backend, memory, sampling) are kept between runs with QSettings.
#include <cstdio>

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QSettings>
#include <QStandardPaths>
#include <QComboBox>
#include <QTimer>

#include "main_window.h"
#include "memory_panel.h"
#include "conversation_list.h"

namespace {

chat_settings load_settings() {
  QSettings q;
  chat_settings s;
  s.model_path = q.value(QStringLiteral("model"), default_model_path()).toString();
  s.backend = q.value(QStringLiteral("backend"), s.backend).toInt();
  s.device = q.value(QStringLiteral("device"), s.device).toInt();
  s.n_threads = q.value(QStringLiteral("threads"), s.n_threads).toInt();
  s.memory = q.value(QStringLiteral("memory"), s.memory).toInt();
  s.cache_tokens = q.value(QStringLiteral("cache_tokens"), s.cache_tokens).toInt();
  s.n_sinks = q.value(QStringLiteral("sinks"), s.n_sinks).toInt();
  s.n_cascades = q.value(QStringLiteral("cascades"), s.n_cascades).toInt();
  s.n_ctx = q.value(QStringLiteral("n_ctx"), s.n_ctx).toInt();
  s.sparse = q.value(QStringLiteral("sparse"), s.sparse).toInt();
  s.budget_tokens = q.value(QStringLiteral("budget_tokens"), s.budget_tokens).toInt();
  s.temperature = q.value(QStringLiteral("temperature"), s.temperature).toFloat();
  s.top_p = q.value(QStringLiteral("top_p"), s.top_p).toFloat();
  s.seed = q.value(QStringLiteral("seed"), static_cast<qulonglong>(s.seed)).toULongLong();
  s.max_reply_tokens = q.value(QStringLiteral("max_reply"), s.max_reply_tokens).toInt();
  s.template_override = q.value(QStringLiteral("template")).toString();
  return s;
}

void save_settings(const chat_settings& s) {
  QSettings q;
  q.setValue(QStringLiteral("model"), s.model_path);
  q.setValue(QStringLiteral("backend"), s.backend);
  q.setValue(QStringLiteral("device"), s.device);
  q.setValue(QStringLiteral("threads"), s.n_threads);
  q.setValue(QStringLiteral("memory"), s.memory);
  q.setValue(QStringLiteral("cache_tokens"), s.cache_tokens);
  q.setValue(QStringLiteral("sinks"), s.n_sinks);
  q.setValue(QStringLiteral("cascades"), s.n_cascades);
  q.setValue(QStringLiteral("n_ctx"), s.n_ctx);
  q.setValue(QStringLiteral("sparse"), s.sparse);
  q.setValue(QStringLiteral("budget_tokens"), s.budget_tokens);
  q.setValue(QStringLiteral("temperature"), static_cast<double>(s.temperature));
  q.setValue(QStringLiteral("top_p"), static_cast<double>(s.top_p));
  q.setValue(QStringLiteral("seed"), static_cast<qulonglong>(s.seed));
  q.setValue(QStringLiteral("max_reply"), s.max_reply_tokens);
  q.setValue(QStringLiteral("template"), s.template_override);
}

QString default_store() {
  const QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
  QDir().mkpath(dir);
  return dir + QStringLiteral("/conversations.db");
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("sa"));
  QApplication::setApplicationName(QStringLiteral("sa-desktop"));

  QCommandLineParser cli;
  cli.setApplicationDescription(QStringLiteral("Chat with a GGUF model through the sa SDK."));
  cli.addHelpOption();
  const QCommandLineOption store({QStringLiteral("store")}, QStringLiteral("Session store file."),
                                 QStringLiteral("PATH"), default_store());
  const QCommandLineOption model({QStringLiteral("model")}, QStringLiteral("GGUF model file."),
                                 QStringLiteral("PATH"));
  const QCommandLineOption send({QStringLiteral("send")},
                                QStringLiteral("A message sent at start-up, in a new conversation (repeatable)."),
                                QStringLiteral("TEXT"));
  const QCommandLineOption layer({QStringLiteral("map-layer")},
                                 QStringLiteral("Memory map layer at start-up (-1 = all)."), QStringLiteral("N"),
                                 QStringLiteral("-1"));
  const QCommandLineOption memory({QStringLiteral("memory")},
                                  QStringLiteral("KV memory of new conversations: dense, streaming or cascade."),
                                  QStringLiteral("KIND"));
  const QCommandLineOption cache({QStringLiteral("cache")},
                                 QStringLiteral("Streaming/cascade cache size in tokens, sinks included."),
                                 QStringLiteral("N"));
  const QCommandLineOption sinks({QStringLiteral("sinks")}, QStringLiteral("Streaming/cascade sink tokens."),
                                 QStringLiteral("N"));
  cli.addOptions({store, model, send, layer, memory, cache, sinks});
  cli.process(app);

  chat_settings settings = load_settings();
  if (cli.isSet(model)) settings.model_path = cli.value(model);
  if (cli.isSet(memory)) {
    const QString m = cli.value(memory);
    settings.memory = m == QLatin1String("dense")       ? SA_MEMORY_DENSE
                      : m == QLatin1String("streaming") ? SA_MEMORY_STREAMING
                                                        : SA_MEMORY_CASCADE;
  }
  if (cli.isSet(cache)) settings.cache_tokens = cli.value(cache).toInt();
  if (cli.isSet(sinks)) settings.n_sinks = cli.value(sinks).toInt();
  main_window w(cli.value(store), settings);
  QObject::connect(&w, &main_window::settings_changed, &save_settings);
  w.show();

  // Scripted turns: a new conversation, then each message once the previous reply ended.
  QStringList script = cli.values(send);
  bool script_done = script.isEmpty();
  if (!script_done) {
    emit w.conversations()->new_requested();
    const auto next = [&w, &script, &script_done] {
      if (!script.isEmpty()) {
        w.send_message(script.takeFirst());
      } else if (!script_done) {
        script_done = true;
        std::printf("sa-desktop: script done\n");
        std::fflush(stdout);
      }
    };
    QObject::connect(&w, &main_window::turn_done, &w, next, Qt::QueuedConnection);
    QTimer::singleShot(0, &w, next);
  }
  const int map_layer = cli.value(layer).toInt();
  if (map_layer >= 0) {
    QComboBox* c = w.memory()->layer_choice();
    QTimer::singleShot(500, &w, [c, map_layer] { c->setCurrentIndex(c->findData(map_layer)); });
  }
  return QApplication::exec();
}

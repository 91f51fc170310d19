#include "conversation_titles.h"

#include <QSettings>

namespace {

// Session ids may hold any byte (a '/' would be a QSettings group separator): key by hex.
QString key(const QString& id) {
  return QStringLiteral("titles/") + QString::fromLatin1(id.toUtf8().toHex());
}

}  // namespace

conversation_titles::conversation_titles(const QString& store_path) : file_(file_for(store_path)) {}

QString conversation_titles::file_for(const QString& store_path) {
  return store_path + QStringLiteral(".titles.ini");
}

QString conversation_titles::title(const QString& id) const {
  return QSettings(file_, QSettings::IniFormat).value(key(id)).toString();
}

void conversation_titles::set_title(const QString& id, const QString& title) {
  QSettings s(file_, QSettings::IniFormat);
  s.setValue(key(id), title);
  s.sync();
}

void conversation_titles::remove(const QString& id) {
  QSettings s(file_, QSettings::IniFormat);
  s.remove(key(id));
  s.sync();
}

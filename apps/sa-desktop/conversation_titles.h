// conversation_titles: the names the user gives conversations. The session store has no place
// for them (a session is known by its id), so they live in a small INI file beside the store.
#pragma once

#include <QString>

class conversation_titles {
 public:
  explicit conversation_titles(const QString& store_path);

  QString title(const QString& id) const;  // "" when none was set
  void set_title(const QString& id, const QString& title);
  void remove(const QString& id);

  // The file the titles of the store at store_path are kept in.
  static QString file_for(const QString& store_path);

 private:
  QString file_;
};

// conversation_list: the conversations of the store, newest first, with New, Rename and Delete.
#pragma once

#include <QList>
#include <QListWidget>
#include <QWidget>

#include "store_listing.h"

class QPushButton;

class conversation_list : public QWidget {
  Q_OBJECT

 public:
  explicit conversation_list(QWidget* parent = nullptr);

  // Show these conversations; `current` stays selected (no signal is emitted for it).
  void set_conversations(const QList<stored_conversation>& conversations, const QString& current);
  void set_current(const QString& id);
  QStringList ids() const;  // in the order shown
  QListWidget* list() const { return list_; }

 signals:
  void conversation_selected(const QString& id);
  void new_requested();
  void rename_requested(const QString& id, const QString& title);
  void delete_requested(const QString& id);

 private:
  void rename(QListWidgetItem* item);
  void remove(QListWidgetItem* item);

  QListWidget* list_;
  QPushButton* rename_;
  QPushButton* delete_;
};

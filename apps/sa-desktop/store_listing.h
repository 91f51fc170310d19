// store_listing: the conversations of a session store, newest first (sa_store_list).
#pragma once

#include <QList>
#include <QMetaType>
#include <QString>

struct stored_conversation {
  QString id;          // the session id in the store
  QString title;       // the user's name for it (conversation_titles), or "" if none
  QString model_name;  // general.name of the model it was saved with
  int32_t memory = 0;  // SA_MEMORY_*
  quint64 n_tokens = 0;
  quint64 bytes = 0;
  qint64 updated = 0;  // Unix time of the last save
};
Q_DECLARE_METATYPE(stored_conversation)

// The sessions of the store at path, most recently saved first (none when no file exists).
// Returns false with the SDK's message in *error for a store that cannot be read.
bool list_store(const QString& path, QList<stored_conversation>* out, QString* error);

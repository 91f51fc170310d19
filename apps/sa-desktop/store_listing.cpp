#include "store_listing.h"

#include "sa/sa.h"

namespace {

int32_t add_one(const sa_stored_session* s, void* user_data) {
  auto* out = static_cast<QList<stored_conversation>*>(user_data);
  stored_conversation c;
  c.id = QString::fromUtf8(s->session_id);
  c.model_name = QString::fromUtf8(s->model_name);
  c.memory = s->memory;
  c.n_tokens = s->n_tokens;
  c.bytes = s->bytes;
  c.updated = s->updated;
  out->append(c);
  return 0;
}

}  // namespace

bool list_store(const QString& path, QList<stored_conversation>* out, QString* error) {
  out->clear();
  const QByteArray p = path.toUtf8();
  if (sa_store_list(p.constData(), add_one, out) != SA_OK) {
    out->clear();
    *error = QString::fromUtf8(sa_last_error());
    return false;
  }
  return true;
}

// memory_panel: the session's memory at a glance — KV bytes held against what a dense cache
// would need, tokens seen against tokens held, decode speed, backend — and the memory map with
// its layer / KV head choice.
#pragma once

#include <QMap>
#include <QWidget>

#include "chat_engine.h"

class QComboBox;
class QLabel;
class memory_map_view;

class memory_panel : public QWidget {
  Q_OBJECT

 public:
  explicit memory_panel(QWidget* parent = nullptr);

  void set_model(const model_summary& model);  // fills the layer and head choices
  void set_figures(const session_figures& figures);
  void set_map(const memory_map& map);

  const session_figures& figures() const { return figures_; }
  QString value(const QString& key) const;  // a row's text: "tokens_seen", "kv_held", ...
  memory_map_view* map_view() const { return map_; }
  QComboBox* layer_choice() const { return layer_; }
  QComboBox* head_choice() const { return head_; }

 signals:
  void map_selection_changed(int32_t layer, int32_t kv_head);  // -1 = union

 private:
  QLabel* add_row(const QString& key, const QString& label);

  session_figures figures_;
  QMap<QString, QLabel*> rows_;
  QComboBox* layer_;
  QComboBox* head_;
  QLabel* map_caption_;
  memory_map_view* map_;
};

// Bytes as "12.3 MiB" (binary units), the panel's format.
QString format_bytes(quint64 bytes);

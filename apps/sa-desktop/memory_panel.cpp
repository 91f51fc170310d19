#include "memory_panel.h"

#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "memory_map_view.h"

QString format_bytes(quint64 bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return QStringLiteral("%1 B").arg(bytes);
  if (bytes < 1024ull * 1024) return QStringLiteral("%1 KiB").arg(b / 1024.0, 0, 'f', 1);
  if (bytes < 1024ull * 1024 * 1024) return QStringLiteral("%1 MiB").arg(b / (1024.0 * 1024.0), 0, 'f', 2);
  return QStringLiteral("%1 GiB").arg(b / (1024.0 * 1024.0 * 1024.0), 0, 'f', 2);
}

memory_panel::memory_panel(QWidget* parent) : QWidget(parent) {
  auto* numbers = new QGroupBox(tr("Memory"), this);
  auto* form = new QFormLayout(numbers);
  form->setLabelAlignment(Qt::AlignLeft);
  const auto row = [&](const QString& key, const QString& label) {
    auto* value = new QLabel(QStringLiteral("–"), numbers);
    value->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(label, value);
    rows_.insert(key, value);
  };
  row(QStringLiteral("memory"), tr("KV memory"));
  row(QStringLiteral("backend"), tr("Backend"));
  row(QStringLiteral("tokens_seen"), tr("Tokens seen"));
  row(QStringLiteral("tokens_held"), tr("Tokens held"));
  row(QStringLiteral("kv_held"), tr("KV bytes held"));
  row(QStringLiteral("kv_dense"), tr("Dense cache would need"));
  row(QStringLiteral("tokens_per_s"), tr("Tokens/s"));

  auto* map_box = new QGroupBox(tr("Memory map"), this);
  layer_ = new QComboBox(map_box);
  head_ = new QComboBox(map_box);
  layer_->addItem(tr("All layers"), -1);
  head_->addItem(tr("All KV heads"), -1);
  map_caption_ = new QLabel(map_box);
  map_caption_->setWordWrap(true);
  map_ = new memory_map_view(map_box);
  auto* choice = new QHBoxLayout;
  choice->addWidget(layer_);
  choice->addWidget(head_);
  auto* map_layout = new QVBoxLayout(map_box);
  map_layout->addLayout(choice);
  map_layout->addWidget(map_caption_);
  map_layout->addWidget(map_, 1);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(numbers);
  layout->addWidget(map_box, 1);

  const auto changed = [this] {
    emit map_selection_changed(layer_->currentData().toInt(), head_->currentData().toInt());
  };
  connect(layer_, &QComboBox::currentIndexChanged, this, changed);
  connect(head_, &QComboBox::currentIndexChanged, this, changed);
}

void memory_panel::set_model(const model_summary& model) {
  const QSignalBlocker a(layer_), b(head_);
  const int layer = layer_->currentData().toInt(), head = head_->currentData().toInt();
  while (layer_->count() > 1) layer_->removeItem(1);
  while (head_->count() > 1) head_->removeItem(1);
  for (int32_t l = 0; l < model.n_layers; ++l) layer_->addItem(tr("Layer %1").arg(l), l);
  for (int32_t h = 0; h < model.n_kv_heads; ++h) head_->addItem(tr("KV head %1").arg(h), h);
  layer_->setCurrentIndex(std::max(0, layer_->findData(layer)));
  head_->setCurrentIndex(std::max(0, head_->findData(head)));
}

QString memory_panel::value(const QString& key) const {
  const QLabel* l = rows_.value(key);
  return l ? l->text() : QString();
}

void memory_panel::set_figures(const session_figures& f) {
  figures_ = f;
  const sa_stats& s = f.stats;
  if (f.backend.isEmpty()) {  // no session
    for (QLabel* l : rows_) l->setText(QStringLiteral("–"));
    return;
  }
  rows_[QStringLiteral("memory")]->setText(f.memory);
  rows_[QStringLiteral("backend")]->setText(f.backend);
  rows_[QStringLiteral("tokens_seen")]->setText(QString::number(s.n_tokens));
  rows_[QStringLiteral("tokens_held")]->setText(QString::number(s.n_kv_tokens));
  rows_[QStringLiteral("kv_held")]->setText(
      QStringLiteral("%1 (%2 bytes)").arg(format_bytes(s.kv_bytes_held)).arg(s.kv_bytes_held));
  const double ratio = s.kv_bytes_held > 0 ? static_cast<double>(f.dense_bytes) / static_cast<double>(s.kv_bytes_held) : 0;
  rows_[QStringLiteral("kv_dense")]->setText(
      ratio > 1.0 ? QStringLiteral("%1 (%2× more)").arg(format_bytes(f.dense_bytes)).arg(ratio, 0, 'f', 1)
                  : format_bytes(f.dense_bytes));
  rows_[QStringLiteral("tokens_per_s")]->setText(
      f.tokens_per_s > 0 ? QString::number(f.tokens_per_s, 'f', 1) : QStringLiteral("–"));
}

void memory_panel::set_map(const memory_map& map) {
  if (!map.available) {
    map_caption_->setText(map.n_tokens == 0 ? tr("No conversation yet.")
                                            : tr("This library cannot report which tokens it holds."));
  } else {
    const QString where = (map.layer < 0 ? tr("all layers") : tr("layer %1").arg(map.layer)) +
                          QStringLiteral(", ") +
                          (map.kv_head < 0 ? tr("all KV heads") : tr("KV head %1").arg(map.kv_head));
    map_caption_->setText(tr("<span style='background:%1'>&nbsp;held&nbsp;</span> %2 of %3 tokens (%4)")
                              .arg(memory_map_view::held_color().name())
                              .arg(map.n_held)
                              .arg(map.n_tokens)
                              .arg(where));
  }
  map_->set_map(map);
}

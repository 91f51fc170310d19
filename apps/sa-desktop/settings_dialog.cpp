#include "settings_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>

#include "chat_template.h"

namespace {

// Backend choices: AUTO, then every device sa_backend_info lists; data = kind * 1000 + device.
void fill_backends(QComboBox* box) {
  box->addItem(QObject::tr("Auto (best available)"), SA_BACKEND_AUTO * 1000);
  for (int32_t i = 0; i < sa_backend_count(); ++i) {
    sa_backend_desc d{};
    d.struct_size = sizeof d;
    if (sa_backend_info(i, &d) != SA_OK) continue;
    const char* kind = d.kind == SA_BACKEND_CUDA ? "CUDA" : d.kind == SA_BACKEND_VULKAN ? "Vulkan" : "CPU";
    box->addItem(QStringLiteral("%1 %2: %3").arg(QLatin1String(kind)).arg(d.device).arg(QString::fromUtf8(d.name)),
                 d.kind * 1000 + d.device);
  }
}

QSpinBox* spin(int lo, int hi, int value, QWidget* parent) {
  auto* s = new QSpinBox(parent);
  s->setRange(lo, hi);
  s->setValue(value);
  return s;
}

}  // namespace

settings_dialog::settings_dialog(const chat_settings& s, const QString& model_template, QWidget* parent)
    : QDialog(parent), base_(s) {
  setWindowTitle(tr("Settings"));
  model_ = new QLineEdit(s.model_path, this);
  auto* browse = new QPushButton(tr("Browse…"), this);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("GGUF model"), model_->text(),
                                                   tr("GGUF models (*.gguf);;All files (*)"));
    if (!f.isEmpty()) model_->setText(f);
  });
  auto* model_row = new QHBoxLayout;
  model_row->addWidget(model_, 1);
  model_row->addWidget(browse);

  backend_ = new QComboBox(this);
  fill_backends(backend_);
  backend_->setCurrentIndex(std::max(0, backend_->findData(s.backend * 1000 + s.device)));
  threads_ = spin(0, 1024, s.n_threads, this);
  threads_->setSpecialValueText(tr("one per core"));

  memory_ = new QComboBox(this);
  memory_->addItem(tr("Cascade (constant memory, keeps important tokens)"), SA_MEMORY_CASCADE);
  memory_->addItem(tr("Streaming (sinks + sliding window)"), SA_MEMORY_STREAMING);
  memory_->addItem(tr("Dense (every token, up to the context)"), SA_MEMORY_DENSE);
  memory_->setCurrentIndex(std::max(0, memory_->findData(s.memory)));
  cache_ = spin(16, 1 << 20, s.cache_tokens, this);
  sinks_ = spin(0, 1 << 16, s.n_sinks, this);
  cascades_ = spin(1, 64, s.n_cascades, this);
  n_ctx_ = spin(0, 1 << 24, s.n_ctx, this);
  n_ctx_->setSpecialValueText(tr("the model's trained context"));

  sparse_ = new QComboBox(this);
  sparse_->addItem(tr("None (dense attention)"), SA_SPARSE_NONE);
  sparse_->addItem(tr("Quest"), SA_SPARSE_QUEST);
  sparse_->addItem(tr("vAttention"), SA_SPARSE_VATTENTION);
  sparse_->addItem(tr("Oracle top-k"), SA_SPARSE_ORACLE);
  sparse_->setCurrentIndex(std::max(0, sparse_->findData(s.sparse)));
  budget_ = spin(0, 1 << 20, s.budget_tokens, this);
  budget_->setSpecialValueText(tr("1/8 of the tokens held"));

  temperature_ = new QDoubleSpinBox(this);
  temperature_->setRange(0, 5);
  temperature_->setSingleStep(0.1);
  temperature_->setValue(static_cast<double>(s.temperature));
  temperature_->setSpecialValueText(tr("0 (greedy)"));
  top_p_ = new QDoubleSpinBox(this);
  top_p_->setRange(0.01, 1);
  top_p_->setSingleStep(0.05);
  top_p_->setValue(static_cast<double>(s.top_p));
  seed_ = spin(0, 2147483647, static_cast<int>(s.seed), this);
  max_reply_ = spin(1, 1 << 20, s.max_reply_tokens, this);

  template_ = new QComboBox(this);
  template_->addItem(tr("From the model (%1)").arg(model_template), QString());
  for (const QString& n : chat_template::names()) template_->addItem(n, n);
  template_->setCurrentIndex(std::max(0, template_->findData(s.template_override)));

  auto* form = new QFormLayout;
  form->addRow(tr("Model file"), model_row);
  form->addRow(tr("Backend"), backend_);
  form->addRow(tr("CPU threads"), threads_);
  form->addRow(tr("KV memory"), memory_);
  form->addRow(tr("Cache tokens (sinks included)"), cache_);
  form->addRow(tr("Sink tokens"), sinks_);
  form->addRow(tr("Cascade sub-caches"), cascades_);
  form->addRow(tr("Dense context"), n_ctx_);
  form->addRow(tr("Sparse attention (dense memory)"), sparse_);
  form->addRow(tr("Sparse budget (tokens)"), budget_);
  form->addRow(tr("Temperature"), temperature_);
  form->addRow(tr("Top-p"), top_p_);
  form->addRow(tr("Seed"), seed_);
  form->addRow(tr("Longest reply (tokens)"), max_reply_);
  form->addRow(tr("Chat template"), template_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(buttons);

  connect(memory_, &QComboBox::currentIndexChanged, this, &settings_dialog::update_enabled);
  connect(sparse_, &QComboBox::currentIndexChanged, this, &settings_dialog::update_enabled);
  update_enabled();
}

void settings_dialog::update_enabled() {
  const int memory = memory_->currentData().toInt();
  const bool bounded = memory != SA_MEMORY_DENSE;
  cache_->setEnabled(bounded);
  sinks_->setEnabled(bounded);
  cascades_->setEnabled(memory == SA_MEMORY_CASCADE);
  n_ctx_->setEnabled(!bounded);
  sparse_->setEnabled(!bounded);
  budget_->setEnabled(!bounded && sparse_->currentData().toInt() != SA_SPARSE_NONE);
}

chat_settings settings_dialog::settings() const {
  chat_settings s = base_;
  s.model_path = model_->text();
  const int backend = backend_->currentData().toInt();
  s.backend = backend / 1000;
  s.device = backend % 1000;
  s.n_threads = threads_->value();
  s.memory = memory_->currentData().toInt();
  s.cache_tokens = cache_->value();
  s.n_sinks = sinks_->value();
  s.n_cascades = cascades_->value();
  s.n_ctx = n_ctx_->value();
  s.sparse = s.memory == SA_MEMORY_DENSE ? sparse_->currentData().toInt() : SA_SPARSE_NONE;
  s.budget_tokens = budget_->value();
  s.temperature = static_cast<float>(temperature_->value());
  s.top_p = static_cast<float>(top_p_->value());
  s.seed = static_cast<uint64_t>(seed_->value());
  s.max_reply_tokens = max_reply_->value();
  s.template_override = template_->currentData().toString();
  return s;
}

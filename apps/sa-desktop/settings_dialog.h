// settings_dialog: the model file, backend, KV memory, sparsity, sampling and chat template.
// Memory, sparsity and sampling apply to new conversations (a resumed one keeps its own);
// the backend applies to every conversation opened after the change.
#pragma once

#include <QDialog>

#include "chat_settings.h"

class QComboBox;
class QDoubleSpinBox;
class QLineEdit;
class QSpinBox;

class settings_dialog : public QDialog {
  Q_OBJECT

 public:
  // model_template: the template the model's metadata names (shown as the default choice).
  settings_dialog(const chat_settings& current, const QString& model_template, QWidget* parent = nullptr);

  chat_settings settings() const;

 private:
  void update_enabled();

  chat_settings base_;
  QLineEdit* model_;
  QComboBox* backend_;
  QSpinBox* threads_;
  QComboBox* memory_;
  QSpinBox* cache_;
  QSpinBox* sinks_;
  QSpinBox* cascades_;
  QSpinBox* n_ctx_;
  QComboBox* sparse_;
  QSpinBox* budget_;
  QDoubleSpinBox* temperature_;
  QDoubleSpinBox* top_p_;
  QSpinBox* seed_;
  QSpinBox* max_reply_;
  QComboBox* template_;
};

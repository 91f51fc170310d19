#include "conversation_list.h"

#include <QDateTime>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QVBoxLayout>

#include "chat_settings.h"

namespace {

constexpr int id_role = Qt::UserRole;
constexpr int title_role = Qt::UserRole + 1;

}  // namespace

conversation_list::conversation_list(QWidget* parent) : QWidget(parent) {
  auto* add = new QPushButton(tr("New chat"), this);
  rename_ = new QPushButton(tr("Rename"), this);
  delete_ = new QPushButton(tr("Delete"), this);
  list_ = new QListWidget(this);
  list_->setContextMenuPolicy(Qt::CustomContextMenu);
  list_->setWordWrap(true);
  list_->setSpacing(2);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(rename_);
  buttons->addWidget(delete_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(add);
  layout->addWidget(list_, 1);
  layout->addLayout(buttons);

  connect(add, &QPushButton::clicked, this, &conversation_list::new_requested);
  connect(rename_, &QPushButton::clicked, this, [this] { rename(list_->currentItem()); });
  connect(delete_, &QPushButton::clicked, this, [this] { remove(list_->currentItem()); });
  connect(list_, &QListWidget::itemClicked, this, [this](QListWidgetItem* item) {
    emit conversation_selected(item->data(id_role).toString());
  });
  connect(list_, &QListWidget::currentItemChanged, this, [this](QListWidgetItem* item) {
    rename_->setEnabled(item != nullptr);
    delete_->setEnabled(item != nullptr);
  });
  connect(list_, &QListWidget::customContextMenuRequested, this, [this](const QPoint& at) {
    QListWidgetItem* item = list_->itemAt(at);
    if (item == nullptr) return;
    QMenu menu;
    menu.addAction(tr("Rename…"), this, [this, item] { rename(item); });
    menu.addAction(tr("Delete…"), this, [this, item] { remove(item); });
    menu.exec(list_->viewport()->mapToGlobal(at));
  });
  rename_->setEnabled(false);
  delete_->setEnabled(false);
}

void conversation_list::set_conversations(const QList<stored_conversation>& conversations,
                                          const QString& current) {
  const QSignalBlocker block(list_);
  list_->clear();
  for (const stored_conversation& c : conversations) {
    const QString title = c.title.isEmpty() ? c.id : c.title;
    const QString when = QDateTime::fromSecsSinceEpoch(c.updated).toString(QStringLiteral("yyyy-MM-dd HH:mm"));
    auto* item = new QListWidgetItem(
        QStringLiteral("%1\n%2 tokens · %3 · %4").arg(title).arg(c.n_tokens).arg(memory_name(c.memory), when),
        list_);
    item->setData(id_role, c.id);
    item->setData(title_role, title);
    item->setToolTip(QStringLiteral("%1 (model %2)").arg(c.id, c.model_name));
  }
  set_current(current);
}

void conversation_list::set_current(const QString& id) {
  const QSignalBlocker block(list_);
  list_->setCurrentItem(nullptr);
  for (int i = 0; i < list_->count(); ++i)
    if (list_->item(i)->data(id_role).toString() == id) list_->setCurrentRow(i);
  rename_->setEnabled(list_->currentItem() != nullptr);
  delete_->setEnabled(list_->currentItem() != nullptr);
}

QStringList conversation_list::ids() const {
  QStringList out;
  for (int i = 0; i < list_->count(); ++i) out << list_->item(i)->data(id_role).toString();
  return out;
}

void conversation_list::rename(QListWidgetItem* item) {
  if (item == nullptr) return;
  bool ok = false;
  const QString title = QInputDialog::getText(this, tr("Rename conversation"), tr("Name:"),
                                              QLineEdit::Normal, item->data(title_role).toString(), &ok);
  if (ok && !title.trimmed().isEmpty()) emit rename_requested(item->data(id_role).toString(), title.trimmed());
}

void conversation_list::remove(QListWidgetItem* item) {
  if (item == nullptr) return;
  if (QMessageBox::question(this, tr("Delete conversation"),
                            tr("Delete “%1” from the store?").arg(item->data(title_role).toString())) ==
      QMessageBox::Yes)
    emit delete_requested(item->data(id_role).toString());
}

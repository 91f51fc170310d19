// memory_map_view: a memory_map drawn as text — tokens the KV memory holds highlighted, evicted
// ones grey, long evicted runs folded into one marker.
#pragma once

#include <QTextEdit>
#include <set>
#include <vector>

#include "memory_map.h"

class memory_map_view : public QTextEdit {
  Q_OBJECT

 public:
  explicit memory_map_view(QWidget* parent = nullptr);

  void set_map(const memory_map& map);
  const memory_map& map() const { return map_; }

  // The positions drawn highlighted, read back from the document's formats (for tests).
  std::set<quint64> highlighted_positions() const;

  static QColor held_color();

 private:
  struct token_span {
    int begin, end;  // characters of the document
    quint64 position;
  };
  memory_map map_;
  std::vector<token_span> spans_;
};

#include "memory_map_view.h"

#include <QScrollBar>
#include <QTextBlock>
#include <QTextCursor>

namespace {

// Control characters (the newlines of the text included) drawn visibly, so every token has
// at least one character to carry its highlight.
QString visible(const QString& text) {
  if (text.isEmpty()) return QStringLiteral("\u00b7");
  QString out = text;
  out.replace(QLatin1Char('\n'), QStringLiteral("\u21b5\n"));
  out.replace(QLatin1Char('\t'), QStringLiteral("\u2192"));
  return out;
}

}  // namespace

memory_map_view::memory_map_view(QWidget* parent) : QTextEdit(parent) {
  setReadOnly(true);
  setUndoRedoEnabled(false);
  QFont mono(QStringLiteral("monospace"));
  mono.setStyleHint(QFont::Monospace);
  mono.setPointSizeF(font().pointSizeF() * 0.9);
  setFont(mono);
  document()->setDefaultFont(mono);
}

QColor memory_map_view::held_color() { return QColor(0xff, 0xd8, 0x6b); }

void memory_map_view::set_map(const memory_map& map) {
  map_ = map;
  spans_.clear();
  const QScrollBar* bar = verticalScrollBar();
  const bool at_bottom = bar->value() >= bar->maximum() - 4;
  clear();
  QTextCharFormat held, evicted, gap;
  held.setBackground(held_color());
  evicted.setForeground(QColor(0x80, 0x80, 0x80));
  gap.setForeground(QColor(0x9e, 0x9e, 0x9e));
  gap.setFontItalic(true);
  QTextCursor c(document());
  c.beginEditBlock();
  spans_.reserve(static_cast<size_t>(map.items.size()));
  for (const memory_map_item& it : map.items) {
    if (it.gap) {
      const QString text = it.held > 0
                               ? tr(" [%1 tokens not shown, %2 held] ").arg(it.count).arg(it.held)
                               : tr(" [%1 tokens evicted] ").arg(it.count);
      c.insertText(text, gap);
      continue;
    }
    const int begin = c.position();
    c.insertText(visible(it.text), it.held ? held : evicted);
    spans_.push_back({begin, c.position(), it.position});
  }
  c.endEditBlock();
  if (at_bottom) verticalScrollBar()->setValue(verticalScrollBar()->maximum());
}

std::set<quint64> memory_map_view::highlighted_positions() const {
  std::set<quint64> out;
  QTextCursor c(document());
  for (const token_span& s : spans_) {
    c.setPosition(s.begin + 1);  // the format of the character after the cursor's position - 1
    if (c.charFormat().background().color() == held_color()) out.insert(s.position);
  }
  return out;
}

#include "chat_template.h"

#include <algorithm>

chat_template chat_template::named(const QString& name) {
  if (name == QLatin1String("llama3"))
    return {name, "<|start_header_id|>user<|end_header_id|>\n\n", "<|eot_id|>",
            "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"};
  if (name == QLatin1String("llama2")) return {name, "[INST] ", " [/INST]", "", "</s>"};
  return {QStringLiteral("chatml"), "<|im_start|>user\n", "<|im_end|>\n",
          "<|im_start|>assistant\n", "<|im_end|>\n"};
}

QStringList chat_template::names() {
  return {QStringLiteral("chatml"), QStringLiteral("llama3"), QStringLiteral("llama2")};
}

chat_template chat_template::from_metadata(const std::string& jinja) {
  if (jinja.find("<|im_start|>") != std::string::npos) return named(QStringLiteral("chatml"));
  if (jinja.find("<|start_header_id|>") != std::string::npos) return named(QStringLiteral("llama3"));
  if (jinja.find("[INST]") != std::string::npos) return named(QStringLiteral("llama2"));
  return named(QStringLiteral("chatml"));
}

std::string chat_template::user_turn(const std::string& text) const {
  return user_open + text + user_close + assistant_open;
}

QList<chat_message> chat_template::parse(const std::string& h) const {
  QList<chat_message> out;
  const auto text = [&](size_t b, size_t e) { return QString::fromUtf8(h.data() + b, qsizetype(e - b)); };
  size_t pos = 0;
  while (pos < h.size()) {
    const size_t u = h.find(user_open, pos);
    if (u == std::string::npos) break;
    const size_t begin = u + user_open.size();
    const size_t end = h.find(user_close, begin);
    if (end == std::string::npos) {
      out.append({QStringLiteral("user"), text(begin, h.size())});
      break;
    }
    out.append({QStringLiteral("user"), text(begin, end)});
    pos = end + user_close.size();
    if (!assistant_open.empty()) {
      if (h.compare(pos, assistant_open.size(), assistant_open) != 0) continue;
      pos += assistant_open.size();
    }
    const size_t close = h.find(assistant_close, pos);
    const size_t stop = std::min({close, h.find(user_open, pos), h.size()});
    out.append({QStringLiteral("assistant"), text(pos, stop)});
    pos = stop == close ? close + assistant_close.size() : stop;
  }
  return out;
}

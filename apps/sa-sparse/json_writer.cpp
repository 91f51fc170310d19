#include "json_writer.h"

#include <cmath>
#include <cstdio>
#include <fstream>

namespace sparse_app {

namespace {
std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);  // round-trips: equal doubles print equal
  return buf;
}
}  // namespace

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x",
                        static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

json_record& json_record::num(const std::string& key, double v) {
  fields_.emplace_back(key, number(v));
  return *this;
}
json_record& json_record::integer(const std::string& key, long long v) {
  fields_.emplace_back(key, std::to_string(v));
  return *this;
}
json_record& json_record::str(const std::string& key, const std::string& v) {
  fields_.emplace_back(key, json_quote(v));
  return *this;
}
json_record& json_record::boolean(const std::string& key, bool v) {
  fields_.emplace_back(key, v ? "true" : "false");
  return *this;
}
json_record& json_record::null(const std::string& key) {
  fields_.emplace_back(key, "null");
  return *this;
}
json_record& json_record::nums(const std::string& key, const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + number(v[i]);
  fields_.emplace_back(key, s + "]");
  return *this;
}

std::string json_record::text() const {
  std::string s = "{";
  for (size_t i = 0; i < fields_.size(); ++i)
    s += (i ? ", " : "") + json_quote(fields_[i].first) + ": " + fields_[i].second;
  return s + "}";
}

bool json_log::write(const std::string& path, const json_record& header) const {
  std::ofstream out(path);
  if (!out) return false;
  std::string h = header.text();
  h.pop_back();  // reopen the header object to append "records"
  out << h << (h.size() > 1 ? ", " : "") << "\"records\": [\n";
  for (size_t i = 0; i < records_.size(); ++i)
    out << "  " << records_[i].text() << (i + 1 < records_.size() ? ",\n" : "\n");
  out << "]}\n";
  return static_cast<bool>(out);
}

}  // namespace sparse_app

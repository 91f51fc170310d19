// The --json output: a list of flat records (key -> number, string, bool, null or a list of
// numbers), written as {"tool": "sa-sparse", ..., "records": [ {...}, ... ]}.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sparse_app {

class json_record {
 public:
  json_record& num(const std::string& key, double v);  // NaN / inf -> null
  json_record& integer(const std::string& key, long long v);
  json_record& str(const std::string& key, const std::string& v);
  json_record& boolean(const std::string& key, bool v);
  json_record& null(const std::string& key);
  json_record& nums(const std::string& key, const std::vector<double>& v);
  std::string text() const;  // {"k": v, ...}

 private:
  std::vector<std::pair<std::string, std::string>> fields_;  // key, serialized value
};

std::string json_quote(const std::string& s);

class json_log {
 public:
  void add(json_record r) { records_.push_back(std::move(r)); }
  // header: serialized top-level fields besides "records". Returns false when the file cannot
  // be written.
  bool write(const std::string& path, const json_record& header) const;

 private:
  std::vector<json_record> records_;
};

}  // namespace sparse_app

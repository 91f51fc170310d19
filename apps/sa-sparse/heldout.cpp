#include "heldout.h"

#include <fstream>
#include <stdexcept>

namespace sparse_app {

std::vector<heldout_doc> load_heldout(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the held-out text " + path);
  std::vector<heldout_doc> docs;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("=== ", 0) == 0) {
      docs.push_back({line.substr(4), ""});
      continue;
    }
    if (docs.empty() || line.empty()) continue;  // header comments, blank separators
    std::string& t = docs.back().text;
    if (!t.empty()) t += ' ';
    t += line;
  }
  std::erase_if(docs, [](const heldout_doc& d) { return d.text.empty(); });
  if (docs.empty()) throw std::runtime_error("no '=== TITLE' documents in " + path);
  return docs;
}

std::vector<int32_t> heldout_sequence(const model& m, const heldout_doc& doc) {
  std::vector<int32_t> seq;
  if (m.desc().bos_token >= 0) seq.push_back(m.desc().bos_token);
  const std::vector<int32_t> t = m.tokenize(doc.text, false);
  seq.insert(seq.end(), t.begin(), t.end());
  return seq;
}

std::vector<int32_t> heldout_stream(const model& m, const std::vector<heldout_doc>& docs) {
  std::vector<int32_t> stream;
  for (const heldout_doc& d : docs) {
    const std::vector<int32_t> seq = heldout_sequence(m, d);
    stream.insert(stream.end(), seq.begin(), seq.end());
    if (m.desc().eos_token >= 0) stream.push_back(m.desc().eos_token);
  }
  return stream;
}

}  // namespace sparse_app

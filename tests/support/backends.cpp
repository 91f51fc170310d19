#include "backends.h"

namespace sa_test {

std::vector<sa::backend_kind> compiled_backends() {
  std::vector<sa::backend_kind> k = {sa::backend_kind::cpu};
  if (sa::backend_compiled(sa::backend_kind::cuda)) k.push_back(sa::backend_kind::cuda);
  return k;
}

std::string backend_label(sa::backend_kind kind) {
  return kind == sa::backend_kind::cuda ? "cuda" : "cpu";
}

std::string missing_device(sa::backend_kind kind) {
  std::string why;
  if (!sa::list_devices(kind, &why).empty()) return "";
  return why.empty() ? "none found" : why;
}

}  // namespace sa_test

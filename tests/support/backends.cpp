#include "backends.h"

namespace sa_test {

std::vector<sa::backend_kind> compiled_backends() {
  std::vector<sa::backend_kind> k = {sa::backend_kind::cpu};
  if (sa::backend_compiled(sa::backend_kind::cuda)) k.push_back(sa::backend_kind::cuda);
  if (sa::backend_compiled(sa::backend_kind::vulkan)) k.push_back(sa::backend_kind::vulkan);
  return k;
}

std::string backend_label(sa::backend_kind kind) {
  switch (kind) {
    case sa::backend_kind::cuda: return "cuda";
    case sa::backend_kind::vulkan: return "vulkan";
    default: return "cpu";
  }
}

std::string missing_device(sa::backend_kind kind) {
  std::string why;
  if (!sa::list_devices(kind, &why).empty()) return "";
  return why.empty() ? "none found" : why;
}

}  // namespace sa_test

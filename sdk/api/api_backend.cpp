// sa_backend_count, sa_backend_info, and the choice of a session's backend.
#include "api/handles.h"

namespace sa::api {

namespace {
struct listed {
  int32_t kind, device;
  sa::device_info info;
};

std::vector<listed> all_devices() {
  std::vector<listed> out;
  const std::vector<sa::device_info> cpu = sa::list_devices(sa::backend_kind::cpu);
  for (size_t i = 0; i < cpu.size(); ++i) out.push_back({SA_BACKEND_CPU, static_cast<int32_t>(i), cpu[i]});
  const std::vector<sa::device_info> cuda = sa::list_devices(sa::backend_kind::cuda);
  for (size_t i = 0; i < cuda.size(); ++i) out.push_back({SA_BACKEND_CUDA, static_cast<int32_t>(i), cuda[i]});
  const std::vector<sa::device_info> vk = sa::list_devices(sa::backend_kind::vulkan);
  for (size_t i = 0; i < vk.size(); ++i) out.push_back({SA_BACKEND_VULKAN, static_cast<int32_t>(i), vk[i]});
  return out;
}

// Device `device` of a kind, checked to exist (SA_ERR_UNSUPPORTED saying why not).
void require_device(sa::backend_kind kind, const char* label, int32_t device) {
  std::string why;
  const size_t n = sa::list_devices(kind, &why).size();
  if (n == 0) sa::fail(SA_ERR_UNSUPPORTED, "no %s device: %s", label, why.c_str());
  if (static_cast<size_t>(device) >= n)
    sa::fail(SA_ERR_UNSUPPORTED, "%s device %d does not exist (this machine has %zu)", label, device, n);
}
}  // namespace

void choose_backend(const sa_session_params& p, sa::session_config& c) {
  if (p.device < 0) sa::fail(SA_ERR_INVALID_ARG, "device %d is negative", p.device);
  c.device = p.device;
  switch (p.backend) {
    case SA_BACKEND_AUTO: {
      if (p.device != 0)
        sa::fail(SA_ERR_INVALID_ARG, "device %d with SA_BACKEND_AUTO: name the backend kind too",
                 p.device);
      // The first CUDA device, else the first Vulkan GPU (not one run by the CPU), else the CPU.
      c.backend = sa::backend_kind::cpu;
      if (!sa::list_devices(sa::backend_kind::cuda).empty()) {
        c.backend = sa::backend_kind::cuda;
        return;
      }
      const std::vector<sa::device_info> vk = sa::list_devices(sa::backend_kind::vulkan);
      for (size_t i = 0; i < vk.size(); ++i)
        if (!vk[i].software) {
          c.backend = sa::backend_kind::vulkan;
          c.device = static_cast<int32_t>(i);
          return;
        }
      return;
    }
    case SA_BACKEND_CPU:
      if (p.device != 0) sa::fail(SA_ERR_INVALID_ARG, "device %d: the CPU backend has one device", p.device);
      c.backend = sa::backend_kind::cpu;
      return;
    case SA_BACKEND_CUDA:
      require_device(sa::backend_kind::cuda, "CUDA", p.device);
      c.backend = sa::backend_kind::cuda;
      return;
    case SA_BACKEND_VULKAN:
      require_device(sa::backend_kind::vulkan, "Vulkan", p.device);
      c.backend = sa::backend_kind::vulkan;
      return;
    default: sa::fail(SA_ERR_INVALID_ARG, "backend %d is not an SA_BACKEND_* value", p.backend);
  }
}

void choose_kv_type(const sa_session_params& p, sa::session_config& c) {
  switch (p.kv_type) {
    case SA_KV_DEFAULT: c.kv_type.reset(); return;
    case SA_KV_F32: c.kv_type = sa::dtype::f32; return;
    case SA_KV_F16: c.kv_type = sa::dtype::f16; return;
    case SA_KV_BF16: c.kv_type = sa::dtype::bf16; return;
    default: sa::fail(SA_ERR_INVALID_ARG, "kv_type %d is not an SA_KV_* value", p.kv_type);
  }
}

int32_t kv_type_code(sa::dtype t) {
  switch (t) {
    case sa::dtype::f16: return SA_KV_F16;
    case sa::dtype::bf16: return SA_KV_BF16;
    default: return SA_KV_F32;
  }
}

int32_t backend_code(sa::backend_kind k) {
  switch (k) {
    case sa::backend_kind::cuda: return SA_BACKEND_CUDA;
    case sa::backend_kind::vulkan: return SA_BACKEND_VULKAN;
    default: return SA_BACKEND_CPU;
  }
}

}  // namespace sa::api

extern "C" {

int32_t sa_backend_count(void) {
  try {
    return static_cast<int32_t>(sa::api::all_devices().size());
  } catch (...) {
    return 1;  // the CPU is always there
  }
}

sa_status sa_backend_info(int32_t index, sa_backend_desc* out) {
  return sa::api::guarded(nullptr, [&] {
    const std::vector<sa::api::listed> all = sa::api::all_devices();
    if (index < 0 || static_cast<size_t>(index) >= all.size())
      sa::fail(SA_ERR_INVALID_ARG, "backend index %d is outside [0, %zu)", index, all.size());
    const sa::api::listed& d = all[static_cast<size_t>(index)];
    sa_backend_desc o{};
    o.kind = d.kind;
    o.device = d.device;
    std::snprintf(o.name, sizeof o.name, "%s", d.info.name.c_str());
    o.memory_bytes = d.info.memory_bytes;
    o.free_bytes = d.info.free_bytes;
    o.compute_major = d.info.compute_major;
    o.compute_minor = d.info.compute_minor;
    o.multiprocessors = d.info.multiprocessors;
    o.software = d.info.software ? 1 : 0;
    sa::api::write_info(out, o, "sa_backend_desc");
  });
}

}  // extern "C"

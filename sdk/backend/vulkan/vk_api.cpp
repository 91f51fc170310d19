#include "backend/vulkan/vk_api.h"

#include <dlfcn.h>

#include <cstring>

#include <mutex>

#include "core/error.h"

namespace sa::vk {

api_table vk;

bool open_loader(std::string* why) {
  static std::once_flag once;
  static void* lib = nullptr;
  static std::string error;
  std::call_once(once, [] {
    for (const char* name : {"libvulkan.so.1", "libvulkan.so", "libvulkan.1.dylib", "libMoltenVK.dylib"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
    }
    if (!lib) {
      const char* e = dlerror();
      error = std::string("no Vulkan loader (libvulkan.so.1): ") + (e ? e : "not found");
      return;
    }
    void* sym = dlsym(lib, "vkGetInstanceProcAddr");
    std::memcpy(&vk.vkGetInstanceProcAddr, &sym, sizeof sym);  // an object pointer to a function's
    if (!vk.vkGetInstanceProcAddr) {
      error = "the Vulkan loader has no vkGetInstanceProcAddr";
      return;
    }
#define SA_VK_LOAD(name) vk.name = reinterpret_cast<PFN_##name>(vk.vkGetInstanceProcAddr(nullptr, #name));
    SA_VK_GLOBAL_FUNCTIONS(SA_VK_LOAD)
#undef SA_VK_LOAD
    if (!vk.vkCreateInstance || !vk.vkEnumerateInstanceVersion) error = "the Vulkan loader is older than Vulkan 1.1";
  });
  if (!error.empty()) {
    if (why) *why = error;
    return false;
  }
  return true;
}

void load_instance(VkInstance instance) {
#define SA_VK_LOAD(name) vk.name = reinterpret_cast<PFN_##name>(vk.vkGetInstanceProcAddr(instance, #name));
  SA_VK_INSTANCE_FUNCTIONS(SA_VK_LOAD)
  SA_VK_DEBUG_FUNCTIONS(SA_VK_LOAD)
  SA_VK_OPTIONAL_FUNCTIONS(SA_VK_LOAD)
  SA_VK_DEVICE_FUNCTIONS(SA_VK_LOAD)
#undef SA_VK_LOAD
}

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    default: return "VkResult (unnamed)";
  }
}

void check(VkResult r, const char* what) {
  if (r == VK_SUCCESS) return;
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    fail(SA_ERR_NOMEM, "Vulkan: %s: out of memory (%s)", what, result_name(r));
  fail(SA_ERR_BACKEND, "Vulkan: %s failed: %s (%d)", what, result_name(r), static_cast<int>(r));
}

}  // namespace sa::vk

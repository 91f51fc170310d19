#include "backend/vulkan/vk_context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "backend/vulkan/coop_khr.h"
#include "backend/vulkan/vk_profile.h"
#include "core/error.h"

namespace sa::vk {

namespace {

constexpr VkDeviceSize k_block_bytes[3] = {64u << 20, 16u << 20, 16u << 20};  // by memory_kind
constexpr VkDeviceSize k_align = 256;

// ---- validation messages ---------------------------------------------------------------------
std::mutex g_messages_mutex;
std::vector<std::string> g_messages;

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                          VkDebugUtilsMessageTypeFlagsEXT,
                                          const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    std::lock_guard<std::mutex> lock(g_messages_mutex);
    if (g_messages.size() < 16) g_messages.emplace_back(data && data->pMessage ? data->pMessage : "(no message)");
  }
  return VK_FALSE;
}

bool validation_requested() {
  const char* e = std::getenv("SA_VULKAN_VALIDATION");
  return e && std::strcmp(e, "0") != 0;
}

// ---- the instance and its qualifying devices --------------------------------------------------
struct qualified {
  VkPhysicalDevice device;
  VkPhysicalDeviceProperties props;
  uint32_t queue_family;
  device_info info;
};

struct instance_state {
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  std::vector<qualified> devices;
  std::string why_none;  // when devices is empty
};

bool has_extension(const std::vector<VkExtensionProperties>& list, const char* name) {
  for (const VkExtensionProperties& e : list)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// The device's extension features or properties into the structures chained at `next`.
void features_of(VkPhysicalDevice d, void* next) {
  VkPhysicalDeviceFeatures2 f{};
  f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f.pNext = next;
  vk.vkGetPhysicalDeviceFeatures2(d, &f);
}
void properties_of(VkPhysicalDevice d, void* next) {
  VkPhysicalDeviceProperties2 p{};
  p.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  p.pNext = next;
  vk.vkGetPhysicalDeviceProperties2(d, &p);
}

// Why `d` does not qualify (empty when it does); fills family.
std::string disqualification(VkPhysicalDevice d, const VkPhysicalDeviceProperties& p, uint32_t& family) {
  if (p.apiVersion < VK_API_VERSION_1_2) return "it offers Vulkan below 1.2";
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  features_of(d, &f12);
  if (!f12.bufferDeviceAddress) return "it lacks buffer device addresses";
  VkPhysicalDeviceSubgroupProperties sg{};
  sg.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  properties_of(d, &sg);
  const VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT |
                                      VK_SUBGROUP_FEATURE_SHUFFLE_BIT | VK_SUBGROUP_FEATURE_BALLOT_BIT;
  if (!(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) || (sg.supportedOperations & need) != need)
    return "its compute shaders lack subgroup arithmetic, shuffles or ballots";
  if (p.limits.maxComputeSharedMemorySize < 16384) return "it has under 16 KB of shared memory";
  uint32_t n = 0;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(d, &n, nullptr);
  std::vector<VkQueueFamilyProperties> q(n);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(d, &n, q.data());
  // A compute queue, preferring one without graphics (a dedicated compute family).
  int best = -1;
  for (uint32_t i = 0; i < n; ++i) {
    if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (best < 0 || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = static_cast<int>(i);
  }
  if (best < 0) return "it has no compute queue";
  family = static_cast<uint32_t>(best);
  return "";
}

instance_state make_instance() {
  instance_state st;
  if (!open_loader(&st.why_none)) return st;
  uint32_t version = 0;
  if (vk.vkEnumerateInstanceVersion(&version) != VK_SUCCESS || version < VK_API_VERSION_1_2) {
    st.why_none = "the Vulkan loader offers a version below 1.2";
    return st;
  }
  uint32_t n_ext = 0;
  vk.vkEnumerateInstanceExtensionProperties(nullptr, &n_ext, nullptr);
  std::vector<VkExtensionProperties> exts(n_ext);
  vk.vkEnumerateInstanceExtensionProperties(nullptr, &n_ext, exts.data());
  std::vector<const char*> want_ext, want_layers;
  VkInstanceCreateFlags flags = 0;
  if (has_extension(exts, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {  // MoltenVK
    want_ext.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  bool validation = false;
  if (validation_requested()) {
    uint32_t n_layers = 0;
    vk.vkEnumerateInstanceLayerProperties(&n_layers, nullptr);
    std::vector<VkLayerProperties> layers(n_layers);
    vk.vkEnumerateInstanceLayerProperties(&n_layers, layers.data());
    for (const VkLayerProperties& l : layers)
      if (std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0) validation = true;
    if (validation && has_extension(exts, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
      want_layers.push_back("VK_LAYER_KHRONOS_validation");
      want_ext.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    } else {
      validation = false;
      std::lock_guard<std::mutex> lock(g_messages_mutex);
      g_messages.emplace_back("SA_VULKAN_VALIDATION is set but the validation layer (VK_LAYER_KHRONOS_validation) is not installed");
    }
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "sa";
  app.pEngineName = "sa";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.flags = flags;
  ci.pApplicationInfo = &app;
  ci.enabledExtensionCount = static_cast<uint32_t>(want_ext.size());
  ci.ppEnabledExtensionNames = want_ext.data();
  ci.enabledLayerCount = static_cast<uint32_t>(want_layers.size());
  ci.ppEnabledLayerNames = want_layers.data();
  const VkResult r = vk.vkCreateInstance(&ci, nullptr, &st.instance);
  if (r != VK_SUCCESS) {
    st.why_none = std::string("vkCreateInstance failed: ") + result_name(r);
    st.instance = VK_NULL_HANDLE;
    return st;
  }
  load_instance(st.instance);
  if (validation && vk.vkCreateDebugUtilsMessengerEXT) {
    VkDebugUtilsMessengerCreateInfoEXT m{};
    m.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    m.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
    m.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    m.pfnUserCallback = on_message;
    vk.vkCreateDebugUtilsMessengerEXT(st.instance, &m, nullptr, &st.messenger);
  }
  uint32_t n = 0;
  vk.vkEnumeratePhysicalDevices(st.instance, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  vk.vkEnumeratePhysicalDevices(st.instance, &n, pds.data());
  std::string reasons;
  for (VkPhysicalDevice d : pds) {
    VkPhysicalDeviceProperties p{};
    vk.vkGetPhysicalDeviceProperties(d, &p);
    uint32_t family = 0;
    const std::string why = disqualification(d, p, family);
    if (!why.empty()) {
      reasons += std::string(reasons.empty() ? "" : "; ") + p.deviceName + ": " + why;
      continue;
    }
    qualified q{d, p, family, {}};
    q.info.name = p.deviceName;
    q.info.software = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    VkPhysicalDeviceMemoryProperties mp{};
    vk.vkGetPhysicalDeviceMemoryProperties(d, &mp);
    for (uint32_t h = 0; h < mp.memoryHeapCount; ++h)
      if (mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) q.info.memory_bytes += mp.memoryHeaps[h].size;
    q.info.free_bytes = q.info.memory_bytes;
    st.devices.push_back(q);
  }
  if (st.devices.empty())
    st.why_none = pds.empty() ? "the Vulkan loader found no device" : "no Vulkan device qualifies (" + reasons + ")";
  return st;
}

instance_state& the_instance() {
  static instance_state st = make_instance();  // never destroyed: contexts may outlive main
  return st;
}

// Contexts live for the process once made (their pipelines are compiled once however many
// sessions come and go) and are never destroyed at exit, when drivers may already be gone.
std::mutex g_contexts_mutex;
std::map<int32_t, std::shared_ptr<context>>& contexts() {
  static auto* m = new std::map<int32_t, std::shared_ptr<context>>();
  return *m;
}

}  // namespace

std::vector<device_info> list_devices(std::string* why_none) {
  const instance_state& st = the_instance();
  std::vector<device_info> out;
  for (const qualified& q : st.devices) out.push_back(q.info);
  if (out.empty() && why_none) *why_none = st.why_none;
  return out;
}

std::string context::take_validation_errors() {
  std::lock_guard<std::mutex> lock(g_messages_mutex);
  std::string all;
  for (const std::string& m : g_messages) all += (all.empty() ? "" : " | ") + m;
  g_messages.clear();
  return all;
}

std::shared_ptr<context> context::get(int32_t index) {
  std::lock_guard<std::mutex> lock(g_contexts_mutex);
  std::shared_ptr<context>& c = contexts()[index];
  if (!c) c.reset(new context(index));
  return c;
}

namespace {

// Whether one cooperative-matrix extension (`ext`, listed in dev_exts; its features F, stage
// properties P and shapes S, listed by `query`, null where the loader lacks it) offers
// gemm_coop.comp's step: 16 x 16 x 16 with the component types and scope `fits` checks, in
// compute shaders.
template <class F, class P, class S, class Query, class Fits>
bool offers_coop_step(VkPhysicalDevice d, const std::vector<VkExtensionProperties>& dev_exts, const char* ext,
                      VkStructureType f_type, VkStructureType p_type, VkStructureType s_type, Query query, Fits fits) {
  if (!has_extension(dev_exts, ext) || !query) return false;
  F coop{};
  coop.sType = f_type;
  features_of(d, &coop);
  P cp{};
  cp.sType = p_type;
  properties_of(d, &cp);
  if (!coop.cooperativeMatrix || !(cp.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT)) return false;
  uint32_t n = 0;
  if (query(d, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<S> shapes(n);
  for (S& c : shapes) c.sType = s_type;
  if (query(d, &n, shapes.data()) != VK_SUCCESS) return false;
  for (const S& c : shapes)
    if (c.MSize == 16 && c.NSize == 16 && c.KSize == 16 && fits(c)) return true;
  return false;
}

}  // namespace

bool context::subgroups_of_32_offered(const std::vector<VkExtensionProperties>& dev_exts) const {
  if (!has_extension(dev_exts, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)) return false;
  VkPhysicalDeviceSubgroupSizeControlFeatures f{};
  f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  features_of(physical_, &f);
  VkPhysicalDeviceSubgroupSizeControlProperties p{};
  p.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
  properties_of(physical_, &p);
  return f.subgroupSizeControl && f.computeFullSubgroups && p.minSubgroupSize <= 32 && p.maxSubgroupSize >= 32 &&
         (p.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) && p.maxComputeWorkgroupSubgroups >= 8;
}

coop_kind context::coop_offered(const std::vector<VkExtensionProperties>& dev_exts, bool subgroups_of_32) const {
  const char* env = std::getenv("SA_VULKAN_COOP");
  const std::string only = env ? env : "";
  // gemm_coop.comp's workgroups are subgroups of 32: the device's size, or one it can be asked for.
  if (only == "0" || (subgroup_size_ != 32 && !subgroups_of_32)) return coop_kind::none;
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  features_of(physical_, &f12);
  if (!f12.shaderFloat16 || !f12.vulkanMemoryModel) return coop_kind::none;
  if (only != "nv" &&
      offers_coop_step<VkPhysicalDeviceCooperativeMatrixFeaturesKHR, VkPhysicalDeviceCooperativeMatrixPropertiesKHR,
                       VkCooperativeMatrixPropertiesKHR>(
          physical_, dev_exts, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME,
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR,
          VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR, vk.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR,
          [](const VkCooperativeMatrixPropertiesKHR& c) {
            return c.AType == VK_COMPONENT_TYPE_FLOAT16_KHR && c.BType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
                   c.CType == VK_COMPONENT_TYPE_FLOAT32_KHR && c.ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
                   !c.saturatingAccumulation && c.scope == VK_SCOPE_SUBGROUP_KHR;
          }))
    return coop_kind::khr;
  if (only != "khr" &&
      offers_coop_step<VkPhysicalDeviceCooperativeMatrixFeaturesNV, VkPhysicalDeviceCooperativeMatrixPropertiesNV,
                       VkCooperativeMatrixPropertiesNV>(
          physical_, dev_exts, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME,
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_NV,
          VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV, vk.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV,
          [](const VkCooperativeMatrixPropertiesNV& c) {
            return c.AType == VK_COMPONENT_TYPE_FLOAT16_NV && c.BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                   c.CType == VK_COMPONENT_TYPE_FLOAT32_NV && c.DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                   c.scope == VK_SCOPE_SUBGROUP_NV;
          }))
    return coop_kind::nv;
  return coop_kind::none;
}

context::context(int32_t index) : index_(index) {
  instance_state& st = the_instance();
  if (index < 0 || static_cast<size_t>(index) >= st.devices.size()) {
    if (st.devices.empty()) fail(SA_ERR_UNSUPPORTED, "no Vulkan device: %s", st.why_none.c_str());
    fail(SA_ERR_UNSUPPORTED, "Vulkan device %d does not exist (this machine has %zu)", index, st.devices.size());
  }
  const qualified& q = st.devices[static_cast<size_t>(index)];
  physical_ = q.device;
  props_ = q.props;
  queue_family_ = q.queue_family;
  vk.vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = queue_family_;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  VkPhysicalDeviceFeatures2 have{};
  have.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  vk.vkGetPhysicalDeviceFeatures2(physical_, &have);
  has_float64_ = have.features.shaderFloat64 == VK_TRUE;
  VkPhysicalDeviceSubgroupProperties sg{};
  sg.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  properties_of(physical_, &sg);
  subgroup_size_ = sg.subgroupSize;
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  f12.bufferDeviceAddress = VK_TRUE;
  VkPhysicalDeviceFeatures2 f{};
  f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f.pNext = &f12;
  f.features.shaderFloat64 = have.features.shaderFloat64;
  std::vector<const char*> exts;
  uint32_t n_ext = 0;
  vk.vkEnumerateDeviceExtensionProperties(physical_, nullptr, &n_ext, nullptr);
  std::vector<VkExtensionProperties> dev_exts(n_ext);
  vk.vkEnumerateDeviceExtensionProperties(physical_, nullptr, &n_ext, dev_exts.data());
  if (has_extension(dev_exts, "VK_KHR_portability_subset")) exts.push_back("VK_KHR_portability_subset");
  // Profiling (SA_VULKAN_PROFILE=1) also reports each pipeline's registers and the like, where
  // the driver offers them.
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exec{};
  exec.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
  if (profile_requested() && has_extension(dev_exts, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME) &&
      vk.vkGetPipelineExecutablePropertiesKHR && vk.vkGetPipelineExecutableStatisticsKHR) {
    exts.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    exec.pipelineExecutableInfo = VK_TRUE;
    f12.pNext = &exec;
    capture_statistics_ = true;
  }
  // Cooperative matrices for the prefill products, where the device offers the shape
  // gemm_coop.comp multiplies in (the Khronos extension's where it has both).
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop_nv{};
  coop_nv.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  coop_nv.cooperativeMatrix = VK_TRUE;
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop_khr{};
  coop_khr.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
  coop_khr.cooperativeMatrix = VK_TRUE;
  VkPhysicalDeviceSubgroupSizeControlFeatures sizes{};
  sizes.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  const bool subgroups_of_32 = subgroups_of_32_offered(dev_exts);
  coop_ = coop_offered(dev_exts, subgroups_of_32);
  if (coop_ != coop_kind::none && subgroups_of_32) {
    // Its pipelines ask for full subgroups of 32 (AMD's default is 64; on NVIDIA the request
    // states what the device does anyway).
    exts.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    sizes.subgroupSizeControl = VK_TRUE;
    sizes.computeFullSubgroups = VK_TRUE;
    sizes.pNext = f12.pNext;
    f12.pNext = &sizes;
    coop_subgroups_of_32_ = true;
  }
  if (coop_ != coop_kind::none) {
    exts.push_back(coop_ == coop_kind::khr ? VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME
                                           : VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    f12.shaderFloat16 = VK_TRUE;
    f12.vulkanMemoryModel = VK_TRUE;
    if (coop_ == coop_kind::khr) {
      coop_khr.pNext = f12.pNext;
      f12.pNext = &coop_khr;
    } else {
      coop_nv.pNext = f12.pNext;
      f12.pNext = &coop_nv;
    }
  }
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  di.pNext = &f;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  di.ppEnabledExtensionNames = exts.data();
  check(vk.vkCreateDevice(physical_, &di, nullptr, &device_), "vkCreateDevice");
  vk.vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  VkPushConstantRange range{};
  range.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  range.size = k_push_bytes;
  VkPipelineLayoutCreateInfo li{};
  li.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  li.pushConstantRangeCount = 1;
  li.pPushConstantRanges = &range;
  const VkResult r = vk.vkCreatePipelineLayout(device_, &li, nullptr, &layout_);
  if (r != VK_SUCCESS) {
    vk.vkDestroyDevice(device_, nullptr);
    check(r, "vkCreatePipelineLayout");
  }
  pipelines_.assign(k_shader_count, VK_NULL_HANDLE);
}

context::~context() {
  vk.vkDeviceWaitIdle(device_);
  for (VkPipeline p : pipelines_)
    if (p) vk.vkDestroyPipeline(device_, p, nullptr);
  vk.vkDestroyPipelineLayout(device_, layout_, nullptr);
  for (std::vector<block>& pool : pools_)
    for (block& b : pool) {
      if (b.buffer) vk.vkDestroyBuffer(device_, b.buffer, nullptr);
      if (b.memory) vk.vkFreeMemory(device_, b.memory, nullptr);
    }
  vk.vkDestroyDevice(device_, nullptr);
}

void context::submit(const VkSubmitInfo& info, VkFence fence) {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  check(vk.vkQueueSubmit(queue_, 1, &info, fence), "vkQueueSubmit");
}

void context::wait_idle() {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  vk.vkQueueWaitIdle(queue_);
}

// ---- memory ------------------------------------------------------------------------------------

uint32_t context::memory_type(memory_kind kind) const {
  VkMemoryPropertyFlags need = 0, prefer = 0;
  switch (kind) {
    case memory_kind::device: prefer = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT; break;
    case memory_kind::upload: need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT; break;
    case memory_kind::readback:
      need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
      prefer = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
      break;
  }
  int found = -1;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
    if ((f & need) != need) continue;
    if ((f & prefer) == prefer) return i;
    if (found < 0) found = static_cast<int>(i);
  }
  if (found < 0) fail(SA_ERR_UNSUPPORTED, "Vulkan device %s has no host-visible coherent memory", props_.deviceName);
  return static_cast<uint32_t>(found);
}

uint32_t context::new_block(memory_kind kind, VkDeviceSize bytes, bool dedicated) {
  block b;
  b.size = bytes;
  b.dedicated = dedicated;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vk.vkCreateBuffer(device_, &bi, nullptr, &b.buffer), "vkCreateBuffer");
  VkMemoryRequirements req{};
  vk.vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  uint32_t type = memory_type(kind);
  if (!(req.memoryTypeBits & (1u << type))) {  // fall back to any type the buffer takes
    for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i)
      if ((req.memoryTypeBits & (1u << i)) &&
          (kind == memory_kind::device ||
           (memory_.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))) {
        type = i;
        break;
      }
  }
  VkMemoryAllocateFlagsInfo fi{};
  fi.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO;
  fi.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.pNext = &fi;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  VkResult r = vk.vkAllocateMemory(device_, &ai, nullptr, &b.memory);
  if (r == VK_SUCCESS) r = vk.vkBindBufferMemory(device_, b.buffer, b.memory, 0);
  if (r == VK_SUCCESS && kind != memory_kind::device) {
    void* p = nullptr;
    r = vk.vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &p);
    b.mapped = static_cast<uint8_t*>(p);
  }
  if (r != VK_SUCCESS) {
    vk.vkDestroyBuffer(device_, b.buffer, nullptr);
    if (b.memory) vk.vkFreeMemory(device_, b.memory, nullptr);
    check(r, "vkAllocateMemory");
  }
  VkBufferDeviceAddressInfo addr{};
  addr.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO;
  addr.buffer = b.buffer;
  b.address = vk.vkGetBufferDeviceAddress(device_, &addr);
  b.free.emplace_back(0, bytes);
  std::vector<block>& pool = pools_[static_cast<size_t>(kind)];
  for (size_t i = 0; i < pool.size(); ++i)  // reuse a slot a freed dedicated block left
    if (!pool[i].buffer) {
      pool[i] = std::move(b);
      return static_cast<uint32_t>(i);
    }
  pool.push_back(std::move(b));
  return static_cast<uint32_t>(pool.size() - 1);
}

allocation context::allocate(VkDeviceSize bytes, memory_kind kind) {
  std::lock_guard<std::mutex> lock(memory_mutex_);
  const VkDeviceSize size = std::max<VkDeviceSize>(k_align, (bytes + k_align - 1) / k_align * k_align);
  std::vector<block>& pool = pools_[static_cast<size_t>(kind)];
  const VkDeviceSize block_bytes = k_block_bytes[static_cast<size_t>(kind)];
  uint32_t bi = UINT32_MAX;
  size_t fi = 0;
  if (size <= block_bytes / 2) {
    for (uint32_t i = 0; i < pool.size() && bi == UINT32_MAX; ++i) {
      if (!pool[i].buffer || pool[i].dedicated) continue;
      for (size_t j = 0; j < pool[i].free.size(); ++j)
        if (pool[i].free[j].second >= size) {
          bi = i;
          fi = j;
          break;
        }
    }
    if (bi == UINT32_MAX) {
      bi = new_block(kind, block_bytes, false);
      fi = 0;
    }
  } else {
    bi = new_block(kind, size, true);
    fi = 0;
  }
  block& b = pool[bi];
  auto& [off, len] = b.free[fi];
  allocation a;
  a.buffer = b.buffer;
  a.offset = off;
  a.size = size;
  a.address = b.address + off;
  a.mapped = b.mapped ? b.mapped + off : nullptr;
  a.block = bi;
  a.kind = kind;
  off += size;
  len -= size;
  if (len == 0) b.free.erase(b.free.begin() + static_cast<std::ptrdiff_t>(fi));
  return a;
}

void context::release(const allocation& a) {
  std::lock_guard<std::mutex> lock(memory_mutex_);
  std::vector<block>& pool = pools_[static_cast<size_t>(a.kind)];
  if (a.block >= pool.size()) return;
  block& b = pool[a.block];
  if (b.dedicated) {
    vk.vkDestroyBuffer(device_, b.buffer, nullptr);
    vk.vkFreeMemory(device_, b.memory, nullptr);
    b = block{};
    return;
  }
  // Insert (offset, size) in order and coalesce with its neighbours.
  auto it = std::lower_bound(b.free.begin(), b.free.end(), std::make_pair(a.offset, VkDeviceSize{0}));
  it = b.free.insert(it, {a.offset, a.size});
  if (it + 1 != b.free.end() && it->first + it->second == (it + 1)->first) {
    it->second += (it + 1)->second;
    b.free.erase(it + 1);
  }
  if (it != b.free.begin() && (it - 1)->first + (it - 1)->second == it->first) {
    (it - 1)->second += it->second;
    b.free.erase(it);
  }
}

// ---- pipelines ---------------------------------------------------------------------------------

VkPipeline context::pipeline(shader s) {
  const size_t i = static_cast<size_t>(s);
  std::lock_guard<std::mutex> lock(pipeline_mutex_);
  if (pipelines_[i]) return pipelines_[i];
  const shader_code& code = k_shaders[i];
  VkShaderModuleCreateInfo mi{};
  mi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  mi.codeSize = code.n_words * sizeof(uint32_t);
  mi.pCode = code.words;
  // Shaders written with NVIDIA's cooperative matrices, on the Khronos extension.
  const bool coop_shader = coop_ != coop_kind::none && uses_coop_nv(code.words, code.n_words);
  std::vector<uint32_t> khr;
  if (coop_shader && coop_ == coop_kind::khr) {
    std::string why;
    if (!coop_nv_to_khr(code.words, code.n_words, &khr, &why))
      fail(SA_ERR_BACKEND, "%s: its cooperative matrices could not be rewritten for VK_KHR_cooperative_matrix: %s",
           code.name, why.c_str());
    mi.codeSize = khr.size() * sizeof(uint32_t);
    mi.pCode = khr.data();
  }
  VkShaderModule module = VK_NULL_HANDLE;
  check(vk.vkCreateShaderModule(device_, &mi, nullptr, &module), "vkCreateShaderModule");
  VkComputePipelineCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  pi.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pi.stage.module = module;
  pi.stage.pName = "main";
  pi.layout = layout_;
  if (capture_statistics_) pi.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo size32{};
  size32.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO;
  size32.requiredSubgroupSize = 32;
  if (coop_shader && coop_subgroups_of_32_) {
    pi.stage.pNext = &size32;
    pi.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  }
  const VkResult r = vk.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &pi, nullptr, &pipelines_[i]);
  vk.vkDestroyShaderModule(device_, module, nullptr);
  if (r != VK_SUCCESS) {
    pipelines_[i] = VK_NULL_HANDLE;
    fail(SA_ERR_BACKEND, "Vulkan: the pipeline of shader %s could not be made: %s", code.name, result_name(r));
  }
  return pipelines_[i];
}

std::string context::pipeline_statistics(shader s) {
  VkPipeline p = VK_NULL_HANDLE;
  {
    std::lock_guard<std::mutex> lock(pipeline_mutex_);
    p = pipelines_[static_cast<size_t>(s)];
  }
  if (!capture_statistics_ || !p) return {};
  VkPipelineInfoKHR pi{};
  pi.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR;
  pi.pipeline = p;
  uint32_t n_exec = 0;
  if (vk.vkGetPipelineExecutablePropertiesKHR(device_, &pi, &n_exec, nullptr) != VK_SUCCESS || n_exec == 0) return {};
  VkPipelineExecutableInfoKHR ei{};
  ei.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR;
  ei.pipeline = p;
  ei.executableIndex = 0;  // a compute pipeline's one executable
  uint32_t n = 0;
  if (vk.vkGetPipelineExecutableStatisticsKHR(device_, &ei, &n, nullptr) != VK_SUCCESS) return {};
  std::vector<VkPipelineExecutableStatisticKHR> st(n);
  for (VkPipelineExecutableStatisticKHR& x : st) x.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
  if (vk.vkGetPipelineExecutableStatisticsKHR(device_, &ei, &n, st.data()) != VK_SUCCESS) return {};
  std::string out;
  for (uint32_t i = 0; i < n; ++i) {
    char v[64];
    switch (st[i].format) {
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: std::snprintf(v, sizeof v, "%s", st[i].value.b32 ? "yes" : "no"); break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: std::snprintf(v, sizeof v, "%lld", static_cast<long long>(st[i].value.i64)); break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: std::snprintf(v, sizeof v, "%llu", static_cast<unsigned long long>(st[i].value.u64)); break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: std::snprintf(v, sizeof v, "%g", st[i].value.f64); break;
      default: std::snprintf(v, sizeof v, "?"); break;
    }
    out += (out.empty() ? "" : ", ") + std::string(st[i].name) + " " + v;
  }
  return out;
}

}  // namespace sa::vk

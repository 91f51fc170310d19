// What the Vulkan backends of one process share: the instance, the qualifying devices, and per
// device a context — the VkDevice, its compute queue, pooled memory and the compute pipelines —
// held by every backend (session) on that device and by every buffer made there, so sessions
// on one device share one copy of a model's weights.
//
// A device qualifies when it offers Vulkan 1.2 with buffer device addresses — shaders reach
// tensors through 64-bit addresses passed as push constants, so a dispatch needs no descriptor
// sets and a recorded command buffer stays valid as long as its buffers live — and subgroup
// arithmetic, shuffles and ballots in compute shaders (reductions), with 16 KB of shared memory.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/vulkan/vk_api.h"
#include "backend/vulkan/vulkan_entry.h"
#include "sa_shaders.h"

namespace sa::vk {

// Where an allocation lives: device-local memory for tensors, host-visible memory for the
// staging of uploads and downloads.
enum class memory_kind { device, upload, readback };

class context;

enum class coop_kind { none, nv, khr };

// A range of one of the context's memory blocks, seen as a buffer.
struct allocation {
  VkBuffer buffer = VK_NULL_HANDLE;  // the block's buffer (shared with other allocations)
  VkDeviceSize offset = 0, size = 0;
  VkDeviceAddress address = 0;       // of byte `offset`
  uint8_t* mapped = nullptr;         // host pointer to byte `offset` (host-visible kinds)
  uint32_t block = 0;                // index of the block in its pool
  memory_kind kind = memory_kind::device;
};

class context {
 public:
  // The context of device `index` of list_devices(), made on first use and kept for the
  // process. Throws SA_ERR_UNSUPPORTED when the device does not exist or does not qualify.
  static std::shared_ptr<context> get(int32_t index);
  ~context();
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  VkDevice device() const { return device_; }
  int32_t index() const { return index_; }
  const VkPhysicalDeviceProperties& properties() const { return props_; }
  VkPhysicalDevice physical() const { return physical_; }
  uint32_t queue_family() const { return queue_family_; }
  // Whether shaders may use 64-bit floats (sampling's probabilities are doubles, as on the CPU).
  bool has_float64() const { return has_float64_; }
  // The device's subgroup size (shaders read gl_SubgroupSize; this is for sizing grids).
  uint32_t subgroup_size() const { return subgroup_size_; }
  // Which cooperative matrices the prefill products run on (gemm_coop.comp, written with
  // NVIDIA's and rewritten for the Khronos extension by coop_khr.h): the device offers 16 x 16 x
  // 16 steps of f16 inputs and f32 sums in subgroups of 32 (its size, or one its pipelines can
  // ask for) through VK_KHR_cooperative_matrix (preferred) or VK_NV_cooperative_matrix, with f16
  // in shaders and the Vulkan memory model.
  // SA_VULKAN_COOP=0 turns them off, =nv or =khr allows only that extension (diagnostics).
  coop_kind coop() const { return coop_; }
  // Submits to the device's queue (shared by every backend on it, hence the lock).
  void submit(const VkSubmitInfo& info, VkFence fence);
  // Waits until the queue has run everything submitted to it.
  void wait_idle();

  // A zero-initialised allocation is not promised here; the backend fills what it hands out.
  allocation allocate(VkDeviceSize bytes, memory_kind kind);
  void release(const allocation& a);

  // The compute pipeline of a shader variant, made on first use.
  VkPipeline pipeline(shader s);
  // What the driver says of a made pipeline's code ("Register Count 64, ..."), where it
  // reports it (VK_KHR_pipeline_executable_properties) and SA_VULKAN_PROFILE=1 was set when
  // the context was made; else empty.
  std::string pipeline_statistics(shader s);
  VkPipelineLayout layout() const { return layout_; }
  static constexpr uint32_t k_push_bytes = 128;  // every variant's push-constant block

  // Errors the validation layer reported since the last call (SA_VULKAN_VALIDATION=1 turns the
  // layer on), joined; empty when there were none.
  static std::string take_validation_errors();

 private:
  explicit context(int32_t index);
  struct block {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceSize size = 0;
    VkDeviceAddress address = 0;
    uint8_t* mapped = nullptr;
    std::vector<std::pair<VkDeviceSize, VkDeviceSize>> free;  // (offset, size), sorted
    bool dedicated = false;
  };
  uint32_t memory_type(memory_kind kind) const;
  uint32_t new_block(memory_kind kind, VkDeviceSize bytes, bool dedicated);

  // Which of gemm_coop.comp's cooperative matrices this device offers (see coop());
  // subgroups_of_32: whether its pipelines may ask for them (subgroups_of_32_offered).
  coop_kind coop_offered(const std::vector<VkExtensionProperties>& dev_exts, bool subgroups_of_32) const;
  // Whether pipelines may ask for full subgroups of 32 (VK_EXT_subgroup_size_control).
  bool subgroups_of_32_offered(const std::vector<VkExtensionProperties>& dev_exts) const;

  int32_t index_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  bool has_float64_ = false;
  bool capture_statistics_ = false;  // pipelines made with their statistics (profiling)
  uint32_t subgroup_size_ = 0;
  coop_kind coop_ = coop_kind::none;
  bool coop_subgroups_of_32_ = false;  // the cooperative-matrix pipelines ask for subgroups of 32
  std::mutex queue_mutex_;
  std::mutex memory_mutex_;
  std::array<std::vector<block>, 3> pools_;  // by memory_kind
  std::mutex pipeline_mutex_;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  std::vector<VkPipeline> pipelines_;
};

}  // namespace sa::vk

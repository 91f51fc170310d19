// GPU time per shader, from timestamps written around every dispatch (SA_VULKAN_PROFILE=1, a
// diagnostic: steps then run eagerly, not replayed). For each shader: its dispatches and their
// time on the GPU; for the whole run: the time inside dispatches and the time between one
// dispatch's end and the next one's start within a submission batch (the barriers' drains and
// the launches), which no shader's own figures show. The report goes to stderr when the backend
// is destroyed, each shader with what the driver says of its code (registers and the like),
// where it says it. Profiling puts every pipeline stage in the barrier before a dispatch, so that
// the timestamp at its start waits for the work before it: its gaps are those of that barrier.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/vulkan/vk_api.h"

namespace sa::vk {

class context;

// Whether SA_VULKAN_PROFILE=1 is set (the backend then times dispatches; a context made then
// keeps its pipelines' statistics).
bool profile_requested();
// Whether SA_VULKAN_PROFILE is 1 or `host`: the backend then also counts the host's side of its
// steps (host_profile), which `host` measures with recorded steps replayed as usual.
bool host_profile_requested();

// The host's side of a backend's work: its submissions and its waits on fences, reported to
// stderr with the steps it replayed, recorded or ran eagerly when the backend goes. It tells a
// step's host cost from its GPU time: the shipped model's steps on NVIDIA's driver spend 4-6 us
// in each vkQueueSubmit and the rest of their 0.28 ms waiting on fences, i.e. on the GPU.
struct host_profile {
  uint64_t submits = 0, waits = 0;
  double submit_s = 0, wait_s = 0;
  void report(const backend::step_counts& steps) const;
};

class dispatch_profile {
 public:
  // A profile on ctx's queue; nullptr (and a line on stderr) when its queue family keeps no
  // timestamps.
  static std::unique_ptr<dispatch_profile> open(const std::shared_ptr<context>& ctx);
  explicit dispatch_profile(const std::shared_ptr<context>& ctx);
  ~dispatch_profile();
  dispatch_profile(const dispatch_profile&) = delete;
  dispatch_profile& operator=(const dispatch_profile&) = delete;

  // Around a dispatch of shader number `id`, named `name`, recorded into cb (after its barrier).
  void before(VkCommandBuffer cb, size_t id, const char* name);
  void after(VkCommandBuffer cb);
  // Once every submission that wrote timestamps has completed: reads them and starts over.
  void collect();

 private:
  struct shader_time {
    size_t id = 0;  // the shader's number
    std::string name;
    uint64_t dispatches = 0;
    double ns = 0;
  };
  std::shared_ptr<context> ctx_;
  VkQueryPool pool_ = VK_NULL_HANDLE;
  double period_ns_ = 1;
  uint64_t mask_ = ~uint64_t{0};
  uint32_t next_ = 0;                  // queries written since the last collect
  std::vector<size_t> of_;             // the shader of each pair
  std::vector<shader_time> shaders_;   // by shader number
  double busy_ns_ = 0, between_ns_ = 0;
  uint64_t dropped_ = 0, batches_ = 0;
};

}  // namespace sa::vk

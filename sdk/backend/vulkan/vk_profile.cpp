#include "backend/vulkan/vk_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/vulkan/vk_context.h"

namespace sa::vk {

namespace {
constexpr uint32_t k_pairs = 8192;  // dispatches timed between two collects; later ones are dropped
}

bool profile_requested() {
  const char* e = std::getenv("SA_VULKAN_PROFILE");
  return e && std::strcmp(e, "1") == 0;
}

bool host_profile_requested() {
  const char* e = std::getenv("SA_VULKAN_PROFILE");
  return e && (std::strcmp(e, "1") == 0 || std::strcmp(e, "host") == 0);
}

void host_profile::report(const backend::step_counts& steps) const {
  std::fprintf(stderr,
               "SA_VULKAN_PROFILE host: %llu submissions, %.3f ms in vkQueueSubmit (%.1f us each); %llu fence "
               "waits, %.3f ms (%.1f us each); steps: %llu replayed, %llu recorded, %llu eager\n",
               static_cast<unsigned long long>(submits), submit_s * 1e3,
               submits ? submit_s * 1e6 / static_cast<double>(submits) : 0.0, static_cast<unsigned long long>(waits),
               wait_s * 1e3, waits ? wait_s * 1e6 / static_cast<double>(waits) : 0.0,
               static_cast<unsigned long long>(steps.replayed), static_cast<unsigned long long>(steps.recorded),
               static_cast<unsigned long long>(steps.eager));
}

std::unique_ptr<dispatch_profile> dispatch_profile::open(const std::shared_ptr<context>& ctx) {
  uint32_t n = 0;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical(), &n, nullptr);
  std::vector<VkQueueFamilyProperties> q(n);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical(), &n, q.data());
  if (ctx->queue_family() >= n || q[ctx->queue_family()].timestampValidBits == 0 ||
      ctx->properties().limits.timestampPeriod <= 0.0f) {
    std::fprintf(stderr, "SA_VULKAN_PROFILE: %s keeps no timestamps on its compute queue; not profiled\n",
                 ctx->properties().deviceName);
    return nullptr;
  }
  auto p = std::make_unique<dispatch_profile>(ctx);
  const uint32_t bits = q[ctx->queue_family()].timestampValidBits;
  p->mask_ = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  return p;
}

dispatch_profile::dispatch_profile(const std::shared_ptr<context>& ctx) : ctx_(ctx) {
  VkQueryPoolCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
  qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qi.queryCount = 2 * k_pairs;
  check(vk.vkCreateQueryPool(ctx_->device(), &qi, nullptr, &pool_), "vkCreateQueryPool");
  period_ns_ = static_cast<double>(ctx_->properties().limits.timestampPeriod);
}

dispatch_profile::~dispatch_profile() {
  std::vector<shader_time> by;
  for (const shader_time& s : shaders_)
    if (s.dispatches > 0) by.push_back(s);
  std::sort(by.begin(), by.end(), [](const shader_time& a, const shader_time& b) { return a.ns > b.ns; });
  std::fprintf(stderr,
               "SA_VULKAN_PROFILE (%s): %.3f ms in dispatches, %.3f ms between them (barriers, launches), "
               "%llu batches, %llu dispatches not timed\n",
               ctx_->properties().deviceName, busy_ns_ / 1e6, between_ns_ / 1e6,
               static_cast<unsigned long long>(batches_), static_cast<unsigned long long>(dropped_));
  std::fprintf(stderr, "  %-28s %10s %12s %10s %7s\n", "shader", "dispatches", "total ms", "mean us", "share");
  for (const shader_time& s : by) {
    std::fprintf(stderr, "  %-28s %10llu %12.3f %10.2f %6.1f%%\n", s.name.c_str(),
                 static_cast<unsigned long long>(s.dispatches), s.ns / 1e6, s.ns / 1e3 / static_cast<double>(s.dispatches),
                 busy_ns_ > 0 ? 100.0 * s.ns / busy_ns_ : 0.0);
    const std::string stats = ctx_->pipeline_statistics(static_cast<shader>(s.id));
    if (!stats.empty()) std::fprintf(stderr, "      %s\n", stats.c_str());
  }
  vk.vkDestroyQueryPool(ctx_->device(), pool_, nullptr);
}

void dispatch_profile::before(VkCommandBuffer cb, size_t id, const char* name) {
  if (next_ >= 2 * k_pairs) {
    ++dropped_;
    return;
  }
  if (next_ == 0) vk.vkCmdResetQueryPool(cb, pool_, 0, 2 * k_pairs);
  if (id >= shaders_.size()) shaders_.resize(id + 1);
  if (shaders_[id].name.empty()) {
    shaders_[id].name = name;
    shaders_[id].id = id;
  }
  of_.push_back(id);
  vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool_, next_++);
}

void dispatch_profile::after(VkCommandBuffer cb) {
  if (next_ % 2 == 0) return;  // its before() was dropped
  vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool_, next_++);
}

void dispatch_profile::collect() {
  if (next_ == 0) return;
  std::vector<uint64_t> t(next_);
  check(vk.vkGetQueryPoolResults(ctx_->device(), pool_, 0, next_, t.size() * sizeof(uint64_t), t.data(),
                                 sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "vkGetQueryPoolResults");
  for (uint64_t& v : t) v &= mask_;
  for (uint32_t k = 0; k + 1 < next_; k += 2) {
    const double ns = static_cast<double>(t[k + 1] - t[k]) * period_ns_;
    shader_time& s = shaders_[of_[k / 2]];
    ++s.dispatches;
    s.ns += ns;
    busy_ns_ += ns;
    if (k >= 2 && t[k] >= t[k - 1]) between_ns_ += static_cast<double>(t[k] - t[k - 1]) * period_ns_;
  }
  ++batches_;
  next_ = 0;
  of_.clear();
}

}  // namespace sa::vk

#include "backend/vulkan/vulkan_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "backend/weight_layout.h"
#include "core/error.h"

namespace sa::vk {

namespace {
constexpr size_t k_inline_upload = 65536;  // vkCmdUpdateBuffer's limit
}  // namespace

// ---- buffers -------------------------------------------------------------------------------------

vulkan_buffer::vulkan_buffer(std::shared_ptr<context> ctx, const allocation& a, size_t bytes)
    : ctx_(std::move(ctx)), alloc_(a), size_(bytes) {}

vulkan_buffer::~vulkan_buffer() {
  // Work still queued may read or write these bytes, from any backend on the device: wait for
  // the queue before the range can be handed out again (what cudaFree does).
  ctx_->wait_idle();
  ctx_->release(alloc_);
}

// ---- the backend ----------------------------------------------------------------------------------

vulkan_backend::vulkan_backend(int32_t device) : ctx_(context::get(device)) {
  VkCommandPoolCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = ctx_->queue_family();
  check(vk.vkCreateCommandPool(ctx_->device(), &pi, nullptr, &pool_), "vkCreateCommandPool");
  scratch_.resize(8);
  // SA_VULKAN_RECORDING=0 runs every step eagerly (a diagnostic: recorded and eager steps run
  // the same dispatches, so their results must be identical).
  const char* r = std::getenv("SA_VULKAN_RECORDING");
  recordings_ = !(r && std::strcmp(r, "0") == 0);
  // SA_VULKAN_PROFILE=1 times every dispatch (vk_profile.h); steps then run eagerly.
  if (profile_requested()) {
    profile_ = dispatch_profile::open(ctx_);
    if (profile_) recordings_ = false;
  }
  // SA_VULKAN_PROFILE=host (or 1) counts the host's side: submissions, fence waits, steps.
  if (host_profile_requested()) host_ = std::make_unique<host_profile>();
}

vulkan_backend::~vulkan_backend() {
  try {
    flush();
    wait_all();
  } catch (...) {
    ctx_->wait_idle();
  }
  if (host_) host_->report(counts_);
  const VkDevice d = ctx_->device();
  for (auto& [key, st] : steps_)
    if (st.cb) vk.vkFreeCommandBuffers(d, pool_, 1, &st.cb);
  for (VkFence f : free_fences_) vk.vkDestroyFence(d, f, nullptr);
  scratch_.clear();
  constants_.clear();
  if (staging_.buffer) ctx_->release(staging_);
  if (readback_.buffer) ctx_->release(readback_);
  vk.vkDestroyCommandPool(d, pool_, nullptr);  // frees every buffer allocated from it
}

const allocation& vulkan_backend::where(const buffer& b) const {
  const auto* vb = dynamic_cast<const vulkan_buffer*>(&b);
  if (!vb) fail(SA_ERR_INTERNAL, "vulkan backend: buffer belongs to another backend");
  if (vb->owner() != ctx_.get()) fail(SA_ERR_INTERNAL, "vulkan backend: buffer belongs to another device");
  return vb->where();
}

uint64_t vulkan_backend::addr(const tensor& t) const {
  if (!t.buf) fail(SA_ERR_INTERNAL, "vulkan backend: tensor without a buffer");
  const allocation& a = where(*t.buf);
  if (t.offset > t.buf->size() || t.n_bytes() > t.buf->size() - t.offset)
    fail(SA_ERR_INTERNAL, "vulkan backend: tensor of %zu bytes at %zu outside a buffer of %zu", t.n_bytes(),
         t.offset, t.buf->size());
  if (t.offset % 4 != 0) fail(SA_ERR_INTERNAL, "vulkan backend: tensor at byte %zu, not a multiple of 4", t.offset);
  // Shaders index tensors with signed 32-bit word offsets.
  if (t.n_bytes() / 4 >= (size_t{1} << 31))
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: a tensor of %zu bytes (shaders index at most 2^31 words)", t.n_bytes());
  return a.address + t.offset;
}

uint64_t vulkan_backend::constant(const std::string& key, const void* bytes, size_t n) {
  auto it = constants_.find(key);
  if (it == constants_.end()) {
    if (capture_) fail(SA_ERR_INTERNAL, "vulkan backend: constant '%s' first asked for inside a recording", key.c_str());
    const allocation a = ctx_->allocate(std::max<size_t>(n, 4), memory_kind::device);
    auto b = std::make_unique<vulkan_buffer>(ctx_, a, n);
    upload(*b, 0, bytes, n);
    it = constants_.emplace(key, std::move(b)).first;
  }
  return it->second->where().address;
}

const std::vector<uint8_t>& vulkan_backend::host_copy(const tensor& t) {
  const auto key = std::make_pair(static_cast<const buffer*>(t.buf), t.offset);
  auto it = host_copies_.find(key);
  if (it == host_copies_.end() || it->second.size() != t.n_bytes()) {
    if (capture_) fail(SA_ERR_INTERNAL, "vulkan backend: a host copy first asked for inside a recording");
    std::vector<uint8_t> bytes(t.n_bytes());
    download(*t.buf, t.offset, bytes.data(), bytes.size());
    it = host_copies_.insert_or_assign(key, std::move(bytes)).first;
  }
  return it->second;
}

uint64_t vulkan_backend::ints(const tensor& t) const {
  if (t.type != dtype::i32) fail(SA_ERR_INTERNAL, "vulkan backend: metadata of type %s", traits(t.type).name);
  return addr(t);
}

VkCommandBuffer vulkan_backend::new_command_buffer(bool recycled, VkCommandBufferUsageFlags usage) {
  VkCommandBuffer cb = VK_NULL_HANDLE;
  if (recycled && !free_buffers_.empty()) {
    cb = free_buffers_.back();
    free_buffers_.pop_back();
  } else {
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(vk.vkAllocateCommandBuffers(ctx_->device(), &ai, &cb), "vkAllocateCommandBuffers");
  }
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = usage;
  check(vk.vkBeginCommandBuffer(cb, &bi), "vkBeginCommandBuffer");
  return cb;
}

VkCommandBuffer vulkan_backend::recording_buffer() {
  if (capture_) return capture_;
  if (!current_) {
    current_ = new_command_buffer(true, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
    current_empty_ = true;
  }
  current_empty_ = false;
  return current_;
}

void vulkan_backend::barrier(VkCommandBuffer cb) {
  // Everything recorded before happens before everything after: the order of a single stream.
  // Only the stages the backend records (compute dispatches; copies, fills and updates) and
  // their shader and transfer accesses: a barrier on every stage and every access (indirect
  // command reads included) made the GPU's front end wait as well, which costs more per
  // dispatch on some drivers. What the host reads goes through host_barrier.
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask =
      VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  // A profile's timestamp before a dispatch (top of the pipe) must wait for the work before
  // it too, so profiling keeps every stage in the barrier.
  if (profile_) stages = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
  vk.vkCmdPipelineBarrier(cb, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void vulkan_backend::host_barrier(VkCommandBuffer cb) {
  // The device's writes made available to the host before the fence signals (downloads read
  // the readback buffer through its mapping).
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vk.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                          VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void vulkan_backend::dispatch_raw(shader s, const void* pc, size_t bytes, uint32_t gx, uint32_t gy,
                                  uint32_t gz) {
  if (gx == 0 || gy == 0 || gz == 0) return;
  if (gx > max_groups() || gy > max_groups() || gz > max_groups())
    fail(SA_ERR_INTERNAL, "vulkan backend: a grid of %u x %u x %u workgroups for %s", gx, gy, gz,
         k_shaders[static_cast<size_t>(s)].name);
  const VkPipeline p = ctx_->pipeline(s);
  const VkCommandBuffer cb = recording_buffer();
  barrier(cb);
  vk.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  vk.vkCmdPushConstants(cb, ctx_->layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<uint32_t>(bytes), pc);
  if (profile_) profile_->before(cb, static_cast<size_t>(s), k_shaders[static_cast<size_t>(s)].name);
  vk.vkCmdDispatch(cb, gx, gy, gz);
  if (profile_) profile_->after(cb);
}

void vulkan_backend::submit(VkCommandBuffer cb, bool recycle) {
  VkFence fence = VK_NULL_HANDLE;
  if (!free_fences_.empty()) {
    fence = free_fences_.back();
    free_fences_.pop_back();
  } else {
    VkFenceCreateInfo fi{};
    fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    check(vk.vkCreateFence(ctx_->device(), &fi, nullptr, &fence), "vkCreateFence");
  }
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  try {
    const auto t0 = host_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    ctx_->submit(si, fence);
    if (host_) {
      ++host_->submits;
      host_->submit_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  } catch (...) {
    free_fences_.push_back(fence);
    throw;
  }
  pending_.push_back({fence, recycle ? cb : VK_NULL_HANDLE});
}

void vulkan_backend::flush() {
  if (!current_ || current_empty_) return;  // an empty buffer stays begun for the next ops
  check(vk.vkEndCommandBuffer(current_), "vkEndCommandBuffer");
  const VkCommandBuffer cb = current_;
  current_ = VK_NULL_HANDLE;
  current_empty_ = true;
  submit(cb, true);
}

void vulkan_backend::submit_recorded(VkCommandBuffer cb) {
  flush();
  submit(cb, false);
}

void vulkan_backend::wait_all() {
  const VkDevice d = ctx_->device();
  VkResult failed = VK_SUCCESS;
  while (!pending_.empty()) {
    const submission s = pending_.front();
    pending_.pop_front();
    const auto t0 = host_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    const VkResult r = vk.vkWaitForFences(d, 1, &s.fence, VK_TRUE, UINT64_MAX);
    if (host_) {
      ++host_->waits;
      host_->wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (r != VK_SUCCESS && failed == VK_SUCCESS) failed = r;
    vk.vkResetFences(d, 1, &s.fence);
    free_fences_.push_back(s.fence);
    if (s.cb) {
      vk.vkResetCommandBuffer(s.cb, 0);
      free_buffers_.push_back(s.cb);
    }
  }
  check(failed, "the step (vkWaitForFences)");
  if (profile_) profile_->collect();
  const std::string errors = context::take_validation_errors();
  if (!errors.empty()) fail(SA_ERR_BACKEND, "Vulkan validation: %s", errors.c_str());
}

void vulkan_backend::synchronize() {
  flush();
  wait_all();
}

buffer_ptr vulkan_backend::alloc(size_t bytes) {
  if (capture_) fail(SA_ERR_INTERNAL, "vulkan backend: allocation inside a recorded step");
  const allocation a = ctx_->allocate(std::max<size_t>(bytes, 4), memory_kind::device);
  auto b = std::make_unique<vulkan_buffer>(ctx_, a, bytes);
  // Zero-filled before it is handed out (it may be shared with another backend on the device,
  // whose work is not ordered with this one's).
  const VkCommandBuffer cb = recording_buffer();
  barrier(cb);
  vk.vkCmdFillBuffer(cb, a.buffer, a.offset, a.size, 0);
  synchronize();
  return b;
}

void vulkan_backend::record_copy(const allocation& src, VkDeviceSize src_off, const allocation& dst,
                                 VkDeviceSize dst_off, size_t n) {
  const VkCommandBuffer cb = recording_buffer();
  barrier(cb);
  VkBufferCopy c{};
  c.srcOffset = src.offset + src_off;
  c.dstOffset = dst.offset + dst_off;
  c.size = n;
  vk.vkCmdCopyBuffer(cb, src.buffer, dst.buffer, 1, &c);
}

void vulkan_backend::copy_sync(const allocation& src, VkDeviceSize src_off, const allocation& dst,
                               VkDeviceSize dst_off, size_t n) {
  record_copy(src, src_off, dst, dst_off, n);
  flush();
  wait_all();
}

void vulkan_backend::copy(const tensor& src, const tensor& dst) {
  if (src.n_bytes() != dst.n_bytes())
    fail(SA_ERR_INTERNAL, "copy: %zu bytes into %zu", src.n_bytes(), dst.n_bytes());
  if (src.n_bytes() == 0) return;
  if (src.offset + src.n_bytes() > src.buf->size() || dst.offset + dst.n_bytes() > dst.buf->size())
    fail(SA_ERR_INTERNAL, "copy: a tensor outside its buffer");
  record_copy(where(*src.buf), src.offset, where(*dst.buf), dst.offset, src.n_bytes());
}

void vulkan_backend::upload(buffer& dst, size_t offset, const void* src, size_t n) {
  if (capture_) fail(SA_ERR_INTERNAL, "vulkan backend: upload inside a recorded step");
  const allocation& a = where(dst);
  if (offset > dst.size() || n > dst.size() - offset)
    fail(SA_ERR_INTERNAL, "vulkan backend: upload of %zu bytes at %zu outside its buffer", n, offset);
  if (n == 0) return;
  if (n <= k_inline_upload && n % 4 == 0 && offset % 4 == 0) {
    const VkCommandBuffer cb = recording_buffer();
    barrier(cb);
    vk.vkCmdUpdateBuffer(cb, a.buffer, a.offset + offset, n, src);
    return;
  }
  // Through the staging buffer, in pieces of its size.
  constexpr size_t k_staging = 16u << 20;
  if (!staging_.buffer) staging_ = ctx_->allocate(k_staging, memory_kind::upload);
  for (size_t done = 0; done < n;) {
    const size_t m = std::min(n - done, static_cast<size_t>(staging_.size));
    std::memcpy(staging_.mapped, static_cast<const uint8_t*>(src) + done, m);
    copy_sync(staging_, 0, a, offset + done, m);
    done += m;
  }
}

void vulkan_backend::download(const buffer& src, size_t offset, void* dst, size_t n) {
  if (capture_) fail(SA_ERR_INTERNAL, "vulkan backend: download inside a recorded step");
  const allocation& a = where(src);
  if (offset > src.size() || n > src.size() - offset)
    fail(SA_ERR_INTERNAL, "vulkan backend: download of %zu bytes at %zu outside its buffer", n, offset);
  if (n == 0) {
    synchronize();
    return;
  }
  constexpr size_t k_readback = 16u << 20;
  if (!readback_.buffer) readback_ = ctx_->allocate(k_readback, memory_kind::readback);
  for (size_t done = 0; done < n;) {
    const size_t m = std::min(n - done, static_cast<size_t>(readback_.size));
    record_copy(a, offset + done, readback_, 0, m);
    host_barrier(recording_buffer());
    flush();
    wait_all();
    std::memcpy(static_cast<uint8_t*>(dst) + done, readback_.mapped, m);
    done += m;
  }
}

size_t vulkan_backend::weight_size(dtype type, int64_t cols, int64_t rows) const {
  return device_weight_planes(type, cols, rows).bytes;
}

void vulkan_backend::upload_weight(buffer& dst, size_t offset, const void* file_bytes, dtype type,
                                   int64_t cols, int64_t rows) {
  const size_t bytes = weight_size(type, cols, rows);
  if (offset > dst.size() || bytes > dst.size() - offset)
    fail(SA_ERR_INTERNAL, "vulkan backend: weight of %zu bytes at %zu outside its buffer", bytes, offset);
  std::vector<uint8_t> host(bytes, 0);
  repack_weight(type, static_cast<const uint8_t*>(file_bytes), cols, rows, host.data());
  upload(dst, offset, host.data(), bytes);
  synchronize();  // the bytes are in place before another session on the device reads them
}

uint64_t vulkan_backend::scratch(size_t slot, size_t bytes) {
  if (slot >= scratch_.size()) fail(SA_ERR_INTERNAL, "vulkan backend: scratch slot %zu", slot);
  std::unique_ptr<vulkan_buffer>& b = scratch_[slot];
  if (!b || b->size() < bytes) {
    if (capture_) fail(SA_ERR_INTERNAL, "vulkan backend: scratch growth inside a recorded step");
    synchronize();  // the old one may be in use
    const size_t size = std::max(bytes, b ? b->size() * 2 : bytes);
    b.reset();
    const allocation a = ctx_->allocate(std::max<size_t>(size, 4), memory_kind::device);
    b = std::make_unique<vulkan_buffer>(ctx_, a, size);
    ++generation_;
  }
  return b->where().address;
}

void vulkan_backend::run_step(uint64_t key, const std::function<void()>& enqueue) {
  if (!recordings_) {
    enqueue();
    ++counts_.eager;
    return;
  }
  recorded_step& st = steps_[key];
  if (st.cb && st.generation == generation_) {
    submit_recorded(st.cb);
    ++counts_.replayed;
    return;
  }
  if (st.cb) {  // stale: a scratch buffer moved since it was recorded
    synchronize();
    vk.vkFreeCommandBuffers(ctx_->device(), pool_, 1, &st.cb);
    st.cb = VK_NULL_HANDLE;
    st.seen = 0;
  }
  if (st.seen++ == 0) {  // first time: run eagerly, so lazily sized scratch settles
    enqueue();
    ++counts_.eager;
    return;
  }
  // A buffer of its own (kept with the step), re-submitted while a previous step runs.
  const VkCommandBuffer cb = new_command_buffer(false, VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT);
  capture_ = cb;
  try {
    enqueue();
  } catch (...) {
    capture_ = VK_NULL_HANDLE;
    vk.vkEndCommandBuffer(cb);
    vk.vkFreeCommandBuffers(ctx_->device(), pool_, 1, &cb);
    throw;
  }
  capture_ = VK_NULL_HANDLE;
  check(vk.vkEndCommandBuffer(cb), "vkEndCommandBuffer");
  st.cb = cb;
  st.generation = generation_;
  ++counts_.recorded;
  submit_recorded(cb);
}

std::unique_ptr<backend> make_backend(int32_t device) { return std::make_unique<vulkan_backend>(device); }

}  // namespace sa::vk

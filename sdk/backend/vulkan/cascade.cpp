// The Cascading KV Cache's bookkeeping on the Vulkan backend (backend.h, cascade_update; the
// plan's layout and the host reference in sdk/backend/cascade_plan.h): one dispatch of
// shaders/cascade.comp, a workgroup of 256 per stream (KV head), reading the piece's sizes and
// routes from the plan in device memory. Nothing is downloaded, so a decode step that pushes
// into the cascade is recorded and replayed like any other.
//
// Where the shader cannot run, the op is the base class's: download, run the reference on the
// host, upload (a round trip per piece and layer, and has_cascade_update() false, so such
// steps are not recorded). That is a device without shaderFloat64 — the EMA step and the mean
// are double arithmetic, which the results must match bit for bit — or one whose compute
// shaders have under the shader's 17,408 bytes of shared memory (the touched slots' scores
// and source rows [2048] each, and a chunk of 256 initial scores).
#include <algorithm>
#include <cstdint>

#include "backend/vulkan/vulkan_backend.h"
#include "core/error.h"

namespace sa::vk {

namespace {

// shaders/cascade.comp: 6 addresses, then 11 uints (92 bytes of fields, padded to 96).
struct cascade_pc {
  uint64_t mass, order, plan, score, orig, moves;
  uint32_t n_sinks, n_cascades, window, n_slots, n_streams, group, head_step, reduction, with_scores,
      q_bound, touched_bound;
};
static_assert(sizeof(cascade_pc) == 96, "cascade_pc mirrors shaders/cascade.comp");
constexpr uint32_t code(cascade_reduction r) { return static_cast<uint32_t>(r); }
static_assert(code(cascade_reduction::max) == 0 && code(cascade_reduction::mean) == 1 &&
                  code(cascade_reduction::median) == 2 && code(cascade_reduction::none) == 3,
              "the reduction codes of shaders/cascade.comp");

// The shader's shared memory: t_score and t_src [k_cascade_touched_cap] each, init_s [256].
constexpr uint32_t k_cascade_shared_bytes = k_cascade_touched_cap * 8 + 256 * 4;
static_assert(k_cascade_shared_bytes == 17408, "the shared arrays of shaders/cascade.comp");

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

}  // namespace

bool vulkan_backend::has_cascade_update() const {
  return ctx().has_float64() &&
         ctx().properties().limits.maxComputeSharedMemorySize >= k_cascade_shared_bytes;
}

void vulkan_backend::cascade_update(const tensor& mass, const tensor& order, const tensor& plan,
                                    const cascade_params& p, int64_t q_bound, int64_t touched_bound,
                                    const tensor& score, const tensor& orig, const tensor& moves,
                                    const tensor* k, const tensor* v, int64_t capacity) {
  check_cascade_update(mass, order, plan, p, q_bound, touched_bound, score, orig, moves, k, v, capacity);
  if (!has_cascade_update()) {  // no shaderFloat64, or too little shared memory: the host's round trip
    backend::cascade_update(mass, order, plan, p, q_bound, touched_bound, score, orig, moves, k, v, capacity);
    return;
  }
  const int32_t group = p.homogeneous ? p.n_heads : p.n_heads / p.n_streams;
  cascade_pc pc{};
  pc.mass = p.scores ? addr(mass) : 0;  // not read without scores
  pc.order = order.elements() > 0 ? ints(order) : 0;  // read for the held keys only
  pc.plan = ints(plan);
  pc.score = addr(score);
  pc.orig = ints(orig);
  pc.moves = ints(moves);
  pc.n_sinks = u32(p.n_sinks);
  pc.n_cascades = u32(p.n_cascades);
  pc.window = u32(p.window);
  pc.n_slots = u32(p.n_slots);
  pc.n_streams = u32(p.n_streams);
  pc.group = u32(group);
  pc.head_step = p.homogeneous ? 0u : u32(group);
  pc.reduction = code(p.reduction);
  pc.with_scores = p.scores ? 1u : 0u;
  pc.q_bound = u32(q_bound);
  pc.touched_bound = u32(touched_bound);
  dispatch(shader::cascade_update, pc, u32(std::min<int64_t>(p.n_streams, max_groups())));
  if (k) {  // the moves, as move_rows applies them (in order per stream)
    move_rows(*k, capacity, moves, int64_t{p.n_streams} * touched_bound);
    move_rows(*v, capacity, moves, int64_t{p.n_streams} * touched_bound);
  }
}

}  // namespace sa::vk

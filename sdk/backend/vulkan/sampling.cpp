// Token sampling on the Vulkan backend: the CPU reference's draw (cpu::sample_logits) on the
// device, so a decode step downloads 4 bytes instead of the logits.
//   Greedy (temperature <= 0, or top_k == 1, which draws the same token): a two-pass arg max
//   (shaders/sampling.comp), floats only.
//   Otherwise: a bitonic sort of (logit, id) into CPU order (shaders/sampling_sort.comp), the
//   probabilities and their block sums in doubles, then one workgroup finds the nucleus cut and
//   the drawn token (shaders/sampling_draw.comp) — double arithmetic, so only on devices with
//   shaderFloat64.
// Scratch: slot 4 holds the sorted (key, id) pairs, slot 5 the arg max partials or the
// probabilities and block sums.
#include <algorithm>
#include <bit>
#include <cstdint>

#include "backend/vulkan/vulkan_backend.h"
#include "core/error.h"

namespace sa::vk {

namespace {

// shaders/sampling.comp
struct argmax_pc {
  uint64_t logits, part, token;
  uint32_t n;
};

// shaders/sampling_sort.comp
struct sort_pc {
  uint64_t logits, pairs;
  uint32_t n, n_pad, k_first, k_last, init;
};

// shaders/sampling_draw.comp
struct draw_pc {
  uint64_t pairs, p, block_sums, uniform, token;
  uint32_t k;
  float temperature, top_p;
};

constexpr size_t k_slot_pairs = 4, k_slot_work = 5;
constexpr uint32_t k_argmax_parts = 64;     // partial arg max workgroups
constexpr uint32_t k_sort_block = 2048;     // sampling_sort_local's entries per workgroup
constexpr uint32_t k_prob_block = 1024;     // sampling_draw's BLOCK
constexpr int64_t k_max_vocab = int64_t{1} << 27;

uint32_t groups_for(int64_t n, int64_t per_group, uint32_t cap) {
  return static_cast<uint32_t>(std::clamp<int64_t>((n + per_group - 1) / per_group, 1, cap));
}

}  // namespace

void vulkan_backend::sample(const tensor& logits, const sampler_config& c, const tensor& uniform,
                            const tensor& token) {
  const int64_t n = logits.elements();
  if (logits.type != dtype::f32 || n < 1 || uniform.elements() < 2 || token.elements() < 1)
    fail(SA_ERR_INTERNAL, "sample: logits of %lld elements of type %s", static_cast<long long>(n),
         traits(logits.type).name);
  if (n > k_max_vocab)
    fail(SA_ERR_UNSUPPORTED, "vulkan backend: sample over %lld logits (at most %lld)",
         static_cast<long long>(n), static_cast<long long>(k_max_vocab));
  const uint64_t tok = ints(token), uni = ints(uniform), lg = addr(logits);

  if (c.temperature <= 0.0f || c.top_k == 1) {  // the lowest id among the largest logits
    const uint32_t parts = groups_for(n, 256, k_argmax_parts);
    const uint64_t part = scratch(k_slot_work, size_t{k_argmax_parts} * 8);
    dispatch(shader::sampling_argmax_partial, argmax_pc{lg, part, 0, static_cast<uint32_t>(n)}, parts);
    dispatch(shader::sampling_argmax_final, argmax_pc{0, part, tok, parts}, 1);
    return;
  }
  if (!ctx().has_float64())
    fail(SA_ERR_UNSUPPORTED,
         "vulkan backend: sampling with temperature > 0 computes its probabilities in 64-bit floats "
         "(to draw exactly what the CPU draws), and this device's shaders lack them (no shaderFloat64); "
         "use greedy sampling (temperature 0) or top_k 1");

  // Sort all candidates into CPU order.
  const uint32_t n_pad = std::max(k_sort_block, std::bit_ceil(static_cast<uint32_t>(n)));
  const uint64_t pairs = scratch(k_slot_pairs, size_t{n_pad} * 8);
  const uint32_t blocks = std::min(n_pad / k_sort_block, max_groups());
  const uint32_t pair_groups = groups_for(n_pad / 2, 256, max_groups());
  dispatch(shader::sampling_sort_local, sort_pc{lg, pairs, static_cast<uint32_t>(n), n_pad, 2, k_sort_block, 1},
           blocks);
  for (uint32_t k = 2 * k_sort_block; k <= n_pad; k <<= 1) {
    for (uint32_t j = k / 2; j >= k_sort_block; j >>= 1)
      dispatch(shader::sampling_sort_global, sort_pc{0, pairs, static_cast<uint32_t>(n), n_pad, k, j, 0},
               pair_groups);
    dispatch(shader::sampling_sort_local, sort_pc{0, pairs, static_cast<uint32_t>(n), n_pad, k, k, 0}, blocks);
  }

  // Probabilities of the top_k, their block sums, and the draw.
  const uint32_t k = static_cast<uint32_t>(c.top_k > 0 ? std::min<int64_t>(c.top_k, n) : n);
  const uint32_t nb = (k + k_prob_block - 1) / k_prob_block;
  const size_t p_bytes = size_t{k} * 8;
  const uint64_t work = scratch(k_slot_work, p_bytes + size_t{nb} * 8);
  const draw_pc pc{pairs, work, work + p_bytes, uni, tok, k, c.temperature, c.top_p};
  dispatch(shader::sampling_probs, pc, std::min(nb, max_groups()));
  dispatch(shader::sampling_draw, pc, 1);
}

}  // namespace sa::vk

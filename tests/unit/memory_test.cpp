// Bounded memories against the double-precision reference and against dense decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "backends.h"
#include "core/error.h"
#include "gguf/gguf_reader.h"
#include "reference_forward.h"
#include "session/session.h"
#include "tiny_model.h"

namespace {

std::shared_ptr<const sa::model> tiny(sa::dtype type = sa::dtype::f32) {
  sa_test::tiny_model_options o;
  o.matrix_type = type;
  o.n_ctx_train = 4096;
  const std::vector<uint8_t> bytes = sa_test::tiny_model_bytes(o);
  return sa::model::from_file(sa::gguf::file::from_memory(bytes.data(), bytes.size()));
}

std::vector<int32_t> stream(size_t n, uint32_t seed) { return sa_test::token_stream(n, seed); }

double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

sa::session_config bounded(sa::memory_kind kind, int32_t sinks, int32_t cache, int32_t cascades,
                           int32_t stride) {
  sa::session_config c;
  c.n_threads = 2;
  c.memory = kind;
  c.n_sinks = sinks;
  c.cache_tokens = cache;
  c.n_cascades = cascades;
  c.n_batch = stride;
  return c;
}

// StreamingLLM with strided prefill: each chunk sees the sinks, the last W tokens before it
// and itself causally, at positions re-indexed from 0; afterwards the window slides.
class streaming_strides : public ::testing::TestWithParam<int32_t> {};

TEST_P(streaming_strides, matches_the_reference_sink_and_window_attention) {
  const int32_t stride = GetParam(), ns = 4, w = 12;
  const auto m = tiny();
  sa::session s(m, bounded(sa::memory_kind::streaming, ns, ns + w, 1, stride));
  sa_test::reference_forward ref(*m);
  const std::vector<int32_t> tokens = stream(45, 3);
  for (size_t done = 0; done < tokens.size();) {
    const size_t n = std::min<size_t>(stride, tokens.size() - done);
    const std::vector<int32_t> chunk(tokens.begin() + done, tokens.begin() + done + n);
    std::vector<int64_t> held;
    for (int64_t i = 0; i < static_cast<int64_t>(done); ++i)
      if (i < ns || i >= static_cast<int64_t>(done) - w) held.push_back(i);
    const auto want = ref.process(chunk, held);
    s.prefill(chunk, nullptr);
    EXPECT_LT(rel_err(s.logits(), want.back()), 1e-4) << "after token " << done + n;
    done += n;
  }
  EXPECT_EQ(s.stats().n_kv_tokens, static_cast<uint64_t>(ns + w));
}

INSTANTIATE_TEST_SUITE_P(all, streaming_strides, ::testing::Values(1, 5, 16));

TEST(cascade_memory, equals_dense_while_the_stream_fits) {
  // Until NS + N tokens have been seen nothing is evicted and positions are the original ones.
  const auto m = tiny();
  const std::vector<int32_t> tokens = stream(40, 5);
  sa::session_config dc;
  dc.n_threads = 2;
  dc.n_batch = 7;
  sa::session dense(m, dc);
  sa::session casc(m, bounded(sa::memory_kind::cascade, 4, 4 + 3 * 12, 3, 7));
  dense.prefill(tokens, nullptr);
  casc.prefill(tokens, nullptr);
  for (size_t i = 0; i < dense.logits().size(); ++i)
    ASSERT_NEAR(casc.logits()[i], dense.logits()[i], 1e-4f * (1 + std::fabs(dense.logits()[i])));
}

TEST(cascade_memory, stride_one_prefill_equals_token_by_token_decode) {
  const auto m = tiny(sa::dtype::q8_0);
  const std::vector<int32_t> tokens = stream(150, 9);
  sa::session a(m, bounded(sa::memory_kind::cascade, 4, 4 + 4 * 8, 4, 1));
  sa::session b(m, bounded(sa::memory_kind::cascade, 4, 4 + 4 * 8, 4, 1));
  a.prefill(tokens, nullptr);
  for (int32_t t : tokens) b.decode(t);
  EXPECT_EQ(a.logits(), b.logits());
  for (int32_t l = 0; l < m->hp().n_layers; ++l)
    for (int32_t st = 0; st < m->hp().n_kv_heads; ++st)
      for (int32_t slot = 0; slot < 36; ++slot) {
        const auto& ia = static_cast<const sa::cascade_memory&>(a.memory()).index(l);
        const auto& ib = static_cast<const sa::cascade_memory&>(b.memory()).index(l);
        EXPECT_EQ(ia.original_index(st, slot), ib.original_index(st, slot));
        EXPECT_EQ(ia.score(st, slot), ib.score(st, slot));
      }
}

TEST(cascade_memory, memory_stays_flat_over_100k_tokens) {
  // A one-layer, 64-wide model keeps this quick (also under the sanitizers); the bookkeeping
  // and buffers do not depend on the model's size.
  sa_test::tiny_model_options o;
  o.n_layers = 1;
  o.n_embd = 64;
  o.n_heads = 2;
  o.n_kv_heads = 1;
  o.n_ff = 128;
  o.matrix_type = sa::dtype::q8_0;
  const std::vector<uint8_t> bytes = sa_test::tiny_model_bytes(o);
  const auto m = sa::model::from_file(sa::gguf::file::from_memory(bytes.data(), bytes.size()));
  sa::session s(m, bounded(sa::memory_kind::cascade, 8, 8 + 4 * 16, 4, 512));
  const std::vector<int32_t> tokens = stream(100000, 11);
  uint64_t capacity = 0;
  for (size_t done = 0; done < tokens.size(); done += 10000) {
    s.prefill(std::vector<int32_t>(tokens.begin() + done, tokens.begin() + done + 10000), nullptr);
    const sa::session_stats st = s.stats();
    if (capacity == 0) capacity = st.kv_bytes_capacity;
    EXPECT_EQ(st.kv_bytes_capacity, capacity);  // nothing grows with the stream
    EXPECT_EQ(st.n_kv_tokens, 8u + 64u);
    EXPECT_EQ(st.kv_bytes_held, st.n_kv_tokens * 2 * 1 * 32 * 4);  // K+V, 1 head x 32, f32
  }
  EXPECT_EQ(s.tokens().size(), 100000u);
}

TEST(cascade_memory, cancelled_prefill_restores_the_cache) {
  const auto m = tiny();
  const auto config = bounded(sa::memory_kind::cascade, 4, 4 + 2 * 8, 2, 4);
  sa::session a(m, config), b(m, config);
  const std::vector<int32_t> head = stream(30, 1), tail = stream(20, 2);
  a.prefill(head, nullptr);
  b.prefill(head, nullptr);
  EXPECT_THROW(a.prefill(tail, [](size_t done, size_t) { return done < 8; }), sa::error);
  EXPECT_EQ(a.tokens().size(), head.size());
  a.prefill(tail, nullptr);
  b.prefill(tail, nullptr);
  EXPECT_EQ(a.logits(), b.logits());
}

TEST(cascade_memory, reductions_and_homogeneous_heads_run_and_decide_differently) {
  const auto m = tiny();
  const std::vector<int32_t> tokens = stream(200, 4);
  std::vector<std::vector<float>> results;
  for (auto red : {sa::cascade_reduction::max, sa::cascade_reduction::mean,
                   sa::cascade_reduction::median}) {
    for (bool homogeneous : {false, true}) {
      auto c = bounded(sa::memory_kind::cascade, 4, 4 + 4 * 8, 4, 8);
      c.reduction = red;
      c.homogeneous = homogeneous;
      sa::session s(m, c);
      s.prefill(tokens, nullptr);
      results.push_back(s.logits());
      if (homogeneous) {  // every KV head keeps the same tokens
        const auto& idx = static_cast<const sa::cascade_memory&>(s.memory()).index(0);
        for (int32_t slot = 0; slot < idx.n_slots(); ++slot)
          EXPECT_EQ(idx.original_index(0, slot), idx.original_index(1, slot));
      }
    }
  }
  int distinct = 0;
  for (size_t i = 1; i < results.size(); ++i) distinct += results[i] != results[0];
  EXPECT_GT(distinct, 0);
}

// Without token selection no score is kept: every comparison is a tie, which the incoming token
// wins, so every KV head holds what a bare index fed all-zero scores holds, and the result
// differs from selecting by attention.
TEST(cascade_memory, no_selection_keeps_what_zero_scores_keep) {
  const auto m = tiny();
  const int32_t ns = 4, w = 8, c = 4, stride = 8;
  const std::vector<int32_t> tokens = stream(200, 4);
  auto cfg = bounded(sa::memory_kind::cascade, ns, ns + c * w, c, stride);
  cfg.reduction = sa::cascade_reduction::none;
  sa::session s(m, cfg);
  s.prefill(tokens, nullptr);
  cfg.reduction = sa::cascade_reduction::max;
  sa::session selecting(m, cfg);
  selecting.prefill(tokens, nullptr);
  EXPECT_NE(s.logits(), selecting.logits());

  sa::cascade_config ic;
  ic.n_sinks = ns;
  ic.n_cascades = c;
  ic.window = w;
  const int32_t kv = m->hp().n_kv_heads;
  sa::cascade_index bare(ic, kv);
  std::vector<sa::cascade_index::move> moves;
  for (size_t done = 0; done < tokens.size(); done += stride) {
    const int32_t n = static_cast<int32_t>(std::min<size_t>(stride, tokens.size() - done));
    const std::vector<float> zeros(static_cast<size_t>(kv * n), 0.0f);
    bare.push(n, zeros.data(), moves);
  }
  for (int32_t layer = 0; layer < m->hp().n_layers; ++layer) {
    const auto& idx = static_cast<const sa::cascade_memory&>(s.memory()).index(layer);
    for (int32_t h = 0; h < kv; ++h)
      for (int32_t slot = 0; slot < idx.n_slots(); ++slot) {
        EXPECT_EQ(idx.original_index(h, slot), bare.original_index(h, slot));
        EXPECT_EQ(idx.score(h, slot), 0.0f);
      }
  }
}

TEST(cascade_memory, bad_configurations_are_rejected) {
  const auto m = tiny();
  EXPECT_THROW(sa::session(m, bounded(sa::memory_kind::cascade, 4, 4 + 10, 3, 8)), sa::error);
  EXPECT_THROW(sa::session(m, bounded(sa::memory_kind::cascade, 64, 64, 1, 8)), sa::error);
  EXPECT_THROW(sa::session(m, bounded(sa::memory_kind::cascade, 4, 36, 0, 8)), sa::error);
}

}  // namespace

namespace {

// The EMA scores the cascade keeps equal those computed from the reference's attention
// probabilities: a chunk of q rows adds sum_r (1-b) b^(q-1-r) A_h[r][key], reduced by max over
// each KV head's query heads; a held slot first decays by b^q; a new token starts from the
// attention its own chunk gave it.
TEST(cascade_memory, scores_follow_the_reference_attention) {
  const auto m = tiny();
  const int32_t ns = 2, w = 8, c = 2, stride = 5;
  auto cfg = bounded(sa::memory_kind::cascade, ns, ns + c * w, c, stride);
  cfg.beta = 0.75f;  // far from 1 so decay and weights matter
  sa::session s(m, cfg);
  sa_test::reference_forward ref(*m);
  const int32_t H = m->hp().n_heads, KV = m->hp().n_kv_heads, group = H / KV;
  const std::vector<int32_t> tokens = stream(3 * stride, 21);
  // expected[layer][kv head][token] while every token is still held (3 chunks < NS + N).
  std::vector<std::vector<std::map<int64_t, double>>> expected(
      m->hp().n_layers, std::vector<std::map<int64_t, double>>(KV));
  for (int chunk = 0; chunk < 3; ++chunk) {
    std::vector<int64_t> held;
    for (int64_t i = 0; i < chunk * stride; ++i) held.push_back(i);
    const std::vector<int32_t> part(tokens.begin() + chunk * stride,
                                    tokens.begin() + (chunk + 1) * stride);
    ref.process(part, held);
    s.prefill(part, nullptr);
    const auto& P = ref.last_probs();
    for (int32_t l = 0; l < m->hp().n_layers; ++l)
      for (int32_t g = 0; g < KV; ++g) {
        auto& e = expected[l][g];
        for (auto& [token, score] : e) score *= std::pow(0.75, stride);
        const int64_t n_keys = static_cast<int64_t>(held.size()) + stride;
        for (int64_t key = 0; key < n_keys; ++key) {
          double best = -1;
          for (int32_t h = g * group; h < (g + 1) * group; ++h) {
            double sum = 0;
            for (int32_t r = 0; r < stride; ++r) {
              const auto& row = P[l][h][r];
              if (key < static_cast<int64_t>(row.size()))
                sum += (1 - 0.75) * std::pow(0.75, stride - 1 - r) * row[key];
            }
            best = std::max(best, sum);
          }
          const int64_t token = key;  // every earlier token is held, in order
          e[token] += best;
        }
      }
    for (int32_t l = 0; l < m->hp().n_layers; ++l) {
      const auto& idx = static_cast<const sa::cascade_memory&>(s.memory()).index(l);
      for (int32_t g = 0; g < KV; ++g)
        for (int32_t slot = ns; slot < idx.n_slots(); ++slot) {
          if (!idx.valid(slot)) continue;
          const int64_t token = idx.original_index(g, slot);
          EXPECT_NEAR(idx.score(g, slot), expected[l][g].at(token), 2e-5)
              << "chunk " << chunk << " layer " << l << " kv head " << g << " token " << token;
        }
    }
  }
}

}  // namespace

namespace {

// ---- held positions: which tokens each layer and KV head keeps -------------------------------

std::vector<uint64_t> held(const sa::session& s, int32_t layer, int32_t kv_head) {
  std::vector<uint64_t> out;
  s.memory_positions(layer, kv_head, out);
  return out;
}

// Without token selection the cascade's decisions follow from its acceptance schedule alone, so
// a bare index pushed the same chunks (with the all-zero scores that make every comparison a
// tie) predicts the tokens of every layer and KV head.
TEST(held_positions, a_cascade_without_selection_holds_what_its_schedule_keeps) {
  const auto m = tiny();
  const int32_t ns = 4, w = 6, c = 3, stride = 8;
  auto cfg = bounded(sa::memory_kind::cascade, ns, ns + c * w, c, stride);
  cfg.reduction = sa::cascade_reduction::none;
  sa::session s(m, cfg);
  const std::vector<int32_t> tokens = stream(120, 6);
  s.prefill(std::vector<int32_t>(tokens.begin(), tokens.begin() + 113), nullptr);
  for (size_t i = 113; i < tokens.size(); ++i) s.decode(tokens[i]);

  sa::cascade_config ic;
  ic.n_sinks = ns;
  ic.n_cascades = c;
  ic.window = w;
  const int32_t kv = m->hp().n_kv_heads;
  sa::cascade_index bare(ic, kv);
  std::vector<sa::cascade_index::move> moves;
  auto push = [&](int32_t n) {
    const std::vector<float> zeros(static_cast<size_t>(kv * n), 0.0f);
    bare.push(n, zeros.data(), moves);
  };
  for (int32_t done = 0; done < 113; done += stride) push(std::min(stride, 113 - done));
  for (size_t i = 113; i < tokens.size(); ++i) push(1);

  std::set<uint64_t> every;
  for (int32_t h = 0; h < kv; ++h) {
    std::vector<uint64_t> want;
    for (int32_t slot = 0; slot < bare.n_slots(); ++slot)
      if (bare.valid(slot)) want.push_back(static_cast<uint64_t>(bare.original_index(h, slot)));
    std::sort(want.begin(), want.end());
    ASSERT_EQ(want.size(), static_cast<size_t>(ns + c * w));
    for (int32_t layer = 0; layer < m->hp().n_layers; ++layer)
      EXPECT_EQ(held(s, layer, h), want) << "layer " << layer << " kv head " << h;
    EXPECT_EQ(held(s, -1, h), want);
    every.insert(want.begin(), want.end());
  }
  EXPECT_EQ(held(s, -1, -1), std::vector<uint64_t>(every.begin(), every.end()));
}

// With selection every stream keeps its own tokens: the positions are the original indices of
// the valid slots of the layer's index, n_kv_tokens of them, sinks and the newest token among
// them; a union is the set union of its parts.
TEST(held_positions, a_selecting_cascade_reports_the_valid_slots_of_each_stream) {
  const auto m = tiny();
  const int32_t ns = 4, w = 8, c = 4;
  sa::session s(m, bounded(sa::memory_kind::cascade, ns, ns + c * w, c, 16));
  const std::vector<int32_t> tokens = stream(300, 7);
  s.prefill(std::vector<int32_t>(tokens.begin(), tokens.end() - 4), nullptr);
  for (size_t i = tokens.size() - 4; i < tokens.size(); ++i) s.decode(tokens[i]);
  const auto& mem = static_cast<const sa::cascade_memory&>(s.memory());
  const uint64_t kv_tokens = s.stats().n_kv_tokens;
  std::set<uint64_t> every;
  for (int32_t layer = 0; layer < m->hp().n_layers; ++layer) {
    const sa::cascade_index& idx = mem.index(layer);
    std::set<uint64_t> layer_union;
    for (int32_t h = 0; h < m->hp().n_kv_heads; ++h) {
      std::vector<uint64_t> want;
      for (int32_t slot = 0; slot < idx.n_slots(); ++slot)
        if (idx.valid(slot)) want.push_back(static_cast<uint64_t>(idx.original_index(h, slot)));
      std::sort(want.begin(), want.end());
      const std::vector<uint64_t> got = held(s, layer, h);
      EXPECT_EQ(got, want) << "layer " << layer << " kv head " << h;
      EXPECT_EQ(got.size(), kv_tokens);
      for (uint64_t sink = 0; sink < static_cast<uint64_t>(ns); ++sink)
        EXPECT_TRUE(std::binary_search(got.begin(), got.end(), sink)) << sink;
      EXPECT_EQ(got.back(), tokens.size() - 1);
      layer_union.insert(got.begin(), got.end());
    }
    EXPECT_EQ(held(s, layer, -1), std::vector<uint64_t>(layer_union.begin(), layer_union.end()));
    every.insert(layer_union.begin(), layer_union.end());
  }
  EXPECT_EQ(held(s, -1, -1), std::vector<uint64_t>(every.begin(), every.end()));
  EXPECT_THROW(held(s, m->hp().n_layers, 0), sa::error);
  EXPECT_THROW(held(s, 0, -2), sa::error);
}

// The positions are host bookkeeping: on every backend the dense memory holds the whole history
// and the streaming memory its sinks and newest window, whatever the device keeps.
class held_positions_on : public ::testing::TestWithParam<sa::backend_kind> {};

TEST_P(held_positions_on, a_device_reports_the_positions_the_schedule_gives) {
  SA_SKIP_WITHOUT_DEVICE(GetParam());
  const auto m = tiny();
  const std::vector<int32_t> tokens = stream(40, 8);
  sa::session_config dc;
  dc.backend = GetParam();
  dc.n_threads = 2;
  dc.n_batch = 16;
  sa::session dense(m, dc);
  dense.prefill(std::vector<int32_t>(tokens.begin(), tokens.end() - 2), nullptr);
  for (size_t i = tokens.size() - 2; i < tokens.size(); ++i) dense.decode(tokens[i]);
  std::vector<uint64_t> all(tokens.size());
  std::iota(all.begin(), all.end(), uint64_t{0});
  for (int32_t layer = -1; layer < m->hp().n_layers; ++layer)
    for (int32_t h = -1; h < m->hp().n_kv_heads; ++h) EXPECT_EQ(held(dense, layer, h), all);

  auto sc = bounded(sa::memory_kind::streaming, 4, 4 + 12, 1, 5);
  sc.backend = GetParam();
  sa::session streaming(m, sc);
  streaming.prefill(std::vector<int32_t>(tokens.begin(), tokens.end() - 2), nullptr);
  for (size_t i = tokens.size() - 2; i < tokens.size(); ++i) streaming.decode(tokens[i]);
  std::vector<uint64_t> want = {0, 1, 2, 3};
  for (uint64_t p = tokens.size() - 12; p < tokens.size(); ++p) want.push_back(p);
  for (int32_t layer = -1; layer < m->hp().n_layers; ++layer)
    for (int32_t h = -1; h < m->hp().n_kv_heads; ++h) EXPECT_EQ(held(streaming, layer, h), want);
}

INSTANTIATE_TEST_SUITE_P(backends, held_positions_on, ::testing::ValuesIn(sa_test::compiled_backends()),
                         sa_test::backend_name());

}  // namespace

// Cascading KV cache bookkeeping (sdk/memory/cascade_index.*).
//
// References: traces written by the Python simulator (tests/cascade/*.trace, regenerated with
// tools/gen_cascade_traces.sh), the worked example of the design notes, and properties that
// are checked here independently: bulk == single pushes, contiguous positions in token order,
// StreamingLLM for C = 1, the span bound of the paper's Eq. 4, and a flat footprint. Every
// check also replays the reported moves on a fake K/V array whose rows hold token indices.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "memory/cascade_index.h"
#include "test_util.h"

namespace {

using sa::cascade_config;
using sa::cascade_index;

cascade_config make_config(int ns, int w, int c, bool eager = true, float beta = 0.9999f) {
  cascade_config cfg;
  cfg.n_sinks = ns;
  cfg.window = w;
  cfg.n_cascades = c;
  cfg.eager_fill = eager;
  cfg.beta = beta;
  return cfg;
}

// Per stream, one "row" per slot and staging row holding the index of the token stored there;
// the index reports moves, the test applies them one after another.
class fake_kv {
 public:
  fake_kv(const cascade_index& idx, int max_q)
      : n_slots_(idx.n_slots()),
        rows_(idx.n_streams(), std::vector<int64_t>(idx.n_slots() + max_q, -1)) {}

  // Writes the chunk's tokens into the staging rows, as the caller does before push().
  void stage(int64_t first, int q) {
    for (auto& r : rows_) {
      ASSERT_LE(n_slots_ + q, static_cast<int>(r.size()));
      for (int k = 0; k < q; ++k) r[n_slots_ + k] = first + k;
    }
  }

  void apply(const std::vector<cascade_index::move>& moves, int q) {
    std::vector<std::set<int>> written(rows_.size());
    for (const auto& m : moves) {
      ASSERT_GE(m.stream, 0);
      ASSERT_LT(m.stream, static_cast<int>(rows_.size()));
      ASSERT_GE(m.dst, 0);
      ASSERT_LT(m.dst, n_slots_) << "a staging row was written";
      ASSERT_GE(m.src, 0);
      ASSERT_LT(m.src, n_slots_ + q);
      ASSERT_NE(m.src, m.dst);
      ASSERT_TRUE(written[m.stream].insert(m.dst).second) << "slot written twice: " << m.dst;
      rows_[m.stream][m.dst] = rows_[m.stream][m.src];
    }
  }

  // Every valid slot's row holds the token the index says it holds.
  void expect_matches(const cascade_index& idx) const {
    for (int s = 0; s < idx.n_streams(); ++s)
      for (int slot = 0; slot < idx.n_slots(); ++slot)
        if (idx.valid(slot)) {
          EXPECT_EQ(rows_[s][slot], idx.original_index(s, slot)) << "stream " << s << " slot "
                                                                  << slot;
        }
  }

 private:
  int n_slots_;
  std::vector<std::vector<int64_t>> rows_;
};

// decay (optional) + push + applying the moves, with init laid out [n_streams][q].
void step(cascade_index& idx, fake_kv& kv, const std::vector<float>* inc,
          const std::vector<float>& init, int q) {
  if (inc) idx.decay_and_add(q, inc->data());
  kv.stage(idx.tokens_seen(), q);
  std::vector<cascade_index::move> moves;
  idx.push(q, init.data(), moves);
  kv.apply(moves, q);
}

// ---- position and order properties, valid for any scores -----------------------------------

void expect_order_properties(const cascade_index& idx) {
  const auto& cfg = idx.config();
  const std::vector<int32_t> order = idx.slots_in_order();
  ASSERT_EQ(static_cast<int>(order.size()), idx.next_position());
  std::vector<bool> listed(idx.n_slots(), false);
  for (size_t k = 0; k < order.size(); ++k) {
    const int slot = order[k];
    ASSERT_TRUE(idx.valid(slot)) << slot;
    listed[slot] = true;
    EXPECT_EQ(idx.rope_position(slot), static_cast<int>(k)) << "positions contiguous from 0";
    if (k < static_cast<size_t>(std::min<int64_t>(idx.tokens_seen(), cfg.n_sinks))) {
      EXPECT_EQ(slot, static_cast<int>(k)) << "sinks first";
    }
    for (int s = 0; s < idx.n_streams() && k > 0; ++s)
      EXPECT_LT(idx.original_index(s, order[k - 1]), idx.original_index(s, slot))
          << "positions follow token order, stream " << s;
  }
  for (int slot = 0; slot < idx.n_slots(); ++slot) {
    EXPECT_EQ(listed[slot], idx.valid(slot)) << slot;
    for (int s = 0; s < idx.n_streams(); ++s) {
      const int64_t o = idx.original_index(s, slot);
      if (idx.valid(slot)) {
        EXPECT_GE(o, 0);
        EXPECT_LT(o, idx.tokens_seen());
      }
    }
  }
}

// ---- trace fixtures ------------------------------------------------------------------------

struct trace_case {
  const char* name;
  bool heads_differ;  // independent heads make different choices somewhere in the trace
};

class cascade_trace : public ::testing::TestWithParam<trace_case> {};

std::vector<int64_t> read_ints(std::istringstream& ls) {
  std::vector<int64_t> v;
  int64_t x;
  while (ls >> x) v.push_back(x);
  return v;
}

TEST_P(cascade_trace, matches_the_simulator_after_every_push) {
  const trace_case tc = GetParam();
  const std::string path = sa_test::test_data_dir() + "/cascade/" + tc.name + ".trace";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;

  std::unique_ptr<cascade_index> idx;
  std::unique_ptr<fake_kv> kv;
  int n_streams = 0, n_slots = 0, ns = 0, nc = 0;
  int q = 0, exp2 = 0, rows_left = 0, steps = 0, steps_differ = 0;
  bool pending_decay = false;
  std::vector<float> inc, init;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    SCOPED_TRACE(std::string(tc.name) + ":" + std::to_string(line_no));
    std::istringstream ls(line);
    std::string kw;
    ls >> kw;
    if (kw == "case") {
      std::string key, name;
      ls >> name;
      cascade_config cfg;
      while (ls >> key) {
        std::string value;
        ls >> value;
        const int i = std::atoi(value.c_str());
        if (key == "ns") cfg.n_sinks = i;
        else if (key == "w") cfg.window = i;
        else if (key == "c") cfg.n_cascades = i;
        else if (key == "eager") cfg.eager_fill = i != 0;
        else if (key == "streams") n_streams = i;
        else if (key == "beta") cfg.beta = std::strtof(value.c_str(), nullptr);
        else FAIL() << "unknown key " << key;
      }
      idx = std::make_unique<cascade_index>(cfg, n_streams);
      n_slots = idx->n_slots();
      ns = cfg.n_sinks;
      nc = cfg.n_cascades;
      kv = std::make_unique<fake_kv>(*idx, 4 * n_slots + 16);
    } else if (kw == "decay" || kw == "push") {
      ASSERT_TRUE(idx);
      ASSERT_EQ(rows_left, 0);
      ls >> q >> exp2;
      rows_left = n_streams;
      if (kw == "decay") {
        pending_decay = true;
        inc.assign(static_cast<size_t>(n_streams) * n_slots, 0.0f);
      } else {
        init.assign(static_cast<size_t>(n_streams) * q, 0.0f);
      }
    } else if (kw == "inc" || kw == "init") {
      int s;
      ls >> s;
      const std::vector<int64_t> v = read_ints(ls);
      const bool is_inc = kw == "inc";
      ASSERT_EQ(static_cast<int>(v.size()), is_inc ? n_slots : q);
      auto& dst = is_inc ? inc : init;
      for (size_t j = 0; j < v.size(); ++j)
        dst[s * v.size() + j] = std::ldexp(static_cast<float>(v[j]), -exp2);
      if (--rows_left == 0) {
        if (is_inc) {
          idx->decay_and_add(q, inc.data());
          pending_decay = false;
        } else {
          ASSERT_FALSE(pending_decay);
          step(*idx, *kv, nullptr, init, q);
        }
      }
    } else if (kw == "state") {
      int64_t seen, span;
      int next;
      ls >> seen >> next >> span;
      EXPECT_EQ(idx->tokens_seen(), seen);
      EXPECT_EQ(idx->next_position(), next);
      EXPECT_EQ(idx->span(), span);
    } else if (kw == "stored" || kw == "start") {
      const std::vector<int64_t> v = read_ints(ls);
      ASSERT_EQ(static_cast<int>(v.size()), nc);
      for (int i = 0; i < nc; ++i)
        EXPECT_EQ(kw == "stored" ? idx->stored(i) : idx->start(i), v[i]) << kw << " " << i;
    } else if (kw == "valid" || kw == "rope") {
      const std::vector<int64_t> v = read_ints(ls);
      ASSERT_EQ(static_cast<int>(v.size()), n_slots);
      for (int j = 0; j < n_slots; ++j) {
        if (kw == "valid") EXPECT_EQ(idx->valid(j), v[j] != 0) << "slot " << j;
        else EXPECT_EQ(idx->rope_position(j), v[j]) << "slot " << j;
      }
    } else if (kw == "orig") {
      int s;
      ls >> s;
      const std::vector<int64_t> v = read_ints(ls);
      ASSERT_EQ(static_cast<int>(v.size()), n_slots);
      for (int j = 0; j < n_slots; ++j)
        EXPECT_EQ(idx->original_index(s, j), v[j]) << "stream " << s << " slot " << j;
    } else if (kw == "score") {
      int s;
      ls >> s;
      std::string tok;
      for (int j = 0; j < n_slots; ++j) {
        ASSERT_TRUE(ls >> tok);
        // Exact: both sides round the same fp32 operations; sinks and empty slots included.
        EXPECT_EQ(idx->score(s, j), std::strtof(tok.c_str(), nullptr))
            << "stream " << s << " slot " << j;
      }
      EXPECT_FALSE(ls >> tok) << "extra scores";
    } else if (kw == "end") {
      ++steps;
      kv->expect_matches(*idx);
      expect_order_properties(*idx);
      bool differ = false;
      for (int s = 1; s < n_streams; ++s)
        for (int j = ns; j < n_slots; ++j)
          differ |= idx->original_index(s, j) != idx->original_index(0, j);
      steps_differ += differ;
      if (HasFailure()) return;  // the first diverging push is the useful one
    } else {
      FAIL() << "unknown record " << kw;
    }
  }
  EXPECT_EQ(rows_left, 0);
  EXPECT_GE(steps, 40);
  if (tc.heads_differ) EXPECT_GT(steps_differ, 0) << "heads never chose differently";
  else EXPECT_EQ(steps_differ, 0);
}

INSTANTIATE_TEST_SUITE_P(
    cascade, cascade_trace,
    ::testing::Values(trace_case{"basic", true}, trace_case{"chunked", true},
                      trace_case{"streaming_c1", false},  // C = 1 never compares
                      trace_case{"no_sinks", true}, trace_case{"w1", true},
                      trace_case{"lazy_odd_w", true}, trace_case{"lazy_chunked", true},
                      trace_case{"w6", true}, trace_case{"ties_zero", false},
                      trace_case{"ties_dyadic", true}, trace_case{"ties_half", true}),
    [](const ::testing::TestParamInfo<trace_case>& i) { return std::string(i.param.name); });

// ---- the worked trace of the design notes: NS=2, W=4, C=3 -----------------------------------

std::vector<int64_t> sub_cache(const cascade_index& idx, int i) {
  const int w = idx.config().window, ns = idx.config().n_sinks;
  std::vector<int64_t> v;
  for (int j = 0; j < w; ++j) v.push_back(idx.original_index(0, ns + i * w + j));
  return v;
}

TEST(cascade_index, worked_trace_of_the_notes) {
  // The simulator's stand-in scores for tokens 0..17 (random.Random(0), rounded to 2 places).
  const float scores[] = {0.84f, 0.76f, 0.42f, 0.26f, 0.51f, 0.4f,  0.78f, 0.3f,  0.48f,
                          0.58f, 0.91f, 0.5f,  0.28f, 0.76f, 0.62f, 0.25f, 0.91f, 0.98f};
  cascade_index idx(make_config(2, 4, 3), 1);
  ASSERT_EQ(idx.n_slots(), 14);
  fake_kv kv(idx, 1);
  std::vector<cascade_index::move> moves;
  auto push_one = [&](int g) {
    moves.clear();
    kv.stage(g, 1);
    idx.push(1, &scores[g], moves);
    kv.apply(moves, 1);
    kv.expect_matches(idx);
  };
  using v = std::vector<int64_t>;
  for (int g = 0; g <= 13; ++g) push_one(g);
  EXPECT_EQ(sub_cache(idx, 0), (v{10, 11, 12, 13}));
  EXPECT_EQ(sub_cache(idx, 1), (v{6, 7, 8, 9}));
  EXPECT_EQ(sub_cache(idx, 2), (v{2, 3, 4, 5}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(idx.start(i), 0);

  // Token 14 (g = NS + N: still eager): 14 replaces 10, 10 replaces 6, 6 replaces 2, 2 dropped.
  // Copies run from the far end of the chain: c1 -> c2, c0 -> c1, staging -> c0.
  push_one(14);
  EXPECT_EQ(sub_cache(idx, 0), (v{14, 11, 12, 13}));
  EXPECT_EQ(sub_cache(idx, 1), (v{10, 7, 8, 9}));
  EXPECT_EQ(sub_cache(idx, 2), (v{6, 3, 4, 5}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(idx.start(i), 1);
  ASSERT_EQ(moves.size(), 3u);
  EXPECT_EQ((v{moves[0].src, moves[0].dst}), (v{6, 10}));
  EXPECT_EQ((v{moves[1].src, moves[1].dst}), (v{2, 6}));
  EXPECT_EQ((v{moves[2].src, moves[2].dst}), (v{idx.staging(0), 2}));

  // Token 15: c0 evicts 11 (.50); c1 does not accept, its newest is 10 (.91): 11 dropped.
  push_one(15);
  EXPECT_EQ(sub_cache(idx, 0), (v{14, 15, 12, 13}));
  EXPECT_EQ(sub_cache(idx, 1), (v{10, 7, 8, 9}));
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ((v{moves[0].src, moves[0].dst}), (v{idx.staging(0), 3}));

  // Token 16: c0 evicts 12 (.28); c1 accepts, evicts 7 (.30); c2's newest is 6 (.78): 7 dropped.
  push_one(16);
  EXPECT_EQ(sub_cache(idx, 0), (v{14, 15, 16, 13}));
  EXPECT_EQ(sub_cache(idx, 1), (v{10, 12, 8, 9}));
  EXPECT_EQ(sub_cache(idx, 2), (v{6, 3, 4, 5}));

  // Token 17: c0 evicts 13 (.76); c1's newest is 12 (.28): 13 overwrites it.
  push_one(17);
  EXPECT_EQ(sub_cache(idx, 0), (v{14, 15, 16, 17}));
  EXPECT_EQ(sub_cache(idx, 1), (v{10, 13, 8, 9}));
  EXPECT_FLOAT_EQ(idx.score(0, 2 + 4 + 1), 0.76f);  // the score travelled with token 13

  // RoPE order after token 17, as (position: token).
  const v expected = {0, 1, 3, 4, 5, 6, 8, 9, 10, 13, 14, 15, 16, 17};
  const std::vector<int32_t> order = idx.slots_in_order();
  ASSERT_EQ(order.size(), expected.size());
  for (size_t k = 0; k < order.size(); ++k) {
    EXPECT_EQ(idx.rope_position(order[k]), static_cast<int>(k));
    EXPECT_EQ(idx.original_index(0, order[k]), expected[k]) << k;
  }
  EXPECT_EQ(idx.next_position(), 14);  // NS + N
}

// ---- bulk push == single pushes ----------------------------------------------------------

TEST(cascade_index, bulk_push_equals_single_pushes) {
  struct setting { int ns, w, c; bool eager; bool ties; };
  const setting settings[] = {{4, 4, 4, true, false}, {0, 3, 3, false, true},
                              {2, 1, 5, true, false}, {3, 5, 1, true, true},
                              {1, 6, 3, false, false}, {5, 8, 2, true, true},
                              {2, 4, 3, true, true}};
  std::mt19937 rng(7);
  for (const setting& st : settings) {
    SCOPED_TRACE("ns " + std::to_string(st.ns) + " w " + std::to_string(st.w) + " c " +
                 std::to_string(st.c) + " eager " + std::to_string(st.eager));
    const int streams = 3;
    const cascade_config cfg = make_config(st.ns, st.w, st.c, st.eager, 0.999f);
    cascade_index bulk(cfg, streams), single(cfg, streams);
    const int n = bulk.n_slots(), max_q = 3 * n + 5;
    fake_kv kv_bulk(bulk, max_q), kv_single(single, 1);
    auto draw = [&]() {
      return st.ties ? 0.25f * static_cast<float>(rng() % 3)
                     : std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
    };
    int chunks = 0;
    while (bulk.tokens_seen() < 12 * n + 40) {
      const int q = static_cast<int>(rng() % (max_q + 1));  // 0 too
      std::vector<float> inc(static_cast<size_t>(streams) * n);
      std::vector<float> init(static_cast<size_t>(streams) * q);
      for (float& x : inc) x = 0.01f * draw();
      for (float& x : init) x = draw();
      const bool decay = rng() % 4 != 0;
      step(bulk, kv_bulk, decay ? &inc : nullptr, init, q);
      if (decay) single.decay_and_add(q, inc.data());
      for (int k = 0; k < q; ++k) {
        std::vector<float> one(streams);
        for (int s = 0; s < streams; ++s) one[s] = init[static_cast<size_t>(s) * q + k];
        step(single, kv_single, nullptr, one, 1);
      }
      ASSERT_EQ(bulk.tokens_seen(), single.tokens_seen());
      ASSERT_EQ(bulk.next_position(), single.next_position());
      ASSERT_EQ(bulk.span(), single.span());
      ASSERT_EQ(bulk.slots_in_order(), single.slots_in_order());
      for (int i = 0; i < st.c; ++i) {
        ASSERT_EQ(bulk.stored(i), single.stored(i));
        ASSERT_EQ(bulk.start(i), single.start(i));
      }
      for (int slot = 0; slot < n; ++slot) {
        ASSERT_EQ(bulk.valid(slot), single.valid(slot)) << slot;
        ASSERT_EQ(bulk.rope_position(slot), single.rope_position(slot)) << slot;
        for (int s = 0; s < streams; ++s) {
          ASSERT_EQ(bulk.original_index(s, slot), single.original_index(s, slot)) << slot;
          ASSERT_EQ(bulk.score(s, slot), single.score(s, slot)) << slot;
        }
      }
      kv_bulk.expect_matches(bulk);
      kv_single.expect_matches(single);
      ASSERT_FALSE(HasFailure());
      ++chunks;
    }
    EXPECT_GT(chunks, 5);
  }
}

// ---- positions and order on long random streams -------------------------------------------

TEST(cascade_index, positions_are_contiguous_in_token_order) {
  struct setting { int ns, w, c; bool eager; };
  const setting settings[] = {{4, 8, 4, true}, {0, 5, 3, false}, {3, 1, 6, true}, {2, 7, 2, false}};
  std::mt19937 rng(11);
  for (const setting& st : settings) {
    SCOPED_TRACE("ns " + std::to_string(st.ns) + " w " + std::to_string(st.w));
    const int streams = 2;
    cascade_index idx(make_config(st.ns, st.w, st.c, st.eager), streams);
    const int n = idx.n_slots(), cap = st.c * st.w;
    fake_kv kv(idx, 2 * n);
    while (idx.tokens_seen() < 3000) {
      const int q = 1 + static_cast<int>(rng() % (rng() % 2 ? 2 : 2 * n));
      std::vector<float> init(static_cast<size_t>(streams) * q);
      for (float& x : init) x = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
      step(idx, kv, nullptr, init, q);
      expect_order_properties(idx);
      kv.expect_matches(idx);
      const int64_t seen = idx.tokens_seen();
      if (st.eager && seen <= st.ns + cap) {
        // Nothing dropped yet: every token is held at its original position.
        const std::vector<int32_t> order = idx.slots_in_order();
        ASSERT_EQ(static_cast<int64_t>(order.size()), seen);
        for (size_t k = 0; k < order.size(); ++k)
          for (int s = 0; s < streams; ++s)
            EXPECT_EQ(idx.original_index(s, order[k]), static_cast<int64_t>(k));
      }
      // Full from NS + N + 1 tokens with eager fill; without it, compares drop tokens early.
      const int64_t full_from = st.eager ? st.ns + cap + 1 : st.ns + 2 * cap * (1 << st.c);
      EXPECT_LE(idx.next_position(), st.ns + cap);
      if (seen >= full_from) {
        EXPECT_EQ(idx.next_position(), st.ns + cap);
      }
      ASSERT_FALSE(HasFailure());
    }
  }
}

TEST(cascade_index, one_cascade_is_the_streaming_sink_cache) {
  std::mt19937 rng(3);
  for (bool eager : {true, false}) {
    const int ns = 3, w = 10;
    cascade_index idx(make_config(ns, w, 1, eager), 2);
    fake_kv kv(idx, 40);
    while (idx.tokens_seen() < 2000) {
      const int q = 1 + static_cast<int>(rng() % 40);
      std::vector<float> init(2 * q);
      for (float& x : init) x = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
      step(idx, kv, nullptr, init, q);
      kv.expect_matches(idx);
      // Held: the first NS tokens and the last W others, at contiguous positions.
      const int64_t seen = idx.tokens_seen();
      std::vector<int64_t> expected;
      for (int64_t g = 0; g < std::min<int64_t>(seen, ns); ++g) expected.push_back(g);
      for (int64_t g = std::max<int64_t>(ns, seen - w); g < seen; ++g) expected.push_back(g);
      const std::vector<int32_t> order = idx.slots_in_order();
      ASSERT_EQ(order.size(), expected.size());
      for (size_t k = 0; k < order.size(); ++k) {
        EXPECT_EQ(idx.rope_position(order[k]), static_cast<int>(k));
        for (int s = 0; s < 2; ++s) EXPECT_EQ(idx.original_index(s, order[k]), expected[k]);
      }
      if (seen > ns) {
        EXPECT_EQ(idx.span(), std::min<int64_t>(seen - ns, w) - 1);
      }
      ASSERT_FALSE(HasFailure());
    }
  }
}

// ---- span (Eq. 4) --------------------------------------------------------------------------
//
// Eq. 4: span = (N/C)(2^C - 1) = W(2^C - 1) tokens. Precisely, counting the tokens from the
// oldest one held to the newest one inclusive (span() + 1):
//  * it never exceeds W(2^C - 1), whatever the scores;
//  * it reaches W(2^C - 1) right before the last sub-cache accepts (t = -1 mod 2^(C-1)) when
//    the older candidate wins every comparison (scores decreasing in time), and so the maximum
//    over a long stream with random scores is exactly W(2^C - 1);
//  * it cannot fall below W(2^C - 1) - 2(2^(C-1) - 1) in steady state;
//  * when the newer candidate always wins (all-zero scores, ties go to the incoming token), the
//    maximum is W(2^C - 1) - 2^(C-1) + 1.

struct span_stats {
  int64_t max = 0, min = INT64_MAX, at_period_end_min = INT64_MAX;
  double mean = 0;
};

enum class score_kind { random, zero, decreasing };

span_stats measure_span(int w, int c, score_kind kind, int64_t tokens, bool eager = true) {
  const int ns = 4;
  cascade_index idx(make_config(ns, w, c, eager), 2);
  const int64_t bound = int64_t{w} * ((int64_t{1} << c) - 1);
  const int64_t warm = ns + 2 * int64_t{w} * (int64_t{1} << c);
  std::mt19937 rng(static_cast<uint32_t>(w * 100 + c));
  std::vector<cascade_index::move> moves;
  span_stats st;
  int64_t n = 0;
  for (int64_t g = 0; g < tokens; ++g) {
    float init[2];
    for (float& x : init) {
      x = kind == score_kind::zero         ? 0.0f
          : kind == score_kind::decreasing ? static_cast<float>(tokens - g)
                                           : std::uniform_real_distribution<float>(0, 1)(rng);
    }
    moves.clear();
    idx.push(1, init, moves);
    const int64_t covered = idx.span() + 1;
    if (g >= ns) {
      EXPECT_LE(covered, bound) << "g " << g;  // at every step, warm-up included
    }
    if (g < warm) continue;
    // span() itself, against the oldest index held in stream 0.
    int64_t oldest = INT64_MAX;
    for (int slot = ns; slot < idx.n_slots(); ++slot)
      if (idx.valid(slot)) oldest = std::min(oldest, idx.original_index(0, slot));
    EXPECT_EQ(idx.span(), g - oldest);
    st.max = std::max(st.max, covered);
    st.min = std::min(st.min, covered);
    const int64_t t = g - ns, period = int64_t{1} << (c - 1);
    if (t % period == period - 1) st.at_period_end_min = std::min(st.at_period_end_min, covered);
    st.mean += static_cast<double>(covered);
    ++n;
  }
  st.mean /= static_cast<double>(n);
  return st;
}

TEST(cascade_index, span_matches_equation_4) {
  struct setting { int w, c; };
  const setting settings[] = {{64, 1}, {4, 2}, {3, 3}, {16, 4}, {64, 4}, {6, 5}, {2, 6}};
  for (const setting& s : settings) {
    SCOPED_TRACE("W " + std::to_string(s.w) + " C " + std::to_string(s.c));
    const int64_t bound = int64_t{s.w} * ((int64_t{1} << s.c) - 1);
    const int64_t half = int64_t{1} << (s.c - 1);

    const span_stats r = measure_span(s.w, s.c, score_kind::random, 100000);
    EXPECT_EQ(r.max, bound);
    EXPECT_GE(r.min, bound - 2 * (half - 1));
    std::printf("  W %3d C %d: random scores, tokens covered max %lld min %lld mean %.1f; "
                "W(2^C-1) = %lld\n", s.w, s.c, static_cast<long long>(r.max),
                static_cast<long long>(r.min), r.mean, static_cast<long long>(bound));

    const span_stats d = measure_span(s.w, s.c, score_kind::decreasing, 20000);
    EXPECT_EQ(d.max, bound);
    EXPECT_EQ(d.at_period_end_min, bound);  // every period ends at the full span

    const span_stats z = measure_span(s.w, s.c, score_kind::zero, 20000);
    EXPECT_EQ(z.max, bound - half + 1);
    EXPECT_EQ(z.min, bound - 2 * (half - 1));
  }
  // Without eager fill the steady state is the same.
  EXPECT_EQ(measure_span(16, 4, score_kind::random, 20000, false).max, 16 * 15);
}

// ---- memory ---------------------------------------------------------------------------------

TEST(cascade_index, footprint_is_flat) {
  const int streams = 8;
  cascade_index idx(make_config(64, 64, 4), streams);
  const size_t before = idx.bytes();
  // Per slot and stream: fp32 score, int64 index, int32 push scratch.
  EXPECT_GE(before, static_cast<size_t>(streams) * idx.n_slots() * (4 + 8 + 4));
  std::mt19937 rng(5);
  std::vector<cascade_index::move> moves;
  std::vector<float> inc(static_cast<size_t>(streams) * idx.n_slots(), 1e-4f);
  std::vector<float> init(static_cast<size_t>(streams) * 1024);
  int pushes = 0;
  while (pushes < 100000) {
    const int q = pushes % 1000 == 999 ? 1 + static_cast<int>(rng() % 1024) : 1;  // some chunks
    for (int k = 0; k < streams * q; ++k)
      init[k] = std::uniform_real_distribution<float>(0, 1)(rng);
    if (pushes % 16 == 0) idx.decay_and_add(q, inc.data());
    moves.clear();
    idx.push(q, init.data(), moves);
    ASSERT_EQ(idx.bytes(), before) << "after push " << pushes;
    ++pushes;
  }
  std::printf("  footprint: %zu bytes for %d streams x %d slots, %lld tokens pushed\n", before,
              streams, idx.n_slots(), static_cast<long long>(idx.tokens_seen()));
}

// ---- decay_and_add --------------------------------------------------------------------------

TEST(cascade_index, decay_and_add_updates_cascade_slots_only) {
  cascade_index idx(make_config(2, 2, 2, true, 0.5f), 2);
  const int n = idx.n_slots();  // 6: 2 sinks, 4 cascade slots (all empty)
  std::vector<float> a(2 * n), b(2 * n);
  for (int e = 0; e < 2 * n; ++e) {
    a[e] = 0.25f * static_cast<float>(e + 1);
    b[e] = 1.0f + static_cast<float>(e);
  }
  idx.decay_and_add(3, a.data());
  idx.decay_and_add(2, b.data());  // 0.25 * a + b, exact
  for (int s = 0; s < 2; ++s)
    for (int j = 0; j < n; ++j) {
      const int e = s * n + j;
      EXPECT_EQ(idx.score(s, j), j < 2 ? 0.0f : 0.25f * a[e] + b[e]) << s << " " << j;
    }
  idx.decay_and_add(0, b.data());  // beta^0 = 1
  EXPECT_EQ(idx.score(1, 5), 0.25f * a[11] + 2 * b[11]);
}

// ---- configuration and argument errors ------------------------------------------------------

void expect_invalid(const cascade_config& cfg, int streams, const char* needle) {
  try {
    cascade_index idx(cfg, streams);
    ADD_FAILURE() << "accepted: " << needle;
  } catch (const sa::error& e) {
    EXPECT_EQ(e.status(), SA_ERR_INVALID_ARG);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(cascade_index, rejects_invalid_configs_with_a_message) {
  expect_invalid(make_config(-1, 4, 2), 1, "n_sinks");
  expect_invalid(make_config(4, 0, 2), 1, "window");
  expect_invalid(make_config(4, -3, 2), 1, "window");
  expect_invalid(make_config(4, 4, 0), 1, "n_cascades");
  expect_invalid(make_config(4, 4, 49), 1, "n_cascades");
  expect_invalid(make_config(4, 4, 2, true, 0.0f), 1, "beta");
  expect_invalid(make_config(4, 4, 2, true, 1.5f), 1, "beta");
  expect_invalid(make_config(4, 4, 2, true, std::nanf("")), 1, "beta");
  expect_invalid(make_config(4, 4, 2), 0, "n_streams");
  expect_invalid(make_config(64, 1 << 28, 8), 1, "exceeds");
  expect_invalid(make_config(64, 1 << 20, 8), 1 << 20, "too large");
  // The boundaries themselves are fine.
  EXPECT_NO_THROW(cascade_index(make_config(0, 1, 1, false, 1.0f), 1));
  EXPECT_NO_THROW(cascade_index(make_config(4, 1, 48), 1));

  cascade_index idx(make_config(2, 2, 2), 2);
  std::vector<cascade_index::move> moves;
  const float zeros[8] = {};
  EXPECT_THROW(idx.push(-1, zeros, moves), sa::error);
  EXPECT_THROW(idx.push(1, nullptr, moves), sa::error);
  EXPECT_THROW(idx.decay_and_add(-1, zeros), sa::error);
  EXPECT_THROW(idx.decay_and_add(1, nullptr), sa::error);
  EXPECT_THROW(idx.valid(-1), sa::error);
  EXPECT_THROW(idx.rope_position(idx.n_slots()), sa::error);
  EXPECT_THROW(idx.score(2, 0), sa::error);
  EXPECT_THROW(idx.original_index(0, 6), sa::error);
  EXPECT_THROW(idx.stored(2), sa::error);
  EXPECT_THROW(idx.start(-1), sa::error);
  idx.push(0, nullptr, moves);  // an empty chunk is a no-op
  EXPECT_EQ(idx.tokens_seen(), 0);
  EXPECT_TRUE(moves.empty());
  EXPECT_EQ(idx.span(), 0);
  EXPECT_EQ(idx.next_position(), 0);
}

// ---- head reduction -------------------------------------------------------------------------

TEST(cascade_index, reduce_heads_over_a_group) {
  using sa::cascade_reduction;
  const float one[] = {-2.5f};
  for (auto r : {cascade_reduction::max, cascade_reduction::mean, cascade_reduction::median})
    EXPECT_EQ(sa::reduce_heads(r, one, 1), -2.5f);
  const float odd[] = {3, -1, 7, 0, 2};
  EXPECT_EQ(sa::reduce_heads(cascade_reduction::max, odd, 5), 7.0f);
  EXPECT_EQ(sa::reduce_heads(cascade_reduction::none, odd, 5), 0.0f);
  EXPECT_FLOAT_EQ(sa::reduce_heads(cascade_reduction::mean, odd, 5), 11.0f / 5);
  EXPECT_EQ(sa::reduce_heads(cascade_reduction::median, odd, 5), 2.0f);
  const float even[] = {4, 1, 3, 2};  // lower median, as torch.median
  EXPECT_EQ(sa::reduce_heads(cascade_reduction::median, even, 4), 2.0f);
  EXPECT_EQ(sa::reduce_heads(cascade_reduction::mean, even, 4), 2.5f);
  EXPECT_EQ(even[0], 4.0f);  // input untouched

  // Random groups, small and larger than the on-stack buffer, against sorting.
  std::mt19937 rng(9);
  for (int n : {2, 3, 8, 63, 64, 65, 200}) {
    std::vector<float> v(n);
    for (float& x : v) x = std::uniform_real_distribution<float>(-1, 1)(rng);
    std::vector<float> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (float x : v) sum += x;
    EXPECT_EQ(sa::reduce_heads(cascade_reduction::max, v.data(), n), sorted.back());
    EXPECT_EQ(sa::reduce_heads(cascade_reduction::median, v.data(), n), sorted[(n - 1) / 2]);
    EXPECT_FLOAT_EQ(sa::reduce_heads(cascade_reduction::mean, v.data(), n),
                    static_cast<float>(sum / n));
  }
  EXPECT_THROW(sa::reduce_heads(cascade_reduction::max, one, 0), sa::error);
  EXPECT_THROW(sa::reduce_heads(cascade_reduction::max, nullptr, 1), sa::error);
}

}  // namespace

// Whole models on every compiled device backend against the CPU backend, with the same KV type
// (f16, a GPU's default) so that like is compared with like: the shipped model's logits and
// greedy tokens over a prefill and 64 decode steps, writer-made llama/qwen2/qwen3 models of every
// weight type, the bounded memories, recorded steps against eager ones, and one copy of the
// weights per device. On a machine without the device every case reports as skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "backends.h"
#include "gguf/gguf_reader.h"
#include "model/model.h"
#include "session/session.h"
#include "store/session_saver.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

using sa::backend_kind;

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    den += double{b[i]} * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

class on_device : public ::testing::TestWithParam<backend_kind> {
 protected:
  void SetUp() override {
    if (GetParam() == backend_kind::cpu) GTEST_SKIP() << "the CPU is the reference these compare with";
    SA_SKIP_WITHOUT_DEVICE(GetParam());
  }
  sa::session_config config(backend_kind kind) const {
    sa::session_config c;
    c.backend = kind;
    c.n_threads = 0;
    c.kv_type = sa::dtype::f16;
    return c;
  }
};

INSTANTIATE_TEST_SUITE_P(backends, on_device, ::testing::ValuesIn(sa_test::compiled_backends()),
                         sa_test::backend_name());

std::shared_ptr<const sa::model> shipped(const char* file) {
  return sa::model::load(sa_test::models_dir() + "/" + file, true);
}

// Text of the golden prompts, tokenized: real text the shipped model was trained on.
std::vector<int32_t> prompt_tokens(const sa::model& m, size_t at_least) {
  std::ifstream in(sa_test::test_data_dir() + "/golden/prompts.txt");
  std::string text, line;
  while (std::getline(in, line)) text += line + "\n";
  std::vector<int32_t> out;
  while (out.size() < at_least) {
    const std::vector<int32_t> t = m.vocab().encode(text, out.empty(), false);
    out.insert(out.end(), t.begin(), t.end());
  }
  return out;
}

// Runs a prompt and n greedy decode steps; records logits after the prompt and every step.
struct run_record {
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> tokens;
};
run_record greedy(sa::session& s, const std::vector<int32_t>& prompt, int n,
                  const std::vector<int32_t>* forced = nullptr) {
  run_record r;
  s.prefill(prompt, nullptr);
  r.logits.push_back(s.logits());
  int32_t t = s.sample();
  for (int i = 0; i < n; ++i) {
    if (forced) t = (*forced)[static_cast<size_t>(i)];  // teacher forcing: both see one text
    r.tokens.push_back(t);
    int32_t next = 0;
    s.decode(t, &next);
    r.logits.push_back(s.logits());
    t = next;
  }
  return r;
}

// The largest relative logit error of a run against the reference run, over all its steps.
double largest_rel_err(const run_record& got, const run_record& want) {
  double worst = 0;
  for (size_t i = 0; i < want.logits.size(); ++i) worst = std::max(worst, rel_err(got.logits[i], want.logits[i]));
  return worst;
}

// One configuration on the CPU and on `kind`: greedy runs (the device forced to the CPU's
// tokens), the largest relative logit error between them and both sessions' stats.
struct paired_run {
  run_record want, got;
  double worst = 0;
  sa::session_stats cpu, dev;
};
paired_run run_paired(const std::shared_ptr<const sa::model>& m, sa::session_config c, backend_kind kind,
                      const std::vector<int32_t>& prompt, int steps) {
  c.backend = backend_kind::cpu;
  sa::session cpu(m, c);
  c.backend = kind;
  sa::session dev(m, c);
  paired_run r;
  r.want = greedy(cpu, prompt, steps);
  r.got = greedy(dev, prompt, steps, &r.want.tokens);
  r.worst = largest_rel_err(r.got, r.want);
  r.cpu = cpu.stats();
  r.dev = dev.stats();
  return r;
}

TEST_P(on_device, shipped_model_logits_and_greedy_tokens_match_the_cpu) {
  for (const char* file : {"sa-default-q8_0.gguf", "sa-default-f16.gguf"}) {
    const auto m = shipped(file);
    const std::vector<int32_t> prompt = prompt_tokens(*m, 600);
    sa::session_config c = config(backend_kind::cpu);
    c.n_batch = 128;
    sa::session cpu(m, c);
    c.backend = GetParam();
    sa::session dev(m, c);
    const run_record want = greedy(cpu, prompt, 64), got = greedy(dev, prompt, 64);
    EXPECT_EQ(got.tokens, want.tokens) << file << ": greedy tokens over 64 steps";
    double worst = 0;
    for (size_t i = 0; i < want.logits.size(); ++i) {
      const double e = rel_err(got.logits[i], want.logits[i]);
      worst = std::max(worst, e);
      EXPECT_LT(e, 1e-2) << file << " step " << i;
    }
    std::printf("%s: largest relative logit error over prefill + 64 steps: %.3g\n", file, worst);
  }
}

TEST_P(on_device, writer_made_models_of_every_arch_and_type_match_the_cpu) {
  const char* archs[] = {"llama", "qwen2", "qwen3"};
  const sa::dtype types[] = {sa::dtype::f32,  sa::dtype::f16,  sa::dtype::bf16, sa::dtype::q8_0,
                             sa::dtype::q4_0, sa::dtype::q4_k, sa::dtype::q6_k};
  for (const char* arch : archs)
    for (sa::dtype type : types) {
      sa_test::tiny_model_options o;
      o.arch = arch;
      o.matrix_type = type;
      o.n_heads = 8;
      o.n_kv_heads = 2;  // groups of 4, head_dim 32
      o.tied = std::string(arch) != "qwen2";
      const std::vector<uint8_t> bytes = sa_test::tiny_model_bytes(o);
      const auto m = sa::model::from_file(sa::gguf::file::from_memory(bytes.data(), bytes.size()));
      const std::vector<int32_t> prompt = sa_test::token_stream(40, 7);
      sa::session cpu(m, config(backend_kind::cpu));
      sa::session dev(m, config(GetParam()));
      const run_record want = greedy(cpu, prompt, 64);
      const run_record got = greedy(dev, prompt, 64, &want.tokens);
      const double worst = largest_rel_err(got, want);
      EXPECT_LT(worst, 1e-2) << arch << " " << sa::traits(type).name;
      std::printf("%s %s: largest relative logit error %.3g\n", arch, sa::traits(type).name, worst);
    }
}

TEST_P(on_device, bounded_memories_match_the_cpu) {
  const auto m = shipped("sa-default-q8_0.gguf");
  const std::vector<int32_t> prompt = prompt_tokens(*m, 700);
  for (sa::memory_kind kind : {sa::memory_kind::streaming, sa::memory_kind::cascade}) {
    sa::session_config c = config(backend_kind::cpu);
    c.memory = kind;
    c.n_sinks = 16;
    c.cache_tokens = 16 + 4 * 48;
    c.n_cascades = 4;
    c.n_batch = 64;
    sa::session cpu(m, c);
    c.backend = GetParam();
    sa::session dev(m, c);
    const run_record want = greedy(cpu, prompt, 64);
    const run_record got = greedy(dev, prompt, 64, &want.tokens);
    const double worst = largest_rel_err(got, want);
    // Which token each slot holds: the same decisions on both backends (the cascade's EMA
    // scores are computed from attention masses that agree to rounding).
    const auto& ci = static_cast<const sa::cascade_memory&>(cpu.memory());
    const auto& di = static_cast<const sa::cascade_memory&>(dev.memory());
    int64_t same = 0, total = 0;
    for (int32_t l = 0; l < m->hp().n_layers; ++l)
      for (int32_t st = 0; st < m->hp().n_kv_heads; ++st)
        for (int32_t slot = 0; slot < ci.index(l).n_slots(); ++slot) {
          same += ci.index(l).original_index(st, slot) == di.index(l).original_index(st, slot);
          ++total;
        }
    const char* name = kind == sa::memory_kind::cascade ? "cascade" : "streaming";
    std::printf("%s: largest relative logit error %.3g, slots holding the same token %lld of %lld\n",
                name, worst, static_cast<long long>(same), static_cast<long long>(total));
    EXPECT_GE(static_cast<double>(same), 0.98 * static_cast<double>(total)) << name;
    EXPECT_LT(worst, kind == sa::memory_kind::streaming ? 1e-2 : 5e-2) << name;
  }
}

TEST_P(on_device, quest_and_resa_decoding_match_the_cpu) {
  // Quest per head and ReSA (per-group selection, rectified every 16 steps) at a budget of a
  // quarter of the pages: page summaries of an f16 cache are exact on both backends, so the
  // devices select the same pages unless two scores tie to rounding; the keys each step reads
  // and the logits are compared with the CPU's.
  const auto m = shipped("sa-default-q8_0.gguf");
  const std::vector<int32_t> prompt = prompt_tokens(*m, 700);
  for (bool resa : {false, true}) {
    sa::session_config c = config(backend_kind::cpu);
    c.n_batch = 128;
    c.sparse.method = sa::sparse_method::quest;
    c.sparse.budget_ratio = 0.25f;
    c.sparse.dense_layers = 1;
    if (resa) {
      c.sparse.granularity = sa::select_granularity::per_group;
      c.sparse.rectify_every = 16;
    }
    const paired_run r = run_paired(m, c, GetParam(), prompt, 64);
    const double worst = r.worst;
    const sa::session_stats &cs = r.cpu, &ds = r.dev;
    const char* name = resa ? "resa" : "quest";
    std::printf("%s: largest relative logit error %.3g, keys read %llu (cpu %llu) of %llu, rectified %llu\n",
                name, worst, static_cast<unsigned long long>(ds.sparse_keys_attended),
                static_cast<unsigned long long>(cs.sparse_keys_attended),
                static_cast<unsigned long long>(cs.sparse_keys_total),
                static_cast<unsigned long long>(ds.n_rectified));
    EXPECT_LT(cs.sparse_keys_attended, cs.sparse_keys_total / 2) << name << ": the steps ran sparse";
    EXPECT_NEAR(static_cast<double>(ds.sparse_keys_attended), static_cast<double>(cs.sparse_keys_attended),
                0.01 * static_cast<double>(cs.sparse_keys_attended))
        << name;
    EXPECT_EQ(ds.n_rectified, cs.n_rectified) << name;
    EXPECT_LT(worst, 2e-2) << name;
  }
}

TEST_P(on_device, vattention_decoding_draws_what_the_cpu_draws) {
  // vAttention over Quest's pages (a quarter of them) with a loose epsilon, so that heads
  // really sample: both backends draw the pilot and the sample from the same permutation of
  // the same residual, so the keys each step reads and the logits agree with the CPU's (a
  // budget may differ by a key where the CLT's size rounds across an integer).
  const auto m = shipped("sa-default-q8_0.gguf");
  const std::vector<int32_t> prompt = prompt_tokens(*m, 700);
  sa::session_config c = config(backend_kind::cpu);
  c.n_batch = 128;
  c.sparse.method = sa::sparse_method::vattention;
  c.sparse.budget_ratio = 0.25f;
  c.sparse.dense_layers = 1;
  c.sparse.epsilon = 0.5f;
  c.sparse.delta = 0.2f;
  c.sparse.seed = 77;
  const paired_run r = run_paired(m, c, GetParam(), prompt, 64);
  const sa::session_stats &cs = r.cpu, &ds = r.dev;
  std::printf("vattention: largest relative logit error %.3g, keys read %llu (cpu %llu) of %llu\n", r.worst,
              static_cast<unsigned long long>(ds.sparse_keys_attended),
              static_cast<unsigned long long>(cs.sparse_keys_attended),
              static_cast<unsigned long long>(cs.sparse_keys_total));
  EXPECT_LT(cs.sparse_keys_attended, cs.sparse_keys_total) << "the heads sampled";
  EXPECT_NEAR(static_cast<double>(ds.sparse_keys_attended), static_cast<double>(cs.sparse_keys_attended),
              0.01 * static_cast<double>(cs.sparse_keys_attended));
  EXPECT_LT(r.worst, 2e-2);
}

TEST_P(on_device, prr_decoding_matches_the_cpu) {
  // PRR at a quarter of the pages, both outputs: the device forecasts, predicts, repairs and
  // merges as the CPU does (strict mode: Quest's output; superset: the predicted pages too), so
  // the keys read and the logits agree with the CPU's.
  if (!sa::make_backend(GetParam(), 0, 1)->has_prr()) GTEST_SKIP() << "no PRR ops on this backend";
  const auto m = shipped("sa-default-q8_0.gguf");
  const std::vector<int32_t> prompt = prompt_tokens(*m, 700);
  for (sa::speculation mode : {sa::speculation::strict, sa::speculation::superset}) {
    sa::session_config c = config(backend_kind::cpu);
    c.n_batch = 128;
    c.sparse.method = sa::sparse_method::quest;
    c.sparse.budget_ratio = 0.25f;
    c.sparse.dense_layers = 1;
    c.sparse.prr = mode;
    const paired_run r = run_paired(m, c, GetParam(), prompt, 64);
    const sa::session_stats &cs = r.cpu, &ds = r.dev;
    const char* name = mode == sa::speculation::strict ? "prr strict" : "prr superset";
    std::printf("%s: largest relative logit error %.3g, keys read %llu (cpu %llu) of %llu, hit rate %.3f (cpu %.3f)\n",
                name, r.worst, static_cast<unsigned long long>(ds.sparse_keys_attended),
                static_cast<unsigned long long>(cs.sparse_keys_attended),
                static_cast<unsigned long long>(cs.sparse_keys_total), ds.prr_hit_rate, cs.prr_hit_rate);
    EXPECT_LT(cs.sparse_keys_attended, cs.sparse_keys_total / 2) << name << ": the steps ran sparse";
    EXPECT_NEAR(static_cast<double>(ds.sparse_keys_attended), static_cast<double>(cs.sparse_keys_attended),
                0.01 * static_cast<double>(cs.sparse_keys_attended))
        << name;
    EXPECT_NEAR(ds.prr_hit_rate, cs.prr_hit_rate, 0.02) << name;
    EXPECT_LT(r.worst, 2e-2) << name;
  }
}

TEST_P(on_device, retro_decoding_matches_the_cpu) {
  // Quest at a quarter of the pages with RetroAttention (w = 2 and 4 per head, 2 per group):
  // each step runs the window's past rows again, supplements them with the pages they have not
  // seen and rewrites their K/V, on the device as on the CPU. The logits, the keys read and the
  // effective budget (the pages the supplements added) are compared with the CPU's.
  const auto m = shipped("sa-default-q8_0.gguf");
  const std::vector<int32_t> prompt = prompt_tokens(*m, 700);
  struct variant {
    int32_t window;
    sa::select_granularity g;
  };
  for (const variant v : {variant{2, sa::select_granularity::per_head}, variant{4, sa::select_granularity::per_head},
                          variant{2, sa::select_granularity::per_group}}) {
    sa::session_config c = config(backend_kind::cpu);
    c.n_batch = 128;
    c.sparse.method = sa::sparse_method::quest;
    c.sparse.budget_ratio = 0.25f;
    c.sparse.dense_layers = 1;
    c.sparse.granularity = v.g;
    c.sparse.retro_window = v.window;
    const paired_run r = run_paired(m, c, GetParam(), prompt, 48);
    const double worst = r.worst;
    const sa::session_stats &cs = r.cpu, &ds = r.dev;
    std::printf("retro w=%d %s: largest relative logit error %.3g, keys read %llu (cpu %llu), effective budget %.4f (cpu %.4f)\n",
                v.window, v.g == sa::select_granularity::per_head ? "per head" : "per group", worst,
                static_cast<unsigned long long>(ds.sparse_keys_attended),
                static_cast<unsigned long long>(cs.sparse_keys_attended), ds.retro_effective_budget,
                cs.retro_effective_budget);
    EXPECT_GT(cs.retro_effective_budget, 1.0) << "the supplements must add keys, or the test shows nothing";
    EXPECT_NEAR(ds.retro_effective_budget, cs.retro_effective_budget, 0.01 * cs.retro_effective_budget);
    EXPECT_NEAR(static_cast<double>(ds.sparse_keys_attended), static_cast<double>(cs.sparse_keys_attended),
                0.01 * static_cast<double>(cs.sparse_keys_attended));
    EXPECT_LT(worst, 2e-2) << "retro w=" << v.window;
  }
}

TEST_P(on_device, golden_logits_of_the_shipped_model_with_an_f32_cache) {
  // tests/golden: the float64 reference's logits. Decode steps (f32 matrix-vector products and
  // an f32 cache) are held to the CPU's own tolerance.
  const auto m = shipped("sa-default-f16.gguf");
  sa::session_config c = config(GetParam());
  c.kv_type = sa::dtype::f32;
  sa::session s(m, c);
  const std::vector<int32_t> prompt = prompt_tokens(*m, 100);
  sa::session_config cc = config(backend_kind::cpu);
  cc.kv_type = sa::dtype::f32;
  sa::session cpu(m, cc);
  double worst = 0;
  for (size_t t = 0; t < 100; ++t) {
    s.decode(prompt[t]);
    cpu.decode(prompt[t]);
    worst = std::max(worst, rel_err(s.logits(), cpu.logits()));
  }
  EXPECT_LT(worst, 1e-4);
  std::printf("decode steps, f32 cache: largest relative logit error against the CPU %.3g\n", worst);
}

TEST_P(on_device, recorded_steps_replay_and_equal_eager_steps) {
  // Dense decoding, Quest per head and per group (ReSA's selection), whose scores, top pages
  // and attention run on the device from the step buffer's page plan, and the cascade and
  // streaming memories, whose bookkeeping runs there too (a full cache: every step alike).
  const auto m = shipped("sa-default-q8_0.gguf");
  const std::vector<int32_t> prompt = prompt_tokens(*m, 300);
  // The switch that makes a backend run every step eagerly (a diagnostic).
  const char* eager_switch = GetParam() == backend_kind::cuda ? "SA_CUDA_GRAPHS" : "SA_VULKAN_RECORDING";
  for (const char* method : {"dense", "quest", "quest per group", "cascade", "streaming"}) {
    sa::session_config c = config(GetParam());
    if (std::string(method) == "cascade" || std::string(method) == "streaming") {
      c.memory = std::string(method) == "cascade" ? sa::memory_kind::cascade : sa::memory_kind::streaming;
      c.cache_tokens = 16 + 4 * 32;
      c.n_sinks = 16;
    } else if (std::string(method) != "dense") {
      c.sparse.method = sa::sparse_method::quest;
      c.sparse.budget_ratio = 0.125f;
      c.sparse.dense_layers = 1;
      if (std::string(method) == "quest per group") c.sparse.granularity = sa::select_granularity::per_group;
    }
    sa::session recorded(m, c);
    setenv(eager_switch, "0", 1);
    sa::session eager(m, c);
    unsetenv(eager_switch);
    // 24 steps: past two page boundaries (keys 304 and 320), every later step a replay.
    const run_record a = greedy(recorded, prompt, 24), b = greedy(eager, prompt, 24);
    EXPECT_EQ(a.tokens, b.tokens) << method;
    for (size_t i = 0; i < a.logits.size(); ++i) ASSERT_EQ(a.logits[i], b.logits[i]) << method << ", step " << i;
    const sa::backend::step_counts counts = recorded.get_backend().steps();
    std::printf("%s decode steps: %llu eager, %llu recorded, %llu replayed\n", method,
                static_cast<unsigned long long>(counts.eager),
                static_cast<unsigned long long>(counts.recorded),
                static_cast<unsigned long long>(counts.replayed));
    EXPECT_GE(counts.replayed, 16u) << method;
    EXPECT_EQ(eager.get_backend().steps().replayed, 0u) << method;
    EXPECT_EQ(recorded.stats().sparse_keys_attended, eager.stats().sparse_keys_attended) << method;
  }
}

TEST_P(on_device, sessions_on_one_device_share_one_copy_of_the_weights) {
  const auto m = shipped("sa-default-q8_0.gguf");
  sa::session a(m, config(GetParam()));
  sa::session b(m, config(GetParam()));
  sa::session cpu(m, config(backend_kind::cpu));
  EXPECT_EQ(&a.weights(), &b.weights());
  EXPECT_NE(&a.weights(), &cpu.weights());
}

TEST_P(on_device, a_session_saved_on_the_device_resumes_there_bitwise_and_on_the_cpu) {
  const auto m = shipped("sa-default-q8_0.gguf");
  const std::vector<int32_t> prompt = prompt_tokens(*m, 400);
  const std::string db = sa_test::temp_path("device.db");
  for (sa::memory_kind kind : {sa::memory_kind::dense, sa::memory_kind::cascade}) {
    sa::session_config c = config(GetParam());
    c.memory = kind;
    c.cache_tokens = 16 + 4 * 32;
    c.n_sinks = 16;
    c.n_batch = 64;
    c.n_ctx = 1024;
    sa::session a(m, c);
    a.prefill(prompt, nullptr);
    // Save, then run on: the reference continuation.
    auto saver = std::make_unique<sa::store::session_saver>(db, kind == sa::memory_kind::dense ? "d" : "c");
    saver->save(a);
    std::vector<std::vector<float>> want;
    int32_t t = a.sample();
    std::vector<int32_t> fed;
    for (int i = 0; i < 16; ++i) {
      fed.push_back(t);
      a.decode(t, &t);
      want.push_back(a.logits());
    }
    for (sa::backend_kind where : {GetParam(), backend_kind::cpu}) {
      std::unique_ptr<sa::store::session_saver> s2;
      auto b = sa::store::session_saver::resume(m, db, kind == sa::memory_kind::dense ? "d" : "c",
                                                where, 0, 0, s2);
      for (int i = 0; i < 16; ++i) {
        b->decode(fed[static_cast<size_t>(i)], nullptr);
        if (where == GetParam())
          ASSERT_EQ(b->logits(), want[static_cast<size_t>(i)]) << "resumed on the device, step " << i;
        else
          ASSERT_LT(rel_err(b->logits(), want[static_cast<size_t>(i)]), 1e-2) << "resumed on the CPU, step " << i;
      }
    }
  }
  std::remove(db.c_str());
  std::remove((db + "-wal").c_str());
  std::remove((db + "-shm").c_str());
}

TEST_P(on_device, sampling_on_the_device_draws_the_cpu_tokens) {
  // Temperature sampling: the device draws with the session's generator from its own logits;
  // with logits this close the draws agree unless a uniform falls within rounding of a boundary.
  const auto m = shipped("sa-default-q8_0.gguf");
  const std::vector<int32_t> prompt = prompt_tokens(*m, 200);
  sa::session_config c = config(backend_kind::cpu);
  c.kv_type = sa::dtype::f32;
  c.sampling.temperature = 0.8f;
  c.sampling.top_k = 40;
  c.sampling.top_p = 0.95f;
  c.sampling.seed = 11;
  sa::session cpu(m, c);
  c.backend = GetParam();
  sa::session dev(m, c);
  const run_record want = greedy(cpu, prompt, 32);
  const run_record got = greedy(dev, prompt, 32, &want.tokens);
  // The draws: sample() after the prompt, and each decode step's next token.
  cpu.reset();
  dev.reset();
  cpu.prefill(prompt, nullptr);
  dev.prefill(prompt, nullptr);
  int agree = 0;
  for (int i = 0; i < 32; ++i) agree += cpu.sample() == dev.sample();
  EXPECT_GE(agree, 31) << "draws from the same logits and generator";
  (void)got;
}

}  // namespace

// sa-bench gpu sparse: Quest on the GPU, per layer and end to end.
//
// Per layer (32 query / 8 KV heads x 128, f16 cache, pages of 16, one sink and one local page):
// the page scores, the top pages and the attention over them, each timed alone as a recorded
// step over buffers rotated past the L2 cache, against the bytes the step must move — the
// summaries of every page (max and min rows, in the type the backend keeps them: f16 on CUDA)
// and the K and V of the selected pages (per
// query head with per-head selection, once per KV head with per-group selection).
//
// End to end (a model file): decode ms/token at each depth for dense decoding, Quest 1/16 (per
// head), Quest 1/16 per group with ReSA's rectification (f = 32), RetroAttention (w = 2, 4),
// Quest with PRR's speculation (superset and strict, r = 1), vAttention (eps 0.05, top-k 1/16)
// and the cascade (a 4K cache in 8 sub-caches), with the KV bytes each step read. The
// full-cache methods start from one dense prefill whose memory is copied into each session.
// After its timed steps each method but dense decodes one more step inside a profiler range
// (`ncu --profile-from-start off` profiles that step alone).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backend/step_buffer.h"
#include "core/error.h"
#include "gpu_bench_util.h"
#include "memory/memory_state.h"
#include "model/model.h"
#include "policy/quest.h"
#include "random_model.h"
#include "session/session.h"
#ifdef SA_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#include "launchers.h"
#endif

namespace {

using namespace gpu_util;
using clock_type = std::chrono::steady_clock;

#ifdef SA_WITH_CUDA
template <typename T>
T* dptr(const sa::tensor& t) {
  return reinterpret_cast<T*>(static_cast<sa::cuda::cuda_buffer*>(t.buf)->data() + t.offset);
}
#endif

void sparse_layer(const gpu_bench_options& o, double bw, json_out& js) {
  const std::unique_ptr<sa::backend> be_ptr = bench_backend(o);
  sa::backend& be = *be_ptr;
  sa::step_buffer meta(be);
  const int32_t n_heads = 32, n_kv = 8, hd = 128, page = 16;
  const float scale = 1.0f / std::sqrt(128.0f);
#ifdef SA_WITH_CUDA
  auto* cu = dynamic_cast<sa::cuda::cuda_backend*>(&be);
#endif
  const sa::dtype sum_type = be.page_summary_type(sa::dtype::f16, hd);
  std::printf("Quest per layer, 1 row, %d query / %d KV heads x %d, f16 cache, pages of %d\n"
              "(floor: %s summaries of every page + K and V of the selected pages, once per ranker)\n",
              n_heads, n_kv, hd, page, sa::traits(sum_type).name);
  std::printf("%8s %7s %6s %9s %9s %9s %9s %10s %10s %9s\n", "keys", "budget", "select", "scores us", "top us",
              "attend us", "step us", "floor us", "% floor", "dense us");
  for (int L : o.lengths) {
    const int64_t n_pages = (L + page - 1) / page;
    const double kv_bytes = static_cast<double>(L) * n_kv * hd * 2 * 2;
    const double sum_bytes =
        static_cast<double>(n_pages) * n_kv * 2 * hd * static_cast<double>(sa::traits(sum_type).block_bytes);
    const int n_buf = std::max(2, static_cast<int>(std::ceil(1.5e9 / (kv_bytes + sum_bytes))));
    std::vector<sa::buffer_ptr> owned;
    std::vector<sa::tensor> ks, vs, sums;
    const std::vector<uint8_t> host = random_matrix(sa::dtype::f16, hd, int64_t{n_kv} * L, 1.0f, 3);
    for (int b = 0; b < n_buf; ++b) {
      for (int kv = 0; kv < 2; ++kv) {
        sa::tensor t = sa::new_tensor(be, owned, sa::dtype::f16, hd, int64_t{n_kv} * L);
        be.upload(*t.buf, 0, host.data(), host.size());
        (kv == 0 ? ks : vs).push_back(t);
      }
      sums.push_back(sa::new_tensor(be, owned, sum_type, hd, n_kv * n_pages * 2));
      be.summarize_pages(ks.back(), L, page, L, 0, n_pages, sums.back(), n_pages);
    }
    const std::vector<uint8_t> qh = random_matrix(sa::dtype::f32, hd, n_heads, 1.0f, 5);
    sa::tensor q = sa::new_f32_tensor(be, owned, hd, n_heads);
    be.upload(*q.buf, 0, qh.data(), qh.size());
    sa::tensor out = sa::new_f32_tensor(be, owned, hd, n_heads), lse = sa::new_f32_tensor(be, owned, n_heads, 1);
    sa::tensor scores = sa::new_f32_tensor(be, owned, n_pages, n_heads);
    sa::tensor pages = sa::new_tensor(be, owned, sa::dtype::i32, n_pages, n_heads);
    const int calls = std::max(n_buf, 20);
    for (float ratio : {1.0f / 16, 1.0f / 8}) {
      sa::sparse_config c;
      c.method = sa::sparse_method::quest;
      c.budget_ratio = ratio;
      const sa::page_plan pl = sa::plan_pages(c, L);
      meta.clear();
      const int32_t len = L;
      const int32_t plan_v[4] = {len, static_cast<int32_t>(pl.n_pages), static_cast<int32_t>(pl.n_selected),
                                 static_cast<int32_t>(pl.take)};
      const sa::tensor plan = meta.put(std::span<const int32_t>(plan_v, 4));
      const sa::tensor kv_len = meta.put(std::span<const int32_t>(&len, 1));
      meta.flush();
      const double dense_s = time_recorded(be, next_key(), calls, [&](int i) {
        const size_t b = static_cast<size_t>(i % n_buf);
        const sa::kv_view kv{&ks[b], &vs[b], L, 0, nullptr};
        be.attention(q, kv, n_heads, n_kv, hd, kv_len, L, scale, out, lse, nullptr);
      });
      for (bool group : {false, true}) {
        const int32_t rankers = group ? n_kv : n_heads;
        auto select = [&](int i) {
          be.select_pages(q, sums[static_cast<size_t>(i % n_buf)], n_pages, n_heads, n_kv, hd, group, c.sink_pages,
                          c.local_pages, plan, n_pages, scores, pages, pl.n_selected);
        };
        auto attend = [&](int i) {
          const size_t b = static_cast<size_t>(i % n_buf);
          const sa::kv_view kv{&ks[b], &vs[b], L, 0, nullptr};
          be.attention_pages(q, kv, n_heads, n_kv, hd, page, group, pages, pl.n_selected, plan, scale, out, lse);
        };
        double scores_s = NAN, top_s = NAN;
#ifdef SA_WITH_CUDA
        if (cu) {
          scores_s = time_recorded(be, next_key(), calls, [&](int i) {
            sa::cuda::check(sa::cuda::launch_quest_scores(dptr<const float>(q), dptr<const void>(sums[static_cast<size_t>(i % n_buf)]),
                                                          static_cast<sa::cuda::etype>(sum_type), n_pages, n_heads, n_kv, hd, group, dptr<const int32_t>(plan),
                                                          n_pages, dptr<float>(scores), cu->stream()),
                            "quest scores");
          });
          top_s = time_recorded(be, next_key(), calls, [&](int) {
            sa::cuda::check(sa::cuda::launch_top_pages(dptr<const float>(scores), rankers, n_pages, c.sink_pages,
                                                       c.local_pages, dptr<const int32_t>(plan), dptr<int32_t>(pages),
                                                       pl.n_selected, cu->stream()),
                            "top pages");
          });
        }
#endif
        select(0);
        const double attend_s = time_recorded(be, next_key(), calls, attend);
        const double step_s = time_recorded(be, next_key(), calls, [&](int i) {
          select(i);
          attend(i);
        });
        const double sel_bytes = static_cast<double>(rankers) * static_cast<double>(pl.selected_keys) * hd * 2 * 2;
        const double floor_s = (sum_bytes + sel_bytes) / (bw * 1e12);
        std::printf("%8d %7s %6s %9.1f %9.1f %9.1f %9.1f %10.1f %9.1f%% %9.1f\n", L, ratio < 0.1f ? "1/16" : "1/8",
                    group ? "group" : "head", scores_s * 1e6, top_s * 1e6, attend_s * 1e6, step_s * 1e6, floor_s * 1e6,
                    100 * floor_s / step_s, dense_s * 1e6);
        js.line(fmt("{\"bench\":\"sparse_layer\",\"keys\":%d,\"budget\":%.4f,\"select\":\"%s\",\"scores_us\":%.3f,"
                    "\"top_us\":%.3f,\"attend_us\":%.3f,\"step_us\":%.3f,\"floor_us\":%.3f,\"fraction_of_floor\":%.4f,"
                    "\"dense_us\":%.3f}",
                    L, ratio, group ? "group" : "head", scores_s * 1e6, top_s * 1e6, attend_s * 1e6, step_s * 1e6,
                    floor_s * 1e6, floor_s / step_s, dense_s * 1e6));
        std::fflush(stdout);
      }
    }
  }
  std::printf("\n");
}

// A memory's state held in host memory: what the session store would write, kept in a map.
class state_copy final : public sa::state_writer, public sa::state_reader {
 public:
  bool has(const std::string& name) override { return blobs_.count(name) > 0; }
  void keep(const std::string&) override {}
  void put(const std::string& name, const void* data, size_t n, sa::blob_kind) override {
    const auto* p = static_cast<const uint8_t*>(data);
    blobs_[name].assign(p, p + n);
  }
  std::vector<uint8_t> get(const std::string& name) override { return blob(name); }
  void get_into(const std::string& name, void* dst, size_t n) override {
    const std::vector<uint8_t>& b = blob(name);
    if (b.size() != n) sa::fail(SA_ERR_STORE, "blob %s holds %zu bytes, not %zu", name.c_str(), b.size(), n);
    std::copy(b.begin(), b.end(), static_cast<uint8_t*>(dst));
  }

 private:
  const std::vector<uint8_t>& blob(const std::string& name) {
    const auto it = blobs_.find(name);
    if (it == blobs_.end()) sa::fail(SA_ERR_STORE, "no blob %s", name.c_str());
    return it->second;
  }
  std::map<std::string, std::vector<uint8_t>> blobs_;
};

void sparse_decode(const gpu_bench_options& o, json_out& js) {
  const auto m = sa::model::load(o.model, true);
  const sa::hparams& hp = m->hp();
  const double wbytes = weight_bytes_per_token(*m);
  std::printf("sparse decode end to end, %s (%d layers, %.2f GB of weights per token, f16 cache)\n", o.model.c_str(),
              hp.n_layers, wbytes / 1e9);
  std::printf("(KV MB/token: K and V bytes attention read, from the session's stats)\n");
  std::printf("%8s %-34s %10s %10s %9s %12s\n", "depth", "method", "tok/s", "ms/token", "vs dense", "KV MB/token");
  std::mt19937 rng(17);
  std::uniform_int_distribution<int32_t> tok(300, hp.n_vocab - 3);
  struct method {
    const char* name;
    sa::session_config c;
    const char* key;  // its --methods name
  };
  for (int depth : o.depths) {
    const sa::session_config base = bench_session_config(o, depth + o.steps + 64);
    std::vector<method> methods;
    methods.push_back({"dense", base, "dense"});
    sa::session_config q = base;
    q.sparse.method = sa::sparse_method::quest;
    q.sparse.budget_ratio = 1.0f / 16;
    methods.push_back({"Quest 1/16", q, "quest"});
    sa::session_config qg = q;  // one ranking per KV head: each selected page read once for the group
    qg.sparse.granularity = sa::select_granularity::per_group;
    methods.push_back({"Quest 1/16 per group", qg, "quest-group"});
    sa::session_config r = q;
    r.sparse.granularity = sa::select_granularity::per_group;
    r.sparse.rectify_every = 32;
    methods.push_back({"Quest 1/16 per group + ReSA f=32", r, "resa"});
    for (int32_t w : {2, 4}) {
      sa::session_config rt = q;
      rt.sparse.retro_window = w;
      methods.push_back({w == 2 ? "Quest 1/16 + RetroAttention w=2" : "Quest 1/16 + RetroAttention w=4", rt,
                         w == 2 ? "retro:2" : "retro:4"});
    }
    for (sa::speculation mode : {sa::speculation::superset, sa::speculation::strict}) {
      sa::session_config pr = q;
      pr.sparse.prr = mode;
      const bool superset = mode == sa::speculation::superset;
      methods.push_back({superset ? "Quest 1/16 + PRR superset r=1" : "Quest 1/16 + PRR strict r=1", pr,
                         superset ? "prr" : "prr-strict"});
    }
    sa::session_config v = q;
    v.sparse.method = sa::sparse_method::vattention;
    v.sparse.epsilon = 0.05f;
    methods.push_back({"vAttention eps 0.05, top-k 1/16", v, "vattention"});
    sa::session_config cas = base;
    cas.memory = sa::memory_kind::cascade;
    cas.cache_tokens = 4096;
    cas.n_cascades = 8;
    cas.n_sinks = 64;
    methods.push_back({"cascade 4K, 8 sub-caches", cas, "cascade"});

    std::vector<int32_t> prompt(static_cast<size_t>(std::max(depth, 1)));
    for (int32_t& t : prompt) t = tok(rng);
    state_copy dense_state;
    std::vector<float> dense_logits;
    double dense_s = NAN;
    for (const method& me : methods) {
      // Dense always runs: the others start from its prefill and are compared with it.
      if (&me != &methods.front() && std::find(o.methods.begin(), o.methods.end(), me.key) == o.methods.end())
        continue;
      sa::session s(m, me.c);
      if (&me == &methods.front() || me.c.memory != sa::memory_kind::dense) {
        s.prefill(prompt, nullptr);
        if (&me == &methods.front()) {
          s.mutable_memory().write_state(dense_state);
          dense_logits = s.logits();
        }
      } else {  // the same prefill, copied
        s.mutable_memory().read_state(dense_state);
        s.restore_history(prompt, dense_logits);
      }
      int32_t next = s.sample();
      for (int i = 0; i < 2; ++i) s.decode(next, &next);  // the first steps of a bucket record
      uint64_t kv_read = 0;
      const auto t0 = clock_type::now();
      for (int i = 0; i < o.steps; ++i) {
        s.decode(next, &next);
        kv_read += s.stats().kv_bytes_read_last_call;
      }
      const double sec = std::chrono::duration<double>(clock_type::now() - t0).count() / o.steps;
      if (&me == &methods.front()) dense_s = sec;
      // One more step, untimed, in a profiler range: a profile sees one step of each method.
      if (&me != &methods.front()) profiled([&] { s.decode(next, &next); });
      const double kv_per_token = static_cast<double>(kv_read) / o.steps * 2;  // K and V
      std::printf("%8d %-34s %10.1f %10.3f %8.2fx %12.1f\n", depth, me.name, 1.0 / sec, sec * 1e3, dense_s / sec,
                  kv_per_token / 1e6);
      js.line(fmt("{\"bench\":\"sparse_decode\",\"model\":\"%s\",\"depth\":%d,\"method\":\"%s\",\"tok_s\":%.3f,"
                  "\"ms\":%.4f,\"vs_dense\":%.4f,\"kv_bytes_per_token\":%.0f}",
                  o.model.c_str(), depth, me.name, 1.0 / sec, sec * 1e3, dense_s / sec, kv_per_token));
      std::fflush(stdout);
    }
  }
  std::printf("\n");
}

}  // namespace

void gpu_sparse(const gpu_bench_options& o, double bw, gpu_util::json_out& js) {
  sparse_layer(o, bw, js);
  if (!o.model.empty()) sparse_decode(o, js);
}

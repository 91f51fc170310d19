// sa-bench gpu sparse: Quest on the GPU, per layer and end to end.
//
// Per layer (32 query / 8 KV heads x 128, f16 cache, pages of 16, one sink and one local page):
// the page scores, the top pages and the attention over them, each timed alone as a recorded
// step over buffers rotated past the L2 cache, against the bytes the step must move — the
// summaries of every page (max and min rows, in the type the backend keeps them: f16 on CUDA)
// and the K and V of the selected pages (per
// query head with per-head selection, once per KV head with per-group selection). Then PRR's
// layer (prr_layer) at set hit rates beside Quest's select + attend.
//
// End to end (a model file): decode ms/token at each depth for dense decoding, Quest 1/16 (per
// head), Quest 1/16 per group with ReSA's rectification (f = 32), RetroAttention (w = 2, 4),
// Quest with PRR's speculation (superset and strict, r = 1, per head; superset per group, with
// the hit rate the session counted; with --profile also r chosen by it, per head and per group),
// vAttention (eps 0.05, top-k 1/16)
// and the cascade (a 4K cache in 8 sub-caches), with the KV bytes each step read. The
// full-cache methods start from one dense prefill whose memory is copied into each session.
// After its timed steps each method but dense decodes one more step inside a profiler range
// (`ncu --profile-from-start off` profiles that step alone).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
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

// PRR's layer (sdk/policy/prr.cpp: speculate, the selection, repair; the same ops in the same
// order and queues), timed as a recorded step against Quest's select + attend (quest_s), for a
// P holding `hit` of the pages Quest picks by score and other pages for the rest: attention over
// P on the second queue beside the selection; after both, the mask of the missed pages; then
// the predictor's update and the next step's P on the second queue beside the missed pages'
// attention, merged into P's output. Returns the table's rows.
std::string prr_layer(sa::backend& be, const sa::sparse_config& c, const sa::page_plan& pl, int32_t L, bool group,
                      const sa::tensor& q, const std::vector<sa::tensor>& ks, const std::vector<sa::tensor>& vs,
                      const std::function<void(int)>& select, const sa::tensor& plan, const sa::tensor& a,
                      const sa::tensor& scores, double quest_s, int calls, json_out& js) {
  const int32_t n_heads = 32, n_kv = 8, hd = 128, page = 16;
  const float scale = 1.0f / std::sqrt(128.0f);
  const int32_t rankers = group ? n_kv : n_heads;
  const int64_t n_pages = pl.n_pages, bound = pl.n_selected;
  const int n_buf = static_cast<int>(ks.size());
  std::vector<sa::buffer_ptr> owned;
  // P's plan (r = 1: as many pages as Quest's, every page observed).
  const sa::tensor plan_p = upload_ints(be, owned, {L, static_cast<int32_t>(n_pages), static_cast<int32_t>(pl.n_selected),
                                  static_cast<int32_t>(pl.take), static_cast<int32_t>(n_pages)}, 5, 1);
  sa::tensor p_next = sa::new_tensor(be, owned, sa::dtype::i32, bound, rankers);
  sa::tensor missed = sa::new_tensor(be, owned, sa::dtype::i32, bound, rankers);
  sa::tensor counts = sa::new_tensor(be, owned, sa::dtype::i32, rankers, 1);
  sa::tensor state = sa::new_f32_tensor(be, owned, 2 * n_pages, rankers);
  const std::vector<float> zeros(static_cast<size_t>(2 * n_pages * rankers), 0.0f);
  be.upload(*state.buf, state.offset, zeros.data(), zeros.size() * sizeof(float));
  sa::tensor forecast = sa::new_f32_tensor(be, owned, n_pages, rankers);
  sa::tensor out = sa::new_f32_tensor(be, owned, hd, n_heads), lse = sa::new_f32_tensor(be, owned, n_heads, 1);
  sa::tensor out_b = sa::new_f32_tensor(be, owned, hd, n_heads), lse_b = sa::new_f32_tensor(be, owned, n_heads, 1);
  // Quest's pages (every buffer holds the same keys, so every call selects these).
  select(0);
  std::vector<int32_t> a_h(static_cast<size_t>(rankers * bound));
  be.download(*a.buf, a.offset, a_h.data(), a_h.size() * sizeof(int32_t));
  std::string rows;
  std::mt19937 rng(29);
  for (double hit : {1.0, 0.84, 0.5}) {
    std::vector<int32_t> p_h(a_h.size());
    for (int32_t r = 0; r < rankers; ++r) {
      const int32_t* sel = a_h.data() + r * bound;
      std::vector<int32_t> p, picked, others;
      std::vector<char> in_a(static_cast<size_t>(n_pages), 0);
      for (int64_t i = 0; i < pl.n_selected; ++i) {
        in_a[static_cast<size_t>(sel[i])] = 1;
        (sa::page_is_forced(c, sel[i], n_pages) ? p : picked).push_back(sel[i]);
      }
      for (int32_t pg = 0; pg < n_pages; ++pg)
        if (!in_a[static_cast<size_t>(pg)]) others.push_back(pg);
      std::shuffle(picked.begin(), picked.end(), rng);
      std::shuffle(others.begin(), others.end(), rng);
      const auto keep = static_cast<size_t>(std::lround(hit * static_cast<double>(picked.size())));
      p.insert(p.end(), picked.begin(), picked.begin() + static_cast<std::ptrdiff_t>(keep));
      p.insert(p.end(), others.begin(), others.begin() + static_cast<std::ptrdiff_t>(picked.size() - keep));
      std::sort(p.begin(), p.end());
      std::copy(p.begin(), p.end(), p_h.begin() + r * bound);
    }
    const sa::tensor p_tab = upload_ints(be, owned, p_h, bound, rankers);
    auto kv_of = [&](int i) {
      const size_t b = static_cast<size_t>(i % n_buf);
      return sa::kv_view{&ks[b], &vs[b], L, 0, nullptr};
    };
    auto attend_p = [&](int i) {
      be.attention_pages(q, kv_of(i), n_heads, n_kv, hd, page, group, p_tab, bound, plan_p, scale, out, lse);
    };
    // P's attention beside the selection (or, serial, before it), then the repair (the mask and
    // the missed pages' attention, merged), then the tail (the predictor's update and the next
    // step's P) beside the repair's attention.
    auto layer = [&](int i, bool side, bool repair, bool tail) {
      if (side) be.begin_side();
      attend_p(i);
      if (side) be.end_side();
      select(i);
      if (side) be.join_side();
      if (!repair) return;
      be.mask_pages(a, bound, plan, p_tab, bound, plan_p, rankers, false, missed, &counts);
      if (tail) {
        be.begin_side();
        be.update_predictor(state, n_pages, rankers, scores, n_pages, plan_p, 0.5f, 0.1f, 0.8f);
        be.predict_pages(state, n_pages, rankers, 0.8f, c.sink_pages, c.local_pages, plan_p, n_pages, forecast,
                         p_next, bound);
        be.end_side();
      }
      be.attention_kept_pages(q, kv_of(i), n_heads, n_kv, hd, page, group, missed, bound, plan, counts, scale, true,
                              out, lse, out_b, lse_b);
      if (tail) be.join_side();
    };
    const double p_s = time_recorded(be, next_key(), calls, attend_p);
    const double serial_s = time_recorded(be, next_key(), calls, [&](int i) { layer(i, false, false, false); });
    const double beside_s = time_recorded(be, next_key(), calls, [&](int i) { layer(i, true, false, false); });
    const double repair_s = time_recorded(be, next_key(), calls, [&](int i) { layer(i, true, true, false); });
    const double full_s = time_recorded(be, next_key(), calls, [&](int i) { layer(i, true, true, true); });
    rows += fmt("%8d %7s %6s %5.2f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %7.2fx\n", L,
                c.budget_ratio < 0.1f ? "1/16" : "1/8", group ? "group" : "head", hit, p_s * 1e6, serial_s * 1e6,
                beside_s * 1e6, repair_s * 1e6, full_s * 1e6, quest_s * 1e6, quest_s / repair_s);
    js.line(fmt("{\"bench\":\"prr_layer\",\"keys\":%d,\"select\":\"%s\",\"n_selected\":%lld,\"hit\":%.2f,"
                "\"p_attend_us\":%.3f,\"p_then_select_us\":%.3f,\"p_beside_select_us\":%.3f,\"repaired_us\":%.3f,"
                "\"with_tail_us\":%.3f,\"quest_step_us\":%.3f}",
                L, group ? "group" : "head", static_cast<long long>(pl.n_selected), hit, p_s * 1e6, serial_s * 1e6,
                beside_s * 1e6, repair_s * 1e6, full_s * 1e6, quest_s * 1e6));
  }
  return rows;
}

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
  std::vector<std::string> prr_rows;
  for (int L : o.lengths) {
    const cache_copies cache = make_cache_copies(be, n_kv, hd, page, L);
    const std::vector<sa::tensor>& ks = cache.ks;
    const std::vector<sa::tensor>& vs = cache.vs;
    const std::vector<sa::tensor>& sums = cache.sums;
    const int64_t n_pages = cache.n_pages;
    const double sum_bytes = cache.sum_bytes;
    const int n_buf = cache.count();
    const layer_row row_t = make_layer_row(be, n_heads, hd, n_pages);
    const sa::tensor &q = row_t.q, &out = row_t.out, &lse = row_t.lse, &scores = row_t.scores, &pages = row_t.pages;
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
        if (be.has_prr())
          prr_rows.push_back(prr_layer(be, c, pl, L, group, q, ks, vs, select, plan, pages, scores, step_s, calls, js));
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
  if (prr_rows.empty()) return;
  std::printf("PRR per layer (superset, r = 1; P holds `hit` of the pages Quest picks by score, others for the\n"
              "rest): P's attention alone; then the selection after it (one queue) or beside it; + the repair\n"
              "(mask, the missed pages' attention merged: PRR's critical path); + the tail (the update and\n"
              "the next step's P beside the repair, joined at the end here, beside the next products in a\n"
              "decode step); Quest's select + attend; speedup = Quest / repaired\n");
  std::printf("%8s %7s %6s %5s %8s %8s %8s %8s %8s %8s %8s\n", "keys", "budget", "select", "hit", "P us",
              "P,sel", "P|sel", "repaired", "+tail", "Quest", "speedup");
  for (const std::string& r : prr_rows) std::printf("%s", r.c_str());
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
    sa::session_config prg = qg;
    prg.sparse.prr = sa::speculation::superset;
    methods.push_back({"Quest 1/16 per group + PRR superset", prg, "prr-group"});
    if (!o.prr_profile.empty()) {  // r by context length from a profile (sa-bench gpu prr-profile)
      sa::session_config pp = q;
      pp.sparse.prr = sa::speculation::superset;
      pp.prr_profile = o.prr_profile;
      methods.push_back({"Quest 1/16 + PRR superset, profiled r", pp, "prr-profile"});
      pp.sparse.granularity = sa::select_granularity::per_group;
      methods.push_back({"Quest 1/16 per group + PRR, profiled r", pp, "prr-group-profile"});
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
      if (me.c.sparse.prr != sa::speculation::none)
        std::printf("%8s (PRR: r %.3f, hit rate %.3f, %.1f missed pages a selection)\n", "", s.stats().prr_ratio,
                    s.stats().prr_hit_rate, s.stats().prr_missed_pages);
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

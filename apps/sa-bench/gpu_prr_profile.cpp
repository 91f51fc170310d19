// sa-bench gpu prr-profile: the profile from which PRR chooses its speculation budget r by
// context length (sdk/policy/prr_profile.h), for a model on a device.
//
// For each context length L (--keys) and each selection granularity (--select), on one sparse
// layer of the model's shape (its query, KV heads and head size; an f16 cache, pages and budget
// as the options say): the selection's time T_sel(L) (page scores and the top pages: Quest's
// select_pages, the op a decode step runs) and the speculative attention's T_spec(L, r) over a
// predicted set of the size PRR gives r (the forced pages + ceil(r * take) others, scattered),
// for each r of the grid, each timed alone as a recorded step over cache copies rotated past
// the L2 cache. The file keeps one profile per (model, device, settings): this run's replace
// those with the same key, the others stay.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/step_buffer.h"
#include "core/error.h"
#include "gpu_bench_util.h"
#include "model/model.h"
#include "policy/prr.h"
#include "policy/prr_profile.h"
#include "policy/quest.h"
#include "store/model_fingerprint.h"

namespace {

using namespace gpu_util;

// The r grid: below 1 the prediction covers part of the selection (the repair attends the rest).
constexpr float k_ratios[] = {0.125f, 0.25f, 0.5f, 0.75f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f};

}  // namespace

void gpu_prr_profile(const gpu_bench_options& o, json_out& js) {
  if (o.model.empty()) sa::fail(SA_ERR_INVALID_ARG, "prr-profile needs --model: the profile is the model's");
  if (o.prr_profile.empty()) sa::fail(SA_ERR_INVALID_ARG, "prr-profile needs --profile: the file to write");
  const auto m = sa::model::load(o.model, true);
  const sa::hparams& hp = m->hp();
  const std::unique_ptr<sa::backend> be_ptr = bench_backend(o);
  sa::backend& be = *be_ptr;
  const std::vector<sa::device_info> devices = sa::list_devices(o.backend);
  const std::string device = devices.at(static_cast<size_t>(o.device)).name;
  const uint64_t fingerprint = sa::store::model_fingerprint(*m);
  // Keep the file's other profiles; a file that cannot be read is not overwritten.
  std::vector<sa::prr_profile> file;
  if (std::filesystem::exists(o.prr_profile)) file = sa::read_prr_profiles(o.prr_profile);

  sa::sparse_config c;
  c.method = sa::sparse_method::quest;
  c.page_size = o.page_size;
  c.budget_tokens = o.budget_tokens;
  c.budget_ratio = o.budget_ratio;
  c.sink_pages = o.sink_pages;
  c.local_pages = o.local_pages;
  c.min_pages = o.min_pages;
  sa::check(c);
  const int32_t n_heads = hp.n_heads, n_kv = hp.n_kv_heads, hd = hp.head_dim, page = c.page_size;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::printf("PRR profile of %s on %s %s: microseconds per sparse layer (%d query / %d KV heads x %d, f16 cache,\n"
              "pages of %d, budget %s), the selection and the attention over the predicted pages for each r;\n"
              "r* = the largest r whose attention the selection's time covers\n",
              o.model.c_str(), be.name(), device.c_str(), n_heads, n_kv, hd, page,
              c.budget_tokens > 0 ? fmt("%d tokens", c.budget_tokens).c_str() : fmt("%g", c.budget_ratio).c_str());
  std::vector<sa::prr_profile> made;
  for (const std::string& sel : o.select) {
    sa::prr_profile p;
    c.granularity = sel == "group" ? sa::select_granularity::per_group : sa::select_granularity::per_head;
    p.key = sa::prr_key(fingerprint, be.name(), device, c, sa::dtype::f16);
    p.n_heads = n_heads;
    p.n_kv_heads = n_kv;
    p.head_dim = hd;
    p.ratios.assign(std::begin(k_ratios), std::end(k_ratios));
    made.push_back(std::move(p));
  }
  std::mt19937 rng(41);
  sa::step_buffer meta(be);
  for (int L : o.lengths) {
    const cache_copies cache = make_cache_copies(be, n_kv, hd, page, L);
    const int64_t n_pages = cache.n_pages;
    const int calls = std::max(cache.count(), 20);
    const layer_row row_t = make_layer_row(be, n_heads, hd, n_pages);
    const sa::tensor &q = row_t.q, &out = row_t.out, &lse = row_t.lse, &scores = row_t.scores, &pages = row_t.pages;
    for (sa::prr_profile& p : made) {
      c.granularity = p.key.granularity;
      const bool group = c.granularity == sa::select_granularity::per_group;
      const int32_t rankers = group ? n_kv : n_heads;
      const sa::page_plan pl = sa::plan_pages(c, L);
      if (pl.dense) {
        std::printf("%8d %6s: the budget covers every page (dense), not profiled\n", L, group ? "group" : "head");
        continue;
      }
      meta.clear();
      const int32_t plan_v[4] = {L, static_cast<int32_t>(pl.n_pages), static_cast<int32_t>(pl.n_selected),
                                 static_cast<int32_t>(pl.take)};
      const sa::tensor plan = meta.put(std::span<const int32_t>(plan_v, 4));
      meta.flush();
      sa::prr_profile::row row;
      row.keys = L;
      row.select_us = 1e6 * time_recorded(be, next_key(), calls, [&](int i) {
        be.select_pages(q, cache.sums[static_cast<size_t>(i % cache.count())], n_pages, n_heads, n_kv, hd, group,
                        c.sink_pages, c.local_pages, plan, n_pages, scores, pages, pl.n_selected);
      });
      // The unforced pages, shuffled per ranker: each P takes the forced pages and a prefix.
      std::vector<int32_t> forced, others;
      for (int32_t pg = 0; pg < n_pages; ++pg) (sa::page_is_forced(c, pg, n_pages) ? forced : others).push_back(pg);
      for (float r : p.ratios) {
        const int64_t take = sa::predicted_take(r, pl);
        const int64_t n_p = static_cast<int64_t>(forced.size()) + take;
        std::vector<int32_t> table(static_cast<size_t>(rankers * n_p));
        for (int32_t k = 0; k < rankers; ++k) {
          std::shuffle(others.begin(), others.end(), rng);
          std::vector<int32_t> set(forced);
          set.insert(set.end(), others.begin(), others.begin() + take);
          std::sort(set.begin(), set.end());
          std::copy(set.begin(), set.end(), table.begin() + k * n_p);
        }
        std::vector<sa::buffer_ptr> held;
        const sa::tensor p_tab = upload_ints(be, held, table, n_p, rankers);
        const sa::tensor plan_p = upload_ints(be, held, {L, static_cast<int32_t>(n_pages), static_cast<int32_t>(n_p),
                                                       static_cast<int32_t>(take), static_cast<int32_t>(n_pages)}, 5, 1);
        row.speculate_us.push_back(1e6 * time_recorded(be, next_key(), calls, [&](int i) {
          be.attention_pages(q, cache.kv(i, L), n_heads, n_kv, hd, page, group, p_tab, n_p, plan_p, scale, out, lse);
        }));
      }
      p.rows.push_back(row);
      std::string line = fmt("%8d %6s select %7.1f | speculate", L, group ? "group" : "head", row.select_us);
      std::string json = fmt("{\"bench\":\"prr_profile\",\"keys\":%d,\"select\":\"%s\",\"select_us\":%.3f,\"speculate_us\":[",
                             L, group ? "group" : "head", row.select_us);
      for (size_t j = 0; j < row.speculate_us.size(); ++j) {
        line += fmt(" %g:%.1f", static_cast<double>(p.ratios[j]), row.speculate_us[j]);
        json += fmt("%s%.3f", j ? "," : "", row.speculate_us[j]);
      }
      std::printf("%s\n", line.c_str());
      js.line(json + "]}");
      std::fflush(stdout);
    }
  }
  std::printf("\nr* by context length (the rule sessions apply, interpolated):\n%8s", "keys");
  for (const sa::prr_profile& p : made)
    std::printf(" %8s", p.key.granularity == sa::select_granularity::per_group ? "group" : "head");
  std::printf("\n");
  for (int L : o.lengths) {
    std::printf("%8d", L);
    for (const sa::prr_profile& p : made)
      std::printf(" %8s", p.rows.empty() ? "-" : fmt("%.3f", static_cast<double>(p.ratio_at(L))).c_str());
    std::printf("\n");
  }
  for (sa::prr_profile& p : made) {
    if (p.rows.empty()) continue;
    std::erase_if(file, [&](const sa::prr_profile& f) { return f.key == p.key; });
    file.push_back(std::move(p));
  }
  sa::write_prr_profiles(o.prr_profile, file);
  std::printf("wrote %s (%zu profiles)\n", o.prr_profile.c_str(), file.size());
}

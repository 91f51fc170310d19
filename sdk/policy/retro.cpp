#include "policy/retro.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace sa {

namespace {
constexpr uint32_t k_state_version = 1;
}

retro::retro(backend& be, const hparams& hp, int32_t window, int32_t n_rankers, int64_t pages_capacity)
    : be_(be), hp_(hp), window_(window), n_rankers_(n_rankers), pages_capacity_(pages_capacity) {
  if (window < 2) fail(SA_ERR_INTERNAL, "retro: window %d below 2", window);
  const int64_t held = window - 1;
  out_ = new_f32_tensor(be, buffers_, hp.head_dim, int64_t{hp.n_layers} * held * hp.n_heads);
  lse_ = new_f32_tensor(be, buffers_, hp.n_heads, int64_t{hp.n_layers} * held);
  stamps_ = new_tensor(be, buffers_, dtype::i32, pages_capacity, int64_t{hp.n_layers} * n_rankers);
  keys_ = new_tensor(be, buffers_, dtype::i32, hp.n_heads, int64_t{hp.n_layers} * held);
  const std::vector<int32_t> never(static_cast<size_t>(stamps_.elements()), -1);
  be.upload(*stamps_.buf, stamps_.offset, never.data(), never.size() * sizeof(int32_t));
}

void retro::begin(step_buffer& step, int64_t first_position) {
  std::vector<int32_t> rows(entries_.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>(first_position + static_cast<int64_t>(i));
  rows_ = step.put(rows);
}

retro::window_tensors retro::window_ops(int32_t layer) const {
  const int64_t n = held(), w1 = window_ - 1;
  return window_tensors{stamps_.row_range(int64_t{layer} * n_rankers_, n_rankers_), rows_,
                        out_.row_range(int64_t{layer} * w1 * hp_.n_heads, n * hp_.n_heads),
                        lse_.row_range(int64_t{layer} * w1, n), keys_.row_range(int64_t{layer} * w1, n),
                        pages_capacity_};
}

void retro::correct(int32_t layer, const tensor& q_past, const kv_view& kv, const page_selection& sel,
                    bool dense, float scale, const tensor& att_past, const tensor& lse_past) {
  const int64_t n = held();
  const window_tensors w = window_ops(layer);
  if (n > 0) {
    if (dense) {
      // Every page was loaded: nothing is unseen, the cached outputs stand.
      be_.copy(w.prior_out, att_past);
      be_.copy(w.prior_lse, lse_past);
    } else {
      be_.attention_unseen_pages(q_past, kv, hp_.n_heads, hp_.n_kv_heads, hp_.head_dim, sel.page_size,
                                 sel.group_mean, *sel.pages, sel.select_bound, *sel.plan, w.stamps,
                                 pages_capacity_, rows_, scale, att_past, lse_past, w.keys);
      be_.merge_attention(att_past, lse_past, w.prior_out, w.prior_lse);
    }
  }
  be_.stamp_pages(*sel.pages, sel.select_bound, *sel.plan, n_rankers_, dense, w.stamps, pages_capacity_);
}

void retro::keep(int32_t layer, const tensor& att, const tensor& lse) {
  const int64_t rows = lse.rows(), w1 = window_ - 1;
  const int64_t k = std::min(rows, w1);
  be_.copy(att.row_range(rows - k, k).as_2d(hp_.head_dim),
           out_.row_range(int64_t{layer} * w1 * hp_.n_heads, k * hp_.n_heads));
  be_.copy(lse.row_range(rows - k, k), lse_.row_range(int64_t{layer} * w1, k));
}

void retro::end_step(const std::vector<int32_t>& keys_attended) {
  const size_t per = static_cast<size_t>(hp_.n_layers) * static_cast<size_t>(hp_.n_heads);
  if (keys_attended.size() != per) fail(SA_ERR_INTERNAL, "retro: %zu head figures, %zu expected", keys_attended.size(), per);
  const int64_t n = held(), w1 = window_ - 1;
  if (n > 0) {
    // The keys this step supplemented, per past row: layers that ran dense left theirs unused.
    host_keys_.resize(static_cast<size_t>(int64_t{hp_.n_layers} * w1 * hp_.n_heads));
    be_.download(*keys_.buf, keys_.offset, host_keys_.data(), host_keys_.size() * sizeof(int32_t));
    for (int64_t i = 0; i < n; ++i) {
      entry& e = entries_[static_cast<size_t>(i)];
      for (int32_t l = 0; l < hp_.n_layers; ++l)
        for (int32_t h = 0; h < hp_.n_heads; ++h) {
          const size_t at = static_cast<size_t>(l) * static_cast<size_t>(hp_.n_heads) + static_cast<size_t>(h);
          if (e.original[at] == 0 || keys_attended[at] == 0) continue;  // dense then or now
          e.added[at] += host_keys_[static_cast<size_t>((int64_t{l} * w1 + i) * hp_.n_heads + h)];
        }
    }
  }
  if (static_cast<int64_t>(entries_.size()) == w1) {
    // The oldest got its last correction.
    const entry& e = entries_.front();
    for (size_t at = 0; at < per; ++at) {
      if (e.original[at] == 0) continue;
      ++stats_.queries;
      stats_.effective_budget_sum += static_cast<double>(e.original[at] + e.added[at]) / e.original[at];
    }
    entries_.pop_front();
  }
  entries_.push_back(entry{keys_attended, std::vector<int32_t>(per, 0)});
}

void retro::write_state(state_writer& w, int64_t n_pages) const {
  const int64_t n = held(), w1 = window_ - 1;
  byte_packer head;
  head.put(k_state_version).put(static_cast<int32_t>(window_)).put(static_cast<int32_t>(n))
      .put(stats_.queries).put(stats_.effective_budget_sum);
  for (const entry& e : entries_) head.put_array(e.original).put_array(e.added);
  w.put("retro/window", head.bytes().data(), head.bytes().size(), blob_kind::mutable_blob);
  // The held outputs, layer by layer.
  std::vector<float> o(static_cast<size_t>(n * hp_.n_heads * hp_.head_dim)), s(static_cast<size_t>(n * hp_.n_heads));
  std::vector<float> outs, lses;
  for (int32_t l = 0; l < hp_.n_layers && n > 0; ++l) {
    const tensor ot = out_.row_range(int64_t{l} * w1 * hp_.n_heads, n * hp_.n_heads);
    const tensor lt = lse_.row_range(int64_t{l} * w1, n);
    be_.download(*ot.buf, ot.offset, o.data(), o.size() * sizeof(float));
    be_.download(*lt.buf, lt.offset, s.data(), s.size() * sizeof(float));
    outs.insert(outs.end(), o.begin(), o.end());
    lses.insert(lses.end(), s.begin(), s.end());
  }
  w.put("retro/out", outs.data(), outs.size() * sizeof(float), blob_kind::mutable_blob);
  w.put("retro/lse", lses.data(), lses.size() * sizeof(float), blob_kind::mutable_blob);
  // The stamps of the pages in use.
  std::vector<int32_t> st(static_cast<size_t>(n_pages)), all;
  for (int64_t r = 0; r < int64_t{hp_.n_layers} * n_rankers_ && n_pages > 0; ++r) {
    be_.download(*stamps_.buf, stamps_.offset + static_cast<size_t>(r * pages_capacity_) * sizeof(int32_t),
                 st.data(), st.size() * sizeof(int32_t));
    all.insert(all.end(), st.begin(), st.end());
  }
  w.put("retro/stamps", all.data(), all.size() * sizeof(int32_t), blob_kind::mutable_blob);
}

void retro::read_state(state_reader& r, int64_t n_pages) {
  entries_.clear();
  const std::vector<uint8_t> bytes = r.get("retro/window");
  byte_unpacker u(bytes, "blob retro/window");
  u.expect_version(k_state_version);
  const auto w = u.get<int32_t>(), n = u.get<int32_t>();
  if (w != window_ || n < 0 || n > window_ - 1)
    fail(SA_ERR_STORE, "blob retro/window holds %d outputs of a window of %d; the session's window is %d", n, w, window_);
  stats_.queries = u.get<uint64_t>();
  stats_.effective_budget_sum = u.get<double>();
  const size_t per = static_cast<size_t>(hp_.n_layers) * static_cast<size_t>(hp_.n_heads);
  std::deque<entry> entries;
  for (int32_t i = 0; i < n; ++i) {
    entry e;
    u.get_array(e.original, per);
    u.get_array(e.added, per);
    for (size_t at = 0; at < per; ++at)
      if (e.original[at] < 0 || e.added[at] < 0) fail(SA_ERR_STORE, "blob retro/window holds negative key counts");
    entries.push_back(std::move(e));
  }
  u.finish();
  const int64_t w1 = window_ - 1;
  std::vector<float> outs(static_cast<size_t>(int64_t{hp_.n_layers} * n * hp_.n_heads * hp_.head_dim));
  std::vector<float> lses(static_cast<size_t>(int64_t{hp_.n_layers} * n * hp_.n_heads));
  r.get_into("retro/out", outs.data(), outs.size() * sizeof(float));
  r.get_into("retro/lse", lses.data(), lses.size() * sizeof(float));
  std::vector<int32_t> all(static_cast<size_t>(int64_t{hp_.n_layers} * n_rankers_ * n_pages));
  r.get_into("retro/stamps", all.data(), all.size() * sizeof(int32_t));
  for (int32_t s : all)
    if (s < -1) fail(SA_ERR_STORE, "blob retro/stamps holds a position %d", s);
  const size_t o_layer = static_cast<size_t>(n * hp_.n_heads * hp_.head_dim), s_layer = static_cast<size_t>(n * hp_.n_heads);
  for (int32_t l = 0; l < hp_.n_layers && n > 0; ++l) {
    const tensor ot = out_.row_range(int64_t{l} * w1 * hp_.n_heads, int64_t{n} * hp_.n_heads);
    const tensor lt = lse_.row_range(int64_t{l} * w1, n);
    be_.upload(*ot.buf, ot.offset, outs.data() + static_cast<size_t>(l) * o_layer, o_layer * sizeof(float));
    be_.upload(*lt.buf, lt.offset, lses.data() + static_cast<size_t>(l) * s_layer, s_layer * sizeof(float));
  }
  for (int64_t row = 0; row < int64_t{hp_.n_layers} * n_rankers_ && n_pages > 0; ++row)
    be_.upload(*stamps_.buf, stamps_.offset + static_cast<size_t>(row * pages_capacity_) * sizeof(int32_t),
               all.data() + static_cast<size_t>(row * n_pages), static_cast<size_t>(n_pages) * sizeof(int32_t));
  entries_ = std::move(entries);
}

}  // namespace sa

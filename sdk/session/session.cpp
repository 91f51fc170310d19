#include "session/session.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "memory/dense_memory.h"
#include "policy/prr_profile.h"
#include "store/model_fingerprint.h"

namespace sa {

namespace {
session_config resolved(session_config c) {
  if (c.n_batch < 0) fail(SA_ERR_INVALID_ARG, "n_batch %d is negative", c.n_batch);
  if (c.n_batch == 0) c.n_batch = 256;
  // Every session's settings are checked here, created or resumed from a store.
  if (!(std::isfinite(c.sampling.temperature) && c.sampling.temperature >= 0.0f))
    fail(SA_ERR_INVALID_ARG, "temperature %g must be finite and >= 0", static_cast<double>(c.sampling.temperature));
  if (c.sampling.top_k < 0) fail(SA_ERR_INVALID_ARG, "top_k %d is negative", c.sampling.top_k);
  if (!(c.sampling.top_p > 0.0f && c.sampling.top_p <= 1.0f))
    fail(SA_ERR_INVALID_ARG, "top_p %g must be in (0, 1]", static_cast<double>(c.sampling.top_p));
  check(c.sparse);
  if (c.sparse.retro_window > c.n_batch)
    fail(SA_ERR_INVALID_ARG, "retro_window %d exceeds n_batch %d (a Retro step runs that many rows)",
         c.sparse.retro_window, c.n_batch);
  if (c.kv_type && *c.kv_type != dtype::f32 && *c.kv_type != dtype::f16 && *c.kv_type != dtype::bf16)
    fail(SA_ERR_INVALID_ARG, "kv_type %s is not f32, f16 or bf16", traits(*c.kv_type).name);
  return c;
}

// The config with the backend's choices filled in (the KV type), as the session records it.
session_config with_backend(session_config c, const backend& be) {
  if (!c.kv_type) c.kv_type = be.default_kv_type();
  return c;
}
}  // namespace

std::unique_ptr<kv_memory> session::make_memory(backend& be, const model& m,
                                                const device_weights& w, const session_config& c) {
  const hparams& hp = m.hp();
  rope_params rope = hp.rope;
  if (w.rope_freqs.buf) rope.freq_factors = &w.rope_freqs;
  const dtype kv = *c.kv_type;
  if (c.memory == memory_kind::dense) {
    if (c.n_ctx < 0) fail(SA_ERR_INVALID_ARG, "n_ctx %d is negative", c.n_ctx);
    return std::make_unique<dense_memory>(be, hp, rope, c.n_ctx == 0 ? hp.n_ctx_train : c.n_ctx, kv);
  }
  if (c.sparse.enabled())
    fail(SA_ERR_INVALID_ARG, "query-aware sparsity needs the full (dense) memory");
  const int32_t total = c.cache_tokens == 0 ? hp.n_ctx_train : c.cache_tokens;
  const int32_t cascades = c.memory == memory_kind::streaming ? 1 : c.n_cascades;
  if (c.n_sinks < 0 || c.n_sinks >= total)
    fail(SA_ERR_INVALID_ARG, "n_sinks %d must be in [0, cache_tokens %d)", c.n_sinks, total);
  if (cascades < 1 || cascades > 48)
    fail(SA_ERR_INVALID_ARG, "n_cascades %d is outside [1, 48]", cascades);
  if ((total - c.n_sinks) % cascades != 0)
    fail(SA_ERR_INVALID_ARG,
         "cache_tokens %d minus n_sinks %d must divide into n_cascades %d equal sub-caches", total,
         c.n_sinks, cascades);
  if (!(c.beta > 0.0f && c.beta <= 1.0f))
    fail(SA_ERR_INVALID_ARG, "cascade beta %g must be in (0, 1]", static_cast<double>(c.beta));
  cascade_memory_config mc;
  mc.index.n_sinks = c.n_sinks;
  mc.index.n_cascades = cascades;
  mc.index.window = (total - c.n_sinks) / cascades;
  mc.index.beta = c.beta;
  mc.reduction = c.reduction;
  mc.homogeneous = c.homogeneous;
  mc.scores = c.memory == memory_kind::cascade && c.reduction != cascade_reduction::none;
  return std::make_unique<cascade_memory>(be, hp, rope, mc, c.n_batch, kv);
}

session::session(std::shared_ptr<const model> m, const session_config& c)
    : model_(std::move(m)),
      config_(resolved(c)),
      backend_(make_backend(config_.backend, config_.device, config_.n_threads)),
      weights_(shared_weights(*backend_, *model_)),
      step_(*backend_),
      ws_(*backend_, model_->hp(), config_.n_batch, 1),
      sampler_(c.sampling) {
  config_ = with_backend(config_, *backend_);
  backend_->reserve_sampling(model_->hp().n_vocab);
  memory_ = make_memory(*backend_, *model_, *weights_, config_);
  if (config_.sparse.enabled()) {
    const auto& dense = static_cast<const dense_memory&>(*memory_);
    sparse_ = std::make_unique<sparse_attention>(*backend_, step_, model_->hp(), config_.sparse,
                                                 dense.capacity(), dense.kv_type());
  }
  if (config_.prr_profile) use_prr_profile(*config_.prr_profile);
}

void session::use_prr_profile(const std::string& path) {
  if (path.empty()) fail(SA_ERR_INVALID_ARG, "prr_profile is an empty path (NULL: no profile)");
  prr* p = sparse_ ? sparse_->mutable_prr() : nullptr;
  if (!p) fail(SA_ERR_INVALID_ARG, "prr_profile (%s) needs speculation SA_SPECULATION_PRR", path.c_str());
  std::string why;
  const std::vector<device_info> devices = list_devices(config_.backend, &why);
  if (config_.device < 0 || static_cast<size_t>(config_.device) >= devices.size())
    fail(SA_ERR_BACKEND, "the session's device %d is no longer listed: %s", config_.device, why.c_str());
  const prr_profile_key key = prr_key(store::model_fingerprint(*model_), backend_->name(),
                                      devices[static_cast<size_t>(config_.device)].name, config_.sparse,
                                      *config_.kv_type);
  auto table = std::make_shared<const prr_profile>(load_prr_profile(path, key));
  p->use_profile(std::move(table));
  config_.prr_profile = path;
}

forward_env session::env() {
  return forward_env{*backend_, model_->hp(), *weights_, *memory_, sparse_.get(), step_, ws_};
}

void session::check_tokens(std::span<const int32_t> tokens) const {
  if (!broken_.empty()) fail(SA_ERR_BACKEND, "%s", broken_.c_str());
  // The count first: a count larger than the room may also be larger than the caller's buffer,
  // which is then never read.
  if (tokens.size() > static_cast<uint64_t>(memory_->room()))
    fail(SA_ERR_CONTEXT_FULL, "%zu tokens do not fit: the session holds %llu, room for %lld more",
         tokens.size(), static_cast<unsigned long long>(memory_->stats().tokens_held),
         static_cast<long long>(memory_->room()));
  const int32_t n_vocab = model_->hp().n_vocab;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab)
      fail(SA_ERR_INVALID_ARG, "token %d at index %zu is outside the vocabulary [0, %d)", tokens[i],
           i, n_vocab);
}

void session::run(std::span<const int32_t> tokens, const progress_fn& progress, bool snapshot) {
  const auto t0 = std::chrono::steady_clock::now();
  backend_->bind_thread();
  const std::unique_ptr<kv_memory::snapshot> saved = snapshot ? memory_->save() : nullptr;
  // The last chunk overwrites the logits on the backend, and the call may still fail after it
  // (the progress callback cancels, PRR's fit runs out of memory, the device fails): the
  // current logits are kept on the host to be put back.
  if (logits_state_ == logits_state::on_backend) logits();
  bool logits_overwritten = false;
  uint64_t kv_read = 0;
  try {
    tokens_.reserve(tokens_.size() + tokens.size());
    for (size_t done = 0; done < tokens.size();) {
      const size_t m = std::min(tokens.size() - done, static_cast<size_t>(config_.n_batch));
      const bool last = done + m == tokens.size();
      const batch b{batch_kind::prefill, tokens.subspan(done, m), 0};
      logits_overwritten = last;
      kv_read += kv_bytes_read(forward(env(), b, last ? 1 : 0, nullptr));
      done += m;
      if (progress && !progress(done, tokens.size()))
        fail(SA_ERR_CANCELLED, "prefill cancelled by the progress callback after %zu of %zu tokens",
             done, tokens.size());
    }
    if (sparse_) sparse_->end_prefill();
    backend_->synchronize();  // a device fault surfaces here, before the call reports success
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    logits_state_ = logits_state::on_backend;
    dense_stats_.clear();  // a prefill has no per-head figures
  } catch (...) {
    if (saved)
      memory_->restore(saved.get());
    else
      broken_ = "the session is unusable: an earlier step failed after changing the memory";
    if (logits_overwritten && logits_state_ == logits_state::on_host)
      backend_->upload(*ws_.logits.buf, ws_.logits.offset, logits_.data(),
                       logits_.size() * sizeof(float));
    throw;
  }
  kv_bytes_read_last_ = kv_read;
  last_call_tokens_ = tokens.size();
  last_call_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void session::prefill(std::span<const int32_t> tokens, const progress_fn& progress) {
  if (tokens.empty()) return;
  check_tokens(tokens);
  rectify();  // new tokens attend to rectified K/V
  run(tokens, progress, true);
}

void session::decode(int32_t token, int32_t* next) {
  check_tokens(std::span<const int32_t>(&token, 1));
  const auto t0 = std::chrono::steady_clock::now();
  backend_->bind_thread();
  // What the step needs on the host is allocated before it changes anything: running out of
  // memory there leaves the session as it was, and nothing after the forward pass (which
  // overwrites the logits) can fail for want of memory. The rows: RetroAttention runs the
  // window's past decode tokens again with the new one.
  const size_t past = sparse_ ? static_cast<size_t>(sparse_->retro_rows()) : 0;
  std::vector<int32_t> rows;
  rows.reserve(past + 1);
  rows.assign(tokens_.end() - static_cast<std::ptrdiff_t>(past), tokens_.end());
  rows.push_back(token);
  if (tokens_.size() == tokens_.capacity())
    tokens_.reserve(std::max<size_t>(64, 2 * tokens_.size()));
  const hparams& hp = model_->hp();
  if (!sparse_)
    dense_stats_.reserve(static_cast<size_t>(hp.n_layers) * static_cast<size_t>(hp.n_heads));
  const std::array<uint64_t, 4> rng = sampler_.state();
  // A dense memory forgets an unfinished step by itself; its snapshot is one counter.
  const std::unique_ptr<kv_memory::snapshot> saved =
      config_.memory == memory_kind::dense ? memory_->save() : nullptr;
  try {
    const batch b{past ? batch_kind::retro : batch_kind::decode, rows,
                  static_cast<int64_t>(tokens_.size() - past)};
    token_draw draw{config_.sampling, 0.0};
    if (next) draw.u = sampler_.next_uniform();
    const uint64_t kv_read = forward(env(), b, 1, next ? &draw : nullptr);
    if (next)
      backend_->download(*ws_.token.buf, ws_.token.offset, next, sizeof *next);
    else
      backend_->synchronize();
    tokens_.push_back(token);  // reserved above: cannot throw
    logits_state_ = logits_state::on_backend;
    kv_bytes_read_last_ = kv_read;
    if (!sparse_) {
      // Every head of every layer read every key the memory holds.
      const auto keys = static_cast<int32_t>(std::min<uint64_t>(memory_->stats().tokens_held, INT32_MAX));
      dense_stats_.resize(static_cast<size_t>(hp.n_layers) * static_cast<size_t>(hp.n_heads));
      for (int32_t l = 0; l < hp.n_layers; ++l)
        for (int32_t h = 0; h < hp.n_heads; ++h) {
          head_stat& st = dense_stats_[static_cast<size_t>(l * hp.n_heads + h)];
          st.layer = l;
          st.head = h;
          st.keys_attended = st.keys_total = keys;
        }
    }
  } catch (...) {
    sampler_.set_state(rng);
    if (sparse_) sparse_->abandon();
    if (saved)
      memory_->restore(saved.get());
    else
      broken_ = "the session is unusable: an earlier step failed after changing the memory";
    throw;
  }
  last_call_tokens_ = 1;
  last_call_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (sparse_ && config_.sparse.rectify_every > 0 &&
      ++unrectified_ >= static_cast<uint64_t>(config_.sparse.rectify_every))
    rectify();
}

// ReSA's rectification: the tokens appended by sparse decode steps since the last one are run
// again densely over the whole cache, which replaces their K/V (and page summaries) in every
// layer; the logits of that pass are not used.
void session::rectify() {
  if (unrectified_ == 0) return;
  backend_->bind_thread();
  const size_t n = static_cast<size_t>(unrectified_);
  const size_t first = tokens_.size() - n;
  try {
    for (size_t done = 0; done < n;) {
      const size_t m = std::min(n - done, static_cast<size_t>(config_.n_batch));
      const batch b{batch_kind::rewrite, std::span<const int32_t>(tokens_).subspan(first + done, m),
                    static_cast<int64_t>(first + done)};
      forward(env(), b, 0, nullptr);
      done += m;
    }
    backend_->synchronize();
  } catch (...) {
    broken_ = "the session is unusable: a rectification pass failed after changing the memory";
    throw;
  }
  n_rectified_ += unrectified_;
  unrectified_ = 0;
}

int32_t session::sample() {
  if (logits_state_ == logits_state::none)
    fail(SA_ERR_MISUSE, "no logits to sample from: prefill or decode a token first");
  if (!broken_.empty()) fail(SA_ERR_BACKEND, "%s", broken_.c_str());
  backend_->bind_thread();
  const std::array<uint64_t, 4> rng = sampler_.state();
  try {
    step_.clear();
    const tensor u = step_.put_double(sampler_.next_uniform());
    step_.flush();
    backend_->sample(ws_.logits.row_range(0, 1), config_.sampling, u, ws_.token);
    int32_t t = 0;
    backend_->download(*ws_.token.buf, ws_.token.offset, &t, sizeof t);
    return t;
  } catch (...) {
    sampler_.set_state(rng);
    throw;
  }
}

const std::vector<float>& session::logits() const {
  if (logits_state_ == logits_state::on_backend) {
    backend_->bind_thread();
    logits_.resize(static_cast<size_t>(model_->hp().n_vocab));
    backend_->download(*ws_.logits.buf, ws_.logits.offset, logits_.data(),
                       logits_.size() * sizeof(float));
    logits_state_ = logits_state::on_host;
  } else if (logits_state_ == logits_state::none) {
    logits_.clear();
  }
  return logits_;
}

void session::restore_history(std::vector<int32_t> tokens, std::vector<float> logits) {
  backend_->bind_thread();
  tokens_ = std::move(tokens);
  logits_ = std::move(logits);
  if (logits_.empty()) {
    logits_state_ = logits_state::none;
  } else {
    backend_->upload(*ws_.logits.buf, ws_.logits.offset, logits_.data(),
                     logits_.size() * sizeof(float));
    logits_state_ = logits_state::on_host;
  }
  if (sparse_) {
    const auto& dense = static_cast<const dense_memory&>(*memory_);
    for (int32_t l = 0; l < model_->hp().n_layers; ++l) sparse_->rebuild(l, dense.view(l), dense.size());
  }
  backend_->synchronize();
}

void session::write_policy_state(state_writer& w) const {
  if (!sparse_) return;
  backend_->bind_thread();
  if (sparse_->prr_state()) sparse_->prr_state()->write_state(w);
  if (!sparse_->retro_state()) return;
  const int64_t pages = (memory_->stats().tokens_held + config_.sparse.page_size - 1) / config_.sparse.page_size;
  sparse_->retro_state()->write_state(w, pages);
}

void session::read_policy_state(state_reader& r) {
  if (!sparse_) return;
  backend_->bind_thread();
  if (sparse_->mutable_prr()) sparse_->mutable_prr()->read_state(r);
  if (!sparse_->mutable_retro()) return;
  const int64_t pages = (memory_->stats().tokens_held + config_.sparse.page_size - 1) / config_.sparse.page_size;
  sparse_->mutable_retro()->read_state(r, pages);
}

void session::reset() {
  if (sparse_) sparse_->abandon();
  dense_stats_.clear();
  memory_->reset();
  unrectified_ = 0;
  tokens_.clear();
  logits_.clear();
  logits_state_ = logits_state::none;
  broken_.clear();
}

const std::vector<head_stat>& session::head_stats() const {
  return sparse_ ? sparse_->head_stats() : dense_stats_;
}

void session::memory_positions(int32_t layer, int32_t kv_head, std::vector<uint64_t>& out) const {
  const hparams& hp = model_->hp();
  if (layer < -1 || layer >= hp.n_layers)
    fail(SA_ERR_INVALID_ARG, "layer %d is outside [0, %d) (or -1 for every layer)", layer,
         hp.n_layers);
  if (kv_head < -1 || kv_head >= hp.n_kv_heads)
    fail(SA_ERR_INVALID_ARG, "kv_head %d is outside [0, %d) (or -1 for every KV head)", kv_head,
         hp.n_kv_heads);
  // A bounded memory that failed mid-step may have moved some layers' tokens and not others.
  if (!broken_.empty()) fail(SA_ERR_BACKEND, "%s", broken_.c_str());
  memory_->held_positions(layer, kv_head, out);
}

uint64_t session::kv_bytes_read(uint64_t from_forward) const {
  if (from_forward != k_kv_read_deferred) return from_forward;
  return sparse_->keys_read() * memory_->key_bytes() / static_cast<uint64_t>(model_->hp().n_heads);
}

session_stats session::stats() const {
  const memory_stats m = memory_->stats();
  session_stats s;
  s.n_tokens = tokens_.size();
  s.n_kv_tokens = m.tokens_held;
  s.kv_bytes_held = m.bytes_held;
  s.kv_bytes_capacity = m.bytes_capacity;
  s.kv_bytes_read_last_call = kv_bytes_read(kv_bytes_read_last_);
  s.weight_bytes = weights_->bytes();
  s.last_call_tokens = last_call_tokens_;
  s.last_call_ms = last_call_ms_;
  for (const head_stat& h : head_stats()) {
    if (!h.sparse) continue;
    s.sparse_keys_attended += static_cast<uint64_t>(h.keys_attended);
    s.sparse_keys_total += static_cast<uint64_t>(h.keys_total);
  }
  s.n_rectified = n_rectified_;
  if (sparse_ && sparse_->retro_state()) s.retro_effective_budget = sparse_->retro_state()->stats().effective_budget();
  if (sparse_ && sparse_->prr_state()) {
    const prr_stats& p = sparse_->prr_state()->stats();
    s.prr_hit_rate = p.hit_rate();
    s.prr_missed_pages = p.missed_per_selection();
    s.prr_calibration_ms = p.calibration_ms;
    s.prr_ratio = sparse_->prr_state()->ratio();
  }
  return s;
}

}  // namespace sa

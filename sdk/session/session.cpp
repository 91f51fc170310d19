#include "session/session.h"

#include <algorithm>

#include "core/error.h"
#include "memory/dense_memory.h"

namespace sa {

namespace {
session_config resolved(session_config c) {
  if (c.n_batch < 0) fail(SA_ERR_INVALID_ARG, "n_batch %d is negative", c.n_batch);
  if (c.n_batch == 0) c.n_batch = 256;
  return c;
}
}  // namespace

std::unique_ptr<kv_memory> session::make_memory(backend& be, const model& m,
                                                const device_weights& w, const session_config& c) {
  const hparams& hp = m.hp();
  rope_params rope = hp.rope;
  if (!w.rope_freqs.empty()) rope.freq_factors = w.rope_freqs.data();
  if (c.memory == memory_kind::dense) {
    if (c.n_ctx < 0) fail(SA_ERR_INVALID_ARG, "n_ctx %d is negative", c.n_ctx);
    return std::make_unique<dense_memory>(be, hp, rope, c.n_ctx == 0 ? hp.n_ctx_train : c.n_ctx,
                                          c.sparse);
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
  return std::make_unique<cascade_memory>(be, hp, rope, mc, c.n_batch);
}

session::session(std::shared_ptr<const model> m, const session_config& c)
    : model_(std::move(m)),
      config_(resolved(c)),
      backend_(make_backend(c.backend, c.n_threads)),
      weights_(*backend_, *model_),
      memory_(make_memory(*backend_, *model_, weights_, config_)),
      ws_(*backend_, model_->hp(), config_.n_batch, 1),
      sampler_(c.sampling) {
  if (config_.sparse.enabled()) full_ = static_cast<dense_memory*>(memory_.get());
}

void session::check_tokens(std::span<const int32_t> tokens) const {
  if (!broken_.empty()) fail(SA_ERR_BACKEND, "%s", broken_.c_str());
  const int32_t n_vocab = model_->hp().n_vocab;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab)
      fail(SA_ERR_INVALID_ARG, "token %d at index %zu is outside the vocabulary [0, %d)", tokens[i],
           i, n_vocab);
  if (static_cast<int64_t>(tokens.size()) > memory_->room())
    fail(SA_ERR_CONTEXT_FULL, "%zu tokens do not fit: the session holds %llu, room for %lld more",
         tokens.size(), static_cast<unsigned long long>(memory_->stats().tokens_held),
         static_cast<long long>(memory_->room()));
}

void session::run(std::span<const int32_t> tokens, const progress_fn& progress, bool snapshot) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::unique_ptr<kv_memory::snapshot> saved = snapshot ? memory_->save() : nullptr;
  uint64_t kv_read = 0;
  try {
    tokens_.reserve(tokens_.size() + tokens.size());
    for (size_t done = 0; done < tokens.size();) {
      const size_t m = std::min(tokens.size() - done, static_cast<size_t>(config_.n_batch));
      const bool last = done + m == tokens.size();
      kv_read += forward(*backend_, model_->hp(), weights_, *memory_, ws_, tokens.subspan(done, m),
                         last ? 1 : 0);
      done += m;
      if (progress && !progress(done, tokens.size()))
        fail(SA_ERR_CANCELLED, "prefill cancelled by the progress callback after %zu of %zu tokens",
             done, tokens.size());
    }
    std::vector<float> logits(static_cast<size_t>(model_->hp().n_vocab));
    backend_->download(*ws_.logits.buf, ws_.logits.offset, logits.data(),
                       logits.size() * sizeof(float));
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    logits_ = std::move(logits);
  } catch (...) {
    if (saved)
      memory_->restore(saved.get());
    else
      broken_ = "the session is unusable: an earlier step failed after changing the memory";
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

void session::decode(int32_t token) {
  check_tokens(std::span<const int32_t>(&token, 1));
  if (full_) full_->mark_decode_step();
  // A dense memory forgets an unfinished step by itself; its snapshot is one counter.
  run(std::span<const int32_t>(&token, 1), nullptr, config_.memory == memory_kind::dense);
  if (full_ && config_.sparse.rectify_every > 0 &&
      ++unrectified_ >= static_cast<uint64_t>(config_.sparse.rectify_every))
    rectify();
}

// ReSA's rectification: the tokens appended by sparse decode steps since the last one are run
// again densely over the whole cache, which replaces their K/V (and page summaries) in every
// layer; the logits of that pass are not used.
void session::rectify() {
  if (unrectified_ == 0) return;
  const size_t n = static_cast<size_t>(unrectified_);
  const size_t first = tokens_.size() - n;
  try {
    for (size_t done = 0; done < n;) {
      const size_t m = std::min(n - done, static_cast<size_t>(config_.n_batch));
      full_->rewrite_next(static_cast<int64_t>(first + done));
      forward(*backend_, model_->hp(), weights_, *memory_, ws_,
              std::span<const int32_t>(tokens_).subspan(first + done, m), 0);
      done += m;
    }
  } catch (...) {
    broken_ = "the session is unusable: a rectification pass failed after changing the memory";
    throw;
  }
  n_rectified_ += unrectified_;
  unrectified_ = 0;
}

int32_t session::sample() {
  if (logits_.empty())
    fail(SA_ERR_MISUSE, "no logits to sample from: prefill or decode a token first");
  return sampler_.sample(logits_);
}

void session::reset() {
  memory_->reset();
  unrectified_ = 0;
  tokens_.clear();
  logits_.clear();
  broken_.clear();
}

session_stats session::stats() const {
  const memory_stats m = memory_->stats();
  session_stats s;
  s.n_tokens = tokens_.size();
  s.n_kv_tokens = m.tokens_held;
  s.kv_bytes_held = m.bytes_held;
  s.kv_bytes_capacity = m.bytes_capacity;
  s.kv_bytes_read_last_call = kv_bytes_read_last_;
  s.weight_bytes = weights_.bytes();
  s.last_call_tokens = last_call_tokens_;
  s.last_call_ms = last_call_ms_;
  for (const head_stat& h : memory_->head_stats()) {
    if (!h.sparse) continue;
    s.sparse_keys_attended += static_cast<uint64_t>(h.keys_attended);
    s.sparse_keys_total += static_cast<uint64_t>(h.keys_total);
  }
  s.n_rectified = n_rectified_;
  return s;
}

}  // namespace sa

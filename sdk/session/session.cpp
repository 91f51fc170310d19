#include "session/session.h"

#include <algorithm>

#include "core/error.h"

namespace sa {

namespace {
int32_t resolve_ctx(const model& m, const session_config& c) {
  if (c.n_ctx < 0) fail(SA_ERR_INVALID_ARG, "n_ctx %d is negative", c.n_ctx);
  return c.n_ctx == 0 ? m.hp().n_ctx_train : c.n_ctx;
}
int32_t resolve_batch(const session_config& c) {
  if (c.n_batch < 0) fail(SA_ERR_INVALID_ARG, "n_batch %d is negative", c.n_batch);
  return c.n_batch == 0 ? 256 : c.n_batch;
}
}  // namespace

session::session(std::shared_ptr<const model> m, const session_config& c)
    : model_(std::move(m)),
      config_(c),
      backend_(make_backend(c.backend, c.n_threads)),
      weights_(*backend_, *model_),
      memory_(*backend_, model_->hp(), resolve_ctx(*model_, c)),
      ws_(*backend_, model_->hp(), resolve_batch(c), 1),
      sampler_(c.sampling) {
  config_.n_batch = resolve_batch(c);
}

void session::check_tokens(std::span<const int32_t> tokens) const {
  const int32_t n_vocab = model_->hp().n_vocab;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab)
      fail(SA_ERR_INVALID_ARG, "token %d at index %zu is outside the vocabulary [0, %d)", tokens[i],
           i, n_vocab);
  if (static_cast<int64_t>(tokens.size()) > memory_.capacity() - memory_.size())
    fail(SA_ERR_CONTEXT_FULL, "%zu tokens do not fit: the session holds %lld of %lld", tokens.size(),
         static_cast<long long>(memory_.size()), static_cast<long long>(memory_.capacity()));
}

void session::run(std::span<const int32_t> tokens, const progress_fn& progress) {
  check_tokens(tokens);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t start = memory_.size();
  uint64_t kv_read = 0;
  try {
    std::vector<int32_t> pos, len;
    for (size_t done = 0; done < tokens.size();) {
      const size_t m = std::min(tokens.size() - done, static_cast<size_t>(config_.n_batch));
      pos.resize(m);
      len.resize(m);
      for (size_t i = 0; i < m; ++i) {
        pos[i] = static_cast<int32_t>(memory_.size() + static_cast<int64_t>(i));
        len[i] = pos[i] + 1;
      }
      batch b;
      b.tokens = tokens.subspan(done, m);
      b.positions = pos;
      b.slots = pos;
      b.kv_len = len;
      b.n_logit_rows = done + m == tokens.size() ? 1 : 0;
      kv_read += forward(*backend_, model_->hp(), weights_, memory_, ws_, b);
      memory_.set_size(memory_.size() + static_cast<int64_t>(m));
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
    memory_.set_size(start);  // slots past `start` are free again; nothing else changed
    throw;
  }
  kv_bytes_read_last_ = kv_read;
  last_call_tokens_ = tokens.size();
  last_call_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void session::prefill(std::span<const int32_t> tokens, const progress_fn& progress) {
  if (tokens.empty()) return;
  run(tokens, progress);
}

void session::decode(int32_t token) { run(std::span<const int32_t>(&token, 1), nullptr); }

int32_t session::sample() {
  if (logits_.empty())
    fail(SA_ERR_MISUSE, "no logits to sample from: prefill or decode a token first");
  return sampler_.sample(logits_);
}

void session::reset() {
  memory_.set_size(0);
  tokens_.clear();
  logits_.clear();
}

session_stats session::stats() const {
  session_stats s;
  s.n_tokens = tokens_.size();
  s.n_kv_tokens = static_cast<uint64_t>(memory_.size());
  s.kv_bytes_held = memory_.bytes_held();
  s.kv_bytes_capacity = memory_.bytes_capacity();
  s.kv_bytes_read_last_call = kv_bytes_read_last_;
  s.weight_bytes = weights_.bytes();
  s.last_call_tokens = last_call_tokens_;
  s.last_call_ms = last_call_ms_;
  return s;
}

}  // namespace sa

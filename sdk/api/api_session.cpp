// sa_session_*, sa_prefill, sa_sample, sa_decode_step.
#include <algorithm>
#include <vector>

#include "api/handles.h"

using sa::api::guarded;
using sa::api::registry;
using sa::api::require_live;

namespace {

sa::sparse_config to_sparse(const sa_session_params& p) {
  sa::sparse_config c;
  switch (p.sparse) {
    case SA_SPARSE_NONE: c.method = sa::sparse_method::none; break;
    case SA_SPARSE_QUEST: c.method = sa::sparse_method::quest; break;
    case SA_SPARSE_VATTENTION: c.method = sa::sparse_method::vattention; break;
    case SA_SPARSE_ORACLE: c.method = sa::sparse_method::oracle; break;
    default: sa::fail(SA_ERR_INVALID_ARG, "sparse %d is not an SA_SPARSE_* value", p.sparse);
  }
  if (c.method != sa::sparse_method::none && p.memory != SA_MEMORY_FULL)
    sa::fail(SA_ERR_INVALID_ARG, "sparse %d needs memory SA_MEMORY_FULL (the dense memory), not %d",
             p.sparse, p.memory);
  switch (p.select_granularity) {
    case SA_SELECT_PER_HEAD: c.granularity = sa::select_granularity::per_head; break;
    case SA_SELECT_PER_GROUP: c.granularity = sa::select_granularity::per_group; break;
    default:
      sa::fail(SA_ERR_INVALID_ARG, "select_granularity %d is not an SA_SELECT_* value",
               p.select_granularity);
  }
  switch (p.vatt_topk) {
    case SA_TOPK_QUEST: c.topk = sa::topk_source::quest; break;
    case SA_TOPK_ORACLE: c.topk = sa::topk_source::oracle; break;
    default: sa::fail(SA_ERR_INVALID_ARG, "vatt_topk %d is not an SA_TOPK_* value", p.vatt_topk);
  }
  c.page_size = p.page_size;
  c.budget_tokens = p.budget_tokens;
  c.budget_ratio = p.budget_ratio;
  c.sink_pages = p.sink_pages;
  c.local_pages = p.local_pages;
  c.min_pages = p.min_pages;
  c.dense_layers = p.dense_layers;
  c.rectify_every = p.rectify_every;
  c.epsilon = p.vatt_epsilon;
  c.delta = p.vatt_delta;
  c.pilot_ratio = p.vatt_pilot_ratio;
  c.check_error = p.check_error != 0;
  c.seed = p.seed;
  switch (p.correction) {
    case SA_CORRECTION_NONE: break;
    case SA_CORRECTION_RETRO:
      if (c.method != sa::sparse_method::quest)
        sa::fail(c.method == sa::sparse_method::none ? SA_ERR_INVALID_ARG : SA_ERR_UNSUPPORTED,
                 "correction SA_CORRECTION_RETRO works with sparse SA_SPARSE_QUEST, not %d", p.sparse);
      c.retro_window = p.retro_window;
      break;
    default: sa::fail(SA_ERR_INVALID_ARG, "correction %d is not an SA_CORRECTION_* value", p.correction);
  }
  switch (p.speculation) {
    case SA_SPECULATION_NONE: break;
    case SA_SPECULATION_PRR:
      if (c.method != sa::sparse_method::quest)
        sa::fail(c.method == sa::sparse_method::none ? SA_ERR_INVALID_ARG : SA_ERR_UNSUPPORTED,
                 "speculation SA_SPECULATION_PRR works with sparse SA_SPARSE_QUEST, not %d", p.sparse);
      if (p.prr_mode != SA_PRR_SUPERSET && p.prr_mode != SA_PRR_STRICT)
        sa::fail(SA_ERR_INVALID_ARG, "prr_mode %d is not an SA_PRR_* value", p.prr_mode);
      c.prr = p.prr_mode == SA_PRR_STRICT ? sa::speculation::strict : sa::speculation::superset;
      c.prr_ratio = p.prr_ratio;
      break;
    default: sa::fail(SA_ERR_INVALID_ARG, "speculation %d is not an SA_SPECULATION_* value", p.speculation);
  }
  return c;
}

sa::session_config to_config(const sa_session_params& p) {
  sa::session_config c;
  sa::api::choose_backend(p, c);
  sa::api::choose_kv_type(p, c);
  if (p.n_threads < 0 || p.n_threads > 1024)
    sa::fail(SA_ERR_INVALID_ARG, "n_threads %d is outside [0, 1024]", p.n_threads);
  if (p.n_ctx < 0) sa::fail(SA_ERR_INVALID_ARG, "n_ctx %d is negative", p.n_ctx);
  if (p.n_batch < 0 || p.n_batch > 65536)
    sa::fail(SA_ERR_INVALID_ARG, "n_batch %d is outside [0, 65536]", p.n_batch);
  switch (p.memory) {
    case SA_MEMORY_DENSE: c.memory = sa::memory_kind::dense; break;
    case SA_MEMORY_STREAMING: c.memory = sa::memory_kind::streaming; break;
    case SA_MEMORY_CASCADE: c.memory = sa::memory_kind::cascade; break;
    default: sa::fail(SA_ERR_INVALID_ARG, "memory %d is not an SA_MEMORY_* value", p.memory);
  }
  switch (p.cascade_reduction) {
    case SA_CASCADE_REDUCE_MAX: c.reduction = sa::cascade_reduction::max; break;
    case SA_CASCADE_REDUCE_MEAN: c.reduction = sa::cascade_reduction::mean; break;
    case SA_CASCADE_REDUCE_MEDIAN: c.reduction = sa::cascade_reduction::median; break;
    case SA_CASCADE_REDUCE_NONE: c.reduction = sa::cascade_reduction::none; break;
    default:
      sa::fail(SA_ERR_INVALID_ARG, "cascade_reduction %d is not an SA_CASCADE_REDUCE_* value",
               p.cascade_reduction);
  }
  if (p.cache_tokens < 0) sa::fail(SA_ERR_INVALID_ARG, "cache_tokens %d is negative", p.cache_tokens);
  c.n_sinks = p.n_sinks;
  c.cache_tokens = p.cache_tokens;
  c.n_cascades = p.n_cascades;
  c.beta = p.cascade_beta;
  c.homogeneous = p.cascade_homogeneous != 0;
  c.sparse = to_sparse(p);
  if (p.prr_profile) c.prr_profile = p.prr_profile;  // read by the session (it needs the device)
  c.n_threads = p.n_threads;
  c.n_ctx = p.n_ctx;
  c.n_batch = p.n_batch;
  c.sampling.temperature = p.temperature;
  c.sampling.top_k = p.top_k;
  c.sampling.top_p = p.top_p;
  c.sampling.seed = p.seed;
  return c;
}

// Runs f on a live session, recording failures on it.
template <typename F>
sa_status on_session(sa_session* s, F&& f) {
  if (!registry<sa_session>::contains(s))
    return guarded(nullptr, [&] { require_live(s, "session"); });
  return guarded(&s->errmsg, [&] { f(*s->impl); });
}

// on_session for calls that change the session: refused from inside its sa_prefill.
template <typename F>
sa_status changing_session(sa_session* s, const char* fn, F&& f) {
  return on_session(s, [&](sa::session& impl) {
    sa::api::require_not_in_prefill(*s, fn);
    f(impl);
  });
}

sa_status sampled(sa_session* s, int32_t token, int32_t* out_token) {
  *out_token = token;
  return s->impl->get_model().vocab().is_eog(token) ? SA_DONE : SA_OK;
}

}  // namespace

extern "C" {

void sa_session_params_init(sa_session_params* params) {
  if (!params) return;
  *params = sa_session_params{};
  params->struct_size = sizeof(sa_session_params);
  params->backend = SA_BACKEND_AUTO;
  params->memory = SA_MEMORY_DENSE;
  params->temperature = 0.0f;
  params->top_p = 1.0f;
  params->n_sinks = 64;
  params->cache_tokens = 0;
  params->n_cascades = 4;
  params->cascade_beta = 0.9999f;
  params->cascade_reduction = SA_CASCADE_REDUCE_MAX;
  params->sparse = SA_SPARSE_NONE;
  params->page_size = 16;
  params->budget_ratio = 0.125f;
  params->sink_pages = 1;
  params->local_pages = 1;
  params->min_pages = 3;
  params->dense_layers = 2;
  params->select_granularity = SA_SELECT_PER_HEAD;
  params->vatt_epsilon = 0.05f;
  params->vatt_delta = 0.05f;
  params->vatt_pilot_ratio = 0.1f;
  params->vatt_topk = SA_TOPK_QUEST;
  params->correction = SA_CORRECTION_NONE;
  params->retro_window = 2;
  params->speculation = SA_SPECULATION_NONE;
  params->prr_mode = SA_PRR_SUPERSET;
  params->prr_ratio = 1.0f;
  params->prr_profile = nullptr;
}

sa_status sa_session_create(sa_model* model, const sa_session_params* params,
                            sa_session** out_session) {
  return guarded(nullptr, [&] {
    if (!out_session) sa::fail(SA_ERR_INVALID_ARG, "out_session is NULL");
    *out_session = nullptr;
    require_live(model, "model");
    sa_session_params defaults;
    sa_session_params_init(&defaults);
    const sa_session_params p = sa::api::read_params(params, defaults, "sa_session_params");
    const sa::session_config c = to_config(p);
    auto s = std::make_unique<sa_session>();
    s->model = model->impl;
    s->impl = std::make_unique<sa::session>(model->impl, c);
    sa::api::attach_store(*s, p);
    registry<sa_session>::add(s.get());
    *out_session = s.release();
  });
}

void sa_session_destroy(sa_session* session) {
  if (!session || !registry<sa_session>::contains(session)) return;
  if (session->in_prefill) {  // from its progress callback: cancel, then free when it returns
    session->destroy_requested = true;
    return;
  }
  if (!registry<sa_session>::remove(session)) return;
  delete session;
}

const char* sa_session_errmsg(const sa_session* session) {
  if (!session) return "session is NULL";
  if (!registry<sa_session>::contains(session)) return "session is not a live handle (destroyed?)";
  return session->errmsg.c_str();
}

sa_status sa_prefill(sa_session* session, const int32_t* tokens, size_t n_tokens,
                     sa_progress_fn progress, void* user_data) {
  const sa_status st = changing_session(session, "sa_prefill", [&](sa::session& s) {
    if (!tokens && n_tokens) sa::fail(SA_ERR_INVALID_ARG, "tokens is NULL but n_tokens is %zu", n_tokens);
    sa::progress_fn cb;
    if (progress)
      cb = [&](size_t done, size_t total) {
        const bool go_on = progress(done, total, user_data) == 0;
        return go_on && !session->destroy_requested;
      };
    session->in_prefill = true;
    try {
      s.prefill(std::span<const int32_t>(tokens, n_tokens), cb);
    } catch (...) {
      session->in_prefill = false;
      throw;
    }
    session->in_prefill = false;
    sa::api::autosave(*session, false);
  });
  if (registry<sa_session>::contains(session) && session->destroy_requested) {
    session->destroy_requested = false;
    sa_session_destroy(session);  // asked for by the progress callback
  }
  return st;
}

sa_status sa_sample(sa_session* session, int32_t* out_token) {
  int32_t token = -1;
  const sa_status st = changing_session(session, "sa_sample", [&](sa::session& s) {
    if (!out_token) sa::fail(SA_ERR_INVALID_ARG, "out_token is NULL");
    token = s.sample();
  });
  return st == SA_OK ? sampled(session, token, out_token) : st;
}

sa_status sa_decode_step(sa_session* session, int32_t token_in, int32_t* out_token) {
  int32_t token = -1;
  const sa_status st = changing_session(session, "sa_decode_step", [&](sa::session& s) {
    s.decode(token_in, out_token ? &token : nullptr);
    sa::api::autosave(*session, true);  // after sampling: the saved sampler state is current
  });
  if (st != SA_OK || !out_token) return st;
  return sampled(session, token, out_token);
}

const float* sa_session_logits(const sa_session* session, int32_t* out_n_vocab) {
  if (out_n_vocab) *out_n_vocab = 0;
  if (!registry<sa_session>::contains(session) || !session->impl->has_logits()) return nullptr;
  const float* logits = nullptr;
  sa_session* s = const_cast<sa_session*>(session);
  const sa_status st = guarded(&s->errmsg, [&] {
    const std::vector<float>& l = s->impl->logits();  // a GPU session downloads them here
    if (out_n_vocab) *out_n_vocab = static_cast<int32_t>(l.size());
    logits = l.data();
  });
  return st == SA_OK ? logits : nullptr;
}

sa_status sa_session_tokens(const sa_session* session, const int32_t** out_tokens, size_t* out_n) {
  return on_session(const_cast<sa_session*>(session), [&](sa::session& s) {
    if (!out_tokens || !out_n) sa::fail(SA_ERR_INVALID_ARG, "out_tokens or out_n is NULL");
    *out_tokens = s.tokens().data();
    *out_n = s.tokens().size();
  });
}

sa_status sa_session_reset(sa_session* session) {
  return changing_session(session, "sa_session_reset", [&](sa::session& s) { s.reset(); });
}

sa_status sa_session_stats(const sa_session* session, sa_stats* out) {
  return on_session(const_cast<sa_session*>(session), [&](sa::session& s) {
    const sa::session_stats st = s.stats();
    sa_stats o{};
    o.n_tokens = st.n_tokens;
    o.n_kv_tokens = st.n_kv_tokens;
    o.kv_bytes_held = st.kv_bytes_held;
    o.kv_bytes_capacity = st.kv_bytes_capacity;
    o.kv_bytes_read_last_step = st.kv_bytes_read_last_call;
    o.weight_bytes = st.weight_bytes;
    o.last_call_ms = st.last_call_ms;
    o.last_call_tokens = st.last_call_tokens;
    o.sparse_keys_attended = st.sparse_keys_attended;
    o.sparse_keys_total = st.sparse_keys_total;
    o.n_rectified = st.n_rectified;
    o.backend = sa::api::backend_code(s.config().backend);
    o.device = s.config().device;
    o.kv_type = sa::api::kv_type_code(s.config().kv_type.value_or(sa::dtype::f32));
    o.retro_effective_budget = st.retro_effective_budget;
    o.prr_hit_rate = st.prr_hit_rate;
    o.prr_missed_pages = st.prr_missed_pages;
    o.prr_calibration_ms = st.prr_calibration_ms;
    o.prr_ratio = st.prr_ratio;
    sa::api::write_info(out, o, "sa_stats");
  });
}

sa_status sa_session_memory_positions(const sa_session* session, int32_t layer, int32_t kv_head,
                                      uint64_t* positions, size_t capacity, size_t* out_count) {
  if (out_count) *out_count = 0;
  return on_session(const_cast<sa_session*>(session), [&](sa::session& s) {
    if (!out_count) sa::fail(SA_ERR_INVALID_ARG, "out_count is NULL");
    if (!positions && capacity > 0)
      sa::fail(SA_ERR_INVALID_ARG, "positions is NULL but capacity is %zu", capacity);
    std::vector<uint64_t> held;
    s.memory_positions(layer, kv_head, held);
    *out_count = held.size();
    if (capacity < held.size())
      sa::fail(SA_ERR_BUFFER_TOO_SMALL, "%zu positions do not fit in a buffer of %zu", held.size(),
               capacity);
    std::copy(held.begin(), held.end(), positions);
  });
}

sa_status sa_session_head_stats(const sa_session* session, sa_head_stat* out, size_t capacity,
                                size_t* out_n) {
  return on_session(const_cast<sa_session*>(session), [&](sa::session& s) {
    if (!out_n) sa::fail(SA_ERR_INVALID_ARG, "out_n is NULL");
    const std::vector<sa::head_stat>& hs = s.head_stats();
    *out_n = hs.size();
    if (!out) return;
    for (size_t i = 0; i < std::min(capacity, hs.size()); ++i)
      out[i] = sa_head_stat{hs[i].layer, hs[i].head, hs[i].keys_attended, hs[i].keys_total,
                            hs[i].sample_budget, hs[i].rel_error};
  });
}

}  // extern "C"

// sa_session_save, sa_session_resume, sa_store_list, sa_store_delete and the autosave hook.
#include "api/handles.h"
#include <filesystem>

#include "store/session_config_codec.h"

using sa::api::guarded;
using sa::api::registry;
using sa::api::require_live;

namespace sa::api {

namespace {

void check_autosave(int32_t autosave) {
  if (autosave != SA_AUTOSAVE_OFF && autosave != SA_AUTOSAVE_PREFILL &&
      autosave != SA_AUTOSAVE_ALWAYS)
    fail(SA_ERR_INVALID_ARG, "autosave %d is not an SA_AUTOSAVE_* value", autosave);
}

int32_t memory_code(const std::string& name) {
  if (name == "dense") return SA_MEMORY_DENSE;
  if (name == "streaming") return SA_MEMORY_STREAMING;
  if (name == "cascade") return SA_MEMORY_CASCADE;
  return -1;
}

}  // namespace

void attach_store(sa_session& s, const sa_session_params& p) {
  check_autosave(p.autosave);
  if (!p.store_path && !p.session_id) {
    if (p.autosave != SA_AUTOSAVE_OFF)
      fail(SA_ERR_INVALID_ARG, "autosave needs store_path and session_id");
    return;
  }
  if (!p.store_path || !p.session_id)
    fail(SA_ERR_INVALID_ARG, "store_path and session_id go together; %s is NULL",
         p.store_path ? "session_id" : "store_path");
  s.saver = std::make_unique<store::session_saver>(p.store_path, p.session_id);
  s.autosave = p.autosave;
}

void autosave(sa_session& s, bool decode) {
  if (!s.saver) return;
  if (s.autosave == SA_AUTOSAVE_ALWAYS || (s.autosave == SA_AUTOSAVE_PREFILL && !decode))
    s.saver->save(*s.impl);
}

}  // namespace sa::api

extern "C" {

sa_status sa_session_save(sa_session* session) {
  if (!registry<sa_session>::contains(session))
    return guarded(nullptr, [&] { require_live(session, "session"); });
  return guarded(&session->errmsg, [&] {
    sa::api::require_not_in_prefill(*session, "sa_session_save");
    if (!session->saver)
      sa::fail(SA_ERR_MISUSE,
               "the session has no store: set store_path and session_id in its params");
    session->saver->save(*session->impl);
  });
}

sa_status sa_session_resume(sa_model* model, const sa_session_params* params,
                            sa_session** out_session) {
  return guarded(nullptr, [&] {
    if (!out_session) sa::fail(SA_ERR_INVALID_ARG, "out_session is NULL");
    *out_session = nullptr;
    require_live(model, "model");
    if (!params) sa::fail(SA_ERR_INVALID_ARG, "params is NULL: it names the stored session");
    sa_session_params defaults;
    sa_session_params_init(&defaults);
    const sa_session_params p = sa::api::read_params(params, defaults, "sa_session_params");
    if (!p.store_path || !p.session_id)
      sa::fail(SA_ERR_INVALID_ARG, "params.store_path and params.session_id must name the session");
    sa::session_config where;
    sa::api::choose_backend(p, where);
    if (p.n_threads < 0 || p.n_threads > 1024)
      sa::fail(SA_ERR_INVALID_ARG, "n_threads %d is outside [0, 1024]", p.n_threads);
    sa::api::check_autosave(p.autosave);
    auto s = std::make_unique<sa_session>();
    s->model = model->impl;
    s->impl = sa::store::session_saver::resume(model->impl, p.store_path, p.session_id,
                                               where.backend, where.device, p.n_threads, s->saver);
    if (p.prr_profile) s->impl->use_prr_profile(p.prr_profile);
    s->autosave = p.autosave;
    registry<sa_session>::add(s.get());
    *out_session = s.release();
  });
}

sa_status sa_store_list(const char* path, sa_store_list_fn callback, void* user_data) {
  return guarded(nullptr, [&] {
    if (!path || !callback) sa::fail(SA_ERR_INVALID_ARG, "path or callback is NULL");
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return;
    sa::store::session_store st(path, sa::store::session_store::open_mode::existing);
    for (const sa::store::session_row& r : st.list()) {
      sa_stored_session info{};
      info.struct_size = sizeof info;
      info.session_id = r.name.c_str();
      info.model_name = r.model_name.c_str();
      info.model_fingerprint = r.model_fingerprint;
      info.memory = sa::api::memory_code(r.memory);
      info.n_tokens = static_cast<uint64_t>(r.n_tokens);
      info.bytes = r.bytes;
      info.created = r.created;
      info.updated = r.updated;
      if (callback(&info, user_data) != 0) break;
    }
  });
}

sa_status sa_store_delete(const char* path, const char* session_id) {
  return guarded(nullptr, [&] {
    if (!path || !session_id) sa::fail(SA_ERR_INVALID_ARG, "path or session_id is NULL");
    sa::store::session_store st(path, sa::store::session_store::open_mode::existing);
    if (!st.remove(session_id))
      sa::fail(SA_ERR_INVALID_ARG, "store '%s' holds no session named '%s'", path, session_id);
  });
}

}  // extern "C"

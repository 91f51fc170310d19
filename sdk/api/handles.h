// What the opaque handles of sa.h hold, the registry of live handles, and the guard that
// turns C++ exceptions into statuses. Only sdk/api/ includes this file.
#pragma once

#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>

#include "core/error.h"
#include "sa/sa.h"
#include "session/session.h"
#include "store/session_saver.h"
#include "tokenizer/tokenizer.h"

struct sa_model {
  std::shared_ptr<const sa::model> impl;
};

struct sa_session {
  std::shared_ptr<const sa::model> model;  // keeps the weights alive
  std::unique_ptr<sa::session> impl;
  std::string errmsg;
  std::unique_ptr<sa::store::session_saver> saver;  // null without a store
  int32_t autosave = SA_AUTOSAVE_OFF;
  // Inside sa_prefill (whose progress callback may call back in): calls that change the session
  // are refused, and sa_session_destroy is deferred to the end of the call.
  bool in_prefill = false;
  bool destroy_requested = false;
};

namespace sa::api {
// Throws SA_ERR_MISUSE when `fn` is called on a session from inside its own sa_prefill.
void require_not_in_prefill(const sa_session& s, const char* fn);
}  // namespace sa::api

struct sa_detokenizer {
  std::shared_ptr<const sa::model> model;
  uint32_t flags = 0;
  sa::utf8_stream stream;
};

namespace sa::api {

// Addresses of the live handles of one kind. A handle is checked here before it is touched,
// so a NULL or destroyed handle is reported instead of dereferenced.
template <typename T>
class registry {
 public:
  static void add(const T* p) {
    std::lock_guard<std::mutex> lock(mutex());
    live().insert(p);
  }
  static bool remove(const T* p) {
    std::lock_guard<std::mutex> lock(mutex());
    return live().erase(p) != 0;
  }
  static bool contains(const T* p) {
    if (!p) return false;
    std::lock_guard<std::mutex> lock(mutex());
    return live().count(p) != 0;
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::unordered_set<const T*>& live() {
    static std::unordered_set<const T*> s;
    return s;
  }
};

// Records a failure for sa_last_error() (and the handle's own message when given).
void set_error(const char* message, std::string* handle_message);

// Runs f; maps what it throws to a status and records the message.
template <typename F>
sa_status guarded(std::string* handle_message, F&& f) noexcept {
  try {
    f();
    return SA_OK;
  } catch (const sa::error& e) {
    set_error(e.what(), handle_message);
    return e.status();
  } catch (const std::bad_alloc&) {
    set_error("out of memory", handle_message);
    return SA_ERR_NOMEM;
  } catch (const std::exception& e) {
    set_error((std::string("internal error: ") + e.what()).c_str(), handle_message);
    return SA_ERR_INTERNAL;
  } catch (...) {
    set_error("internal error: unknown exception", handle_message);
    return SA_ERR_INTERNAL;
  }
}

// Throws SA_ERR_MISUSE unless p is a live handle of its kind.
template <typename T>
void require_live(const T* p, const char* what) {
  if (!p) fail(SA_ERR_MISUSE, "%s is NULL", what);
  if (!registry<T>::contains(p)) fail(SA_ERR_MISUSE, "%s is not a live handle (destroyed?)", what);
}

// Copies a caller's versioned params struct over `defaults`. A struct from an older header
// (smaller) keeps the defaults for the fields it lacks; one from a newer header (larger) is
// accepted only when the fields this library does not know are all zero.
template <typename P>
P read_params(const P* in, const P& defaults, const char* what) {
  P out = defaults;
  if (!in) return out;
  const uint32_t size = in->struct_size;
  if (size < sizeof(uint32_t)) fail(SA_ERR_INVALID_ARG, "%s.struct_size %u is too small", what, size);
  if (size > sizeof(P)) {
    const unsigned char* extra = reinterpret_cast<const unsigned char*>(in) + sizeof(P);
    for (size_t i = 0; i < size - sizeof(P); ++i)
      if (extra[i])
        fail(SA_ERR_UNSUPPORTED, "%s sets fields this version of sa (%s) does not know", what,
             SA_VERSION_STRING);
  }
  std::memcpy(&out, in, size < sizeof(P) ? size : sizeof(P));
  out.struct_size = sizeof(P);
  return out;
}

// Copies a filled info struct into the caller's, up to the caller's struct_size.
template <typename P>
void write_info(P* out, P filled, const char* what) {
  if (!out) fail(SA_ERR_INVALID_ARG, "%s output pointer is NULL", what);
  const uint32_t size = out->struct_size;
  if (size < sizeof(uint32_t))
    fail(SA_ERR_INVALID_ARG, "%s.struct_size %u is too small (set it to sizeof)", what, size);
  filled.struct_size = size;
  std::memcpy(out, &filled, size < sizeof(P) ? size : sizeof(P));
}

// Session store hooks (api_store.cpp). attach_store binds a new session to the store its params
// name (nothing without store_path and session_id); autosave saves after a successful prefill
// (decode = false) or decode step when the session's autosave setting asks for it.
void attach_store(sa_session& s, const sa_session_params& p);
void autosave(sa_session& s, bool decode);

// The session's backend and device from its params (api_backend.cpp): AUTO picks the first
// CUDA device when there is one. Throws SA_ERR_UNSUPPORTED (kind not built, device absent) or
// SA_ERR_INVALID_ARG.
void choose_backend(const sa_session_params& p, sa::session_config& c);
void choose_kv_type(const sa_session_params& p, sa::session_config& c);
int32_t kv_type_code(sa::dtype t);
int32_t backend_code(sa::backend_kind k);

// Copies bytes to a caller buffer; SA_ERR_BUFFER_TOO_SMALL (with *out_len) when they don't fit.
void copy_out(const std::string& bytes, char* buf, size_t capacity, size_t* out_len,
              bool nul_terminate);

}  // namespace sa::api

// Version, status strings and the per-thread last error.
#include <cstring>

#include "api/handles.h"

namespace sa::api {

namespace {
thread_local std::string last_error;
}

void set_error(const char* message, std::string* handle_message) {
  try {
    last_error = message;
    if (handle_message) *handle_message = message;
  } catch (...) {  // out of memory while recording: keep whatever was there
  }
}

void require_not_in_prefill(const sa_session& s, const char* fn) {
  if (s.in_prefill)
    fail(SA_ERR_MISUSE, "%s was called on a session from inside its own sa_prefill (its progress "
         "callback): only reading calls and sa_session_destroy may be made there", fn);
}

void copy_out(const std::string& bytes, char* buf, size_t capacity, size_t* out_len,
              bool nul_terminate) {
  if (!out_len) fail(SA_ERR_INVALID_ARG, "out_len is NULL");
  if (!buf && capacity > 0) fail(SA_ERR_INVALID_ARG, "buf is NULL but capacity is %zu", capacity);
  *out_len = bytes.size();
  const size_t need = bytes.size() + (nul_terminate ? 1 : 0);
  if (capacity < need || (!buf && need > 0))
    fail(SA_ERR_BUFFER_TOO_SMALL, "the buffer holds %zu bytes but %zu are needed", capacity, need);
  if (!bytes.empty()) std::memcpy(buf, bytes.data(), bytes.size());
  if (nul_terminate) buf[bytes.size()] = '\0';
}

}  // namespace sa::api

extern "C" {

int32_t sa_version_number(void) { return SA_VERSION_NUMBER; }

const char* sa_version_string(void) { return SA_VERSION_STRING; }

const char* sa_errstr(sa_status status) {
  switch (status) {
    case SA_OK: return "ok";
    case SA_DONE: return "done: end of generation";
    case SA_ERR_INVALID_ARG: return "invalid argument";
    case SA_ERR_MISUSE: return "misuse: NULL or destroyed handle, or wrong state";
    case SA_ERR_IO: return "input/output error";
    case SA_ERR_FORMAT: return "malformed file";
    case SA_ERR_UNSUPPORTED: return "unsupported";
    case SA_ERR_NOMEM: return "out of memory";
    case SA_ERR_BACKEND: return "compute backend failure";
    case SA_ERR_STORE: return "session store failure";
    case SA_ERR_CONTEXT_FULL: return "context full";
    case SA_ERR_CANCELLED: return "cancelled";
    case SA_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case SA_ERR_INTERNAL: return "internal error";
    default: return "unknown status";
  }
}

const char* sa_last_error(void) { return sa::api::last_error.c_str(); }

}  // extern "C"

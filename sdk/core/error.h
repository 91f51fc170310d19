// sa::error — how failures travel inside the SDK.
//
// Internal C++ code reports a failure by throwing sa::error with a public status code and
// a message that names what was wrong (the key, the tensor, the offset...). The C ABI layer
// (sdk/api/) is the only place that catches: every extern "C" entry point turns the
// exception into its sa_status and stores the message on the handle. Nothing thrown here
// ever crosses the ABI.
#pragma once

#include <stdexcept>
#include <string>

#include "sa/sa.h"

namespace sa {

class error : public std::runtime_error {
 public:
  error(sa_status status, std::string message)
      : std::runtime_error(std::move(message)), status_(status) {}
  sa_status status() const noexcept { return status_; }

 private:
  sa_status status_;
};

// Throws sa::error(status, printf-formatted message).
[[noreturn]] void fail(sa_status status, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

}  // namespace sa

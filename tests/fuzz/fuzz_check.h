// Checks shared by the fuzz targets: a broken promise of sa.h aborts, so that libFuzzer and the
// corpus runner report it with the input that caused it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "sa/sa.h"

namespace sa_fuzz {

[[noreturn]] inline void broken(const char* what, sa_status status) {
  std::fprintf(stderr, "fuzz: %s (status %d: %s; last error: %s)\n", what, status,
               sa_errstr(status), sa_last_error());
  std::abort();
}

inline void require(bool ok, const char* what, sa_status status = SA_OK) {
  if (!ok) broken(what, status);
}

// status is SA_OK or one of the statuses the call documents; SA_ERR_INTERNAL ("a bug in sa")
// and anything undocumented abort.
inline void expect_status(sa_status status, std::initializer_list<sa_status> documented,
                          const char* call) {
  if (status == SA_OK) return;
  for (sa_status s : documented)
    if (status == s) return;
  broken(call, status);
}

}  // namespace sa_fuzz

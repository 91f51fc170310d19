// The --backend flag every app takes: auto, cpu or cuda (header-only, shared by the apps).
#pragma once

#include <cstdio>
#include <string>

#include "sa/sa.h"

// SA_BACKEND_* for a flag value, or -1 (after printing why) for an unknown one.
inline int32_t backend_from_flag(const std::string& v) {
  if (v == "auto") return SA_BACKEND_AUTO;
  if (v == "cpu") return SA_BACKEND_CPU;
  if (v == "cuda") return SA_BACKEND_CUDA;
  std::fprintf(stderr, "unknown --backend '%s' (auto, cpu or cuda)\n", v.c_str());
  return -1;
}

// "cpu" or "cuda:N" for a session's stats.
inline std::string backend_label(const sa_stats& st) {
  return st.backend == SA_BACKEND_CUDA ? "cuda:" + std::to_string(st.device) : std::string("cpu");
}

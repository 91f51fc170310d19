// The --backend flag the apps take: auto, cpu, cuda or vulkan (header-only, shared by the apps).
#pragma once

#include <cstdio>
#include <string>

#include "sa/sa.h"

// The flag's help text.
inline const char* backend_flag_help() {
  return "auto (a CUDA GPU when there is one, else a Vulkan GPU, else the CPU), cpu, cuda or vulkan";
}

// SA_BACKEND_* for a flag value, or -1 (after printing why) for an unknown one.
inline int32_t backend_from_flag(const std::string& v) {
  if (v == "auto") return SA_BACKEND_AUTO;
  if (v == "cpu") return SA_BACKEND_CPU;
  if (v == "cuda") return SA_BACKEND_CUDA;
  if (v == "vulkan") return SA_BACKEND_VULKAN;
  std::fprintf(stderr, "unknown --backend '%s' (auto, cpu, cuda or vulkan)\n", v.c_str());
  return -1;
}

// "cpu", "cuda:N" or "vulkan:N" for a session's stats.
inline std::string backend_label(const sa_stats& st) {
  switch (st.backend) {
    case SA_BACKEND_CUDA: return "cuda:" + std::to_string(st.device);
    case SA_BACKEND_VULKAN: return "vulkan:" + std::to_string(st.device);
    default: return "cpu";
  }
}

// prr_profile_fuzz: arbitrary bytes as a PRR profile file (sa_session_params.prr_profile) for a
// Quest + PRR session of the shipped model on the CPU.
//
// sa.h: a profile that cannot be read fails creation with SA_ERR_IO, a malformed one with
// SA_ERR_FORMAT naming its line, one without a profile for the session with SA_ERR_INVALID_ARG;
// so every input either makes a session or fails with one of those and no session. A session
// that is made decodes a step, so that the r the profile gives is used.
// Seeds: profiles for the shipped model on this machine's CPU and variants (make_fuzz_seeds.cpp).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "fuzz_check.h"

using sa_fuzz::expect_status;
using sa_fuzz::require;

namespace {

sa_model* shipped() {
  static sa_model* model = [] {
    sa_model* m = nullptr;
    expect_status(sa_model_load(SA_MODELS_DIR "/sa-default-q8_0.gguf", nullptr, &m), {}, "sa_model_load");
    return m;
  }();
  return model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("sa-prr-profile-fuzz-" + std::to_string(::getpid()) + ".txt"))
          .string();
  FILE* f = std::fopen(path.c_str(), "wb");
  require(f != nullptr, "cannot write the input to a temporary file");
  require(std::fwrite(data, 1, size, f) == size, "cannot write the input to a temporary file");
  std::fclose(f);

  sa_session_params p;
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_CPU;
  p.n_threads = 1;
  p.n_ctx = 512;
  p.sparse = SA_SPARSE_QUEST;
  p.budget_tokens = 64;
  p.dense_layers = 0;
  p.speculation = SA_SPECULATION_PRR;
  p.prr_profile = path.c_str();
  sa_session* s = nullptr;
  const sa_status st = sa_session_create(shipped(), &p, &s);
  expect_status(st, {SA_ERR_FORMAT, SA_ERR_INVALID_ARG}, "sa_session_create with a PRR profile");
  require((st == SA_OK) == (s != nullptr), "a session exactly when creation succeeds", st);
  if (s) {
    // 96 tokens: 6 pages, past the 4 of the budget, so the step is sparse and PRR predicts.
    std::vector<int32_t> prompt(96);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(400 + i);
    expect_status(sa_prefill(s, prompt.data(), prompt.size(), nullptr, nullptr), {}, "sa_prefill");
    int32_t tok = 0;
    expect_status(sa_decode_step(s, 5, &tok), {SA_DONE}, "sa_decode_step");
    sa_stats stats{};
    stats.struct_size = sizeof stats;
    expect_status(sa_session_stats(s, &stats), {}, "sa_session_stats");
    require(stats.prr_ratio > 0.0 && stats.prr_ratio <= 16.0, "the step's r is in (0, 16]");
    sa_session_destroy(s);
  }
  std::remove(path.c_str());
  return 0;
}

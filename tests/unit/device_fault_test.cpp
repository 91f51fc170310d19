// A GPU lost under live sessions. A kernel that traps is launched into the CUDA context the
// sessions use (through the driver API, opened here), which leaves that context in the sticky
// error a device fault or a fallen-off-the-bus GPU leaves: every later use of it fails. Each
// session on it must then refuse its calls with SA_ERR_BACKEND and a message — decode steps,
// prefills, saves — without crashing; destroying it must not crash; and the process goes on
// working on the CPU. Skipped where no CUDA device is present. The context stays broken, so
// this file holds one test and runs as its own process.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "sa/sa.h"
#include "session_checks.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

// One kernel that executes `trap`, as PTX (compiled by the driver for whatever GPU runs it).
constexpr char k_trap_ptx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry sa_test_trap()\n{\n\ttrap;\n}\n";

// Launches the trap into the calling thread's current context and waits for it; returns the
// driver's status of the wait (non-zero: the context is broken), or -1 with *why on the way.
int break_the_context(std::string* why) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *why = dlerror();
    return -1;
  }
  using ctx_get_fn = int (*)(void**);
  using load_fn = int (*)(void**, const void*);
  using get_fn = int (*)(void**, void*, const char*);
  using launch_fn = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                            void**, void**);
  using sync_fn = int (*)();
  const auto ctx_get = reinterpret_cast<ctx_get_fn>(dlsym(lib, "cuCtxGetCurrent"));
  const auto load = reinterpret_cast<load_fn>(dlsym(lib, "cuModuleLoadData"));
  const auto get = reinterpret_cast<get_fn>(dlsym(lib, "cuModuleGetFunction"));
  const auto launch = reinterpret_cast<launch_fn>(dlsym(lib, "cuLaunchKernel"));
  const auto sync = reinterpret_cast<sync_fn>(dlsym(lib, "cuCtxSynchronize"));
  if (!ctx_get || !load || !get || !launch || !sync) {
    *why = "a driver entry point is missing";
    return -1;
  }
  void* ctx = nullptr;
  if (ctx_get(&ctx) != 0 || !ctx) {
    *why = "no current CUDA context on this thread";
    return -1;
  }
  void* module = nullptr;
  void* fn = nullptr;
  if (load(&module, k_trap_ptx) != 0 || get(&fn, module, "sa_test_trap") != 0) {
    *why = "the trap kernel did not load";
    return -1;
  }
  if (launch(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != 0) {
    *why = "the trap kernel did not launch";
    return -1;
  }
  return sync();
}

}  // namespace

TEST(device_fault, a_lost_gpu_fails_every_call_of_its_sessions_and_the_cpu_goes_on) {
  if (sa_test::first_cuda_device() < 0) GTEST_SKIP() << "no CUDA device";
  sa_model* model = nullptr;
  ASSERT_EQ(sa_model_load((sa_test::models_dir() + "/sa-default-q8_0.gguf").c_str(), nullptr, &model), SA_OK) << sa_last_error();
  const std::vector<int32_t> prompt = sa_test::token_stream(40, 5);
  const std::string db = sa_test::temp_path("sa_device_fault.db");
  sa_test::remove_store(db);

  // A dense and a cascade session on the GPU, both past a prefill and a step.
  sa_session* s[2] = {nullptr, nullptr};
  for (int i = 0; i < 2; ++i) {
    sa_session_params p;
    sa_session_params_init(&p);
    p.backend = SA_BACKEND_CUDA;
    p.n_ctx = 1024;
    if (i == 1) {
      p.memory = SA_MEMORY_CASCADE;
      p.n_sinks = 4;
      p.cache_tokens = 4 + 4 * 16;
      p.n_cascades = 4;
    }
    p.store_path = db.c_str();
    p.session_id = i == 0 ? "s0" : "s1";
    ASSERT_EQ(sa_session_create(model, &p, &s[i]), SA_OK) << sa_last_error();
    ASSERT_EQ(sa_prefill(s[i], prompt.data(), prompt.size(), nullptr, nullptr), SA_OK) << sa_session_errmsg(s[i]);
    int32_t next = -1;
    ASSERT_EQ(sa_decode_step(s[i], prompt.back(), &next), SA_OK) << sa_session_errmsg(s[i]);
    ASSERT_EQ(sa_session_save(s[i]), SA_OK) << sa_session_errmsg(s[i]);
  }

  std::string why;
  const int rc = break_the_context(&why);
  ASSERT_NE(rc, -1) << why;
  ASSERT_NE(rc, 0) << "the trap did not break the context";
  std::printf("the context's status after the trap: %d\n", rc);

  for (int i = 0; i < 2; ++i) {
    int32_t next = -1;
    for (int attempt = 0; attempt < 2; ++attempt) {  // refused again, not crashed, the second time
      EXPECT_EQ(sa_decode_step(s[i], prompt.back(), &next), SA_ERR_BACKEND) << i;
      EXPECT_STRNE(sa_session_errmsg(s[i]), "") << i;
      EXPECT_EQ(sa_prefill(s[i], prompt.data(), 8, nullptr, nullptr), SA_ERR_BACKEND) << i;
    }
    EXPECT_NE(sa_session_save(s[i]), SA_OK) << i;
    std::printf("session %d: %s\n", i, sa_session_errmsg(s[i]));
    sa_session_destroy(s[i]);
  }

  // The saves from before the fault resume on the CPU, and a CPU session decodes.
  sa_session_params p;
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_CPU;
  p.n_ctx = 1024;
  p.store_path = db.c_str();
  p.session_id = "s0";
  sa_session* cpu = nullptr;
  ASSERT_EQ(sa_session_resume(model, &p, &cpu), SA_OK) << sa_last_error();
  int32_t next = -1;
  EXPECT_EQ(sa_test::session_tokens(cpu).size(), prompt.size() + 1);
  ASSERT_EQ(sa_decode_step(cpu, prompt.back(), &next), SA_OK) << sa_session_errmsg(cpu);
  EXPECT_GE(next, 0);
  sa_session_destroy(cpu);

  // A new session on the broken device is refused with a status, not a crash.
  sa_session_params_init(&p);
  p.backend = SA_BACKEND_CUDA;
  sa_session* again = nullptr;
  const sa_status st = sa_session_create(model, &p, &again);
  EXPECT_TRUE(st == SA_ERR_BACKEND || st == SA_ERR_UNSUPPORTED || st == SA_ERR_NOMEM) << st << ": " << sa_last_error();
  EXPECT_EQ(again, nullptr);
  sa_model_destroy(model);
  sa_test::remove_store(db);
}

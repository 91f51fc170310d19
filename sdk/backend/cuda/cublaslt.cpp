#include "backend/cuda/cublaslt.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"

namespace sa::cuda {

namespace {

// The entry points used, resolved from the loaded library.
struct api {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  std::string why_absent;  // empty when loaded
};

template <typename F>
bool resolve(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

// Loaded once per process and never unloaded (handles of any backend may use it until exit).
const api& library() {
  static const api a = [] {
    api r;
    const char* env = std::getenv("SA_CUDA_CUBLASLT");
    void* lib = nullptr;
    if (env && *env && std::strcmp(env, "0") != 0) {
      lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    } else {
      for (const char* name : {"libcublasLt.so.13", "libcublasLt.so"})
        if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (!lib) {
      const char* e = dlerror();
      r.why_absent = std::string("libcublasLt not loaded: ") + (e ? e : "not found");
      return r;
    }
    const bool ok = resolve(lib, "cublasLtCreate", r.create) && resolve(lib, "cublasLtDestroy", r.destroy) &&
                    resolve(lib, "cublasLtMatmulDescCreate", r.desc_create) &&
                    resolve(lib, "cublasLtMatmulDescSetAttribute", r.desc_set) &&
                    resolve(lib, "cublasLtMatmulDescDestroy", r.desc_destroy) &&
                    resolve(lib, "cublasLtMatrixLayoutCreate", r.layout_create) &&
                    resolve(lib, "cublasLtMatrixLayoutDestroy", r.layout_destroy) &&
                    resolve(lib, "cublasLtMatmulPreferenceCreate", r.pref_create) &&
                    resolve(lib, "cublasLtMatmulPreferenceSetAttribute", r.pref_set) &&
                    resolve(lib, "cublasLtMatmulPreferenceDestroy", r.pref_destroy) &&
                    resolve(lib, "cublasLtMatmulAlgoGetHeuristic", r.heuristic) &&
                    resolve(lib, "cublasLtMatmul", r.matmul);
    if (!ok) {
      r = api{};
      r.why_absent = "libcublasLt lacks an entry point this build calls";
      dlclose(lib);
    }
    return r;
  }();
  return a;
}

}  // namespace

// One shape's descriptors and the kernel the heuristics chose for it.
struct cublaslt::plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool usable = false;
  ~plan() {
    const api& l = library();
    if (c) l.layout_destroy(c);
    if (b) l.layout_destroy(b);
    if (a) l.layout_destroy(a);
    if (desc) l.desc_destroy(desc);
  }
};

std::unique_ptr<cublaslt> cublaslt::open(std::string* why) {
  const char* env = std::getenv("SA_CUDA_CUBLASLT");
  if (env && std::strcmp(env, "0") == 0) {
    if (why) *why = "turned off by SA_CUDA_CUBLASLT=0";
    return nullptr;
  }
  const api& l = library();
  if (!l.why_absent.empty()) {
    if (why) *why = l.why_absent;
    return nullptr;
  }
  cublasLtHandle_t h = nullptr;
  const cublasStatus_t st = l.create(&h);
  if (st != CUBLAS_STATUS_SUCCESS) {
    if (why) *why = "cublasLtCreate failed with status " + std::to_string(static_cast<int>(st));
    return nullptr;
  }
  return std::unique_ptr<cublaslt>(new cublaslt(h));
}

cublaslt::cublaslt(void* handle) : handle_(handle) {}

cublaslt::~cublaslt() {
  plans_.clear();
  library().destroy(static_cast<cublasLtHandle_t>(handle_));
}

const cublaslt::plan* cublaslt::plan_for(int64_t m, int64_t n, int64_t k, int64_t ldy, bool accumulate) {
  std::unique_ptr<plan>& slot = plans_[{m, n, k, ldy, accumulate ? 1 : 0}];
  if (slot) return slot.get();
  slot = std::make_unique<plan>();
  plan& p = *slot;
  const api& l = library();
  // Column-major view of the row-major product: y^T [n x m] = (w as k x n)^T (x as k x m).
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  bool ok = l.desc_create(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
            l.desc_set(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)) == CUBLAS_STATUS_SUCCESS &&
            l.desc_set(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)) == CUBLAS_STATUS_SUCCESS &&
            l.layout_create(&p.a, CUDA_R_16F, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k) ==
                CUBLAS_STATUS_SUCCESS &&
            l.layout_create(&p.b, CUDA_R_16F, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k) ==
                CUBLAS_STATUS_SUCCESS &&
            l.layout_create(&p.c, CUDA_R_32F, static_cast<uint64_t>(n), static_cast<uint64_t>(m), ldy) ==
                CUBLAS_STATUS_SUCCESS;
  if (!ok) return slot.get();
  cublasLtMatmulPreference_t pref = nullptr;
  if (l.pref_create(&pref) != CUBLAS_STATUS_SUCCESS) return slot.get();
  const uint64_t ws = k_workspace_bytes;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (l.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)) == CUBLAS_STATUS_SUCCESS &&
      l.heuristic(static_cast<cublasLtHandle_t>(handle_), p.desc, p.a, p.b, p.c, p.c, pref, 1, &result,
                  &found) == CUBLAS_STATUS_SUCCESS &&
      found > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    p.algo = result.algo;
    p.usable = true;
  }
  l.pref_destroy(pref);
  return slot.get();
}

bool cublaslt::supports(int64_t m, int64_t n, int64_t k, int64_t ldy, bool accumulate) {
  return plan_for(m, n, k, ldy, accumulate)->usable;
}

void cublaslt::gemm(const void* w, const void* x, int64_t m, int64_t n, int64_t k, float* y, int64_t ldy,
                    bool accumulate, void* workspace, cudaStream_t s) {
  const plan* p = plan_for(m, n, k, ldy, accumulate);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const cublasStatus_t st =
      p->usable ? library().matmul(static_cast<cublasLtHandle_t>(handle_), p->desc, &alpha, w, p->a, x, p->b,
                                   &beta, y, p->c, y, p->c, &p->algo, workspace, k_workspace_bytes, s)
                : CUBLAS_STATUS_NOT_SUPPORTED;
  if (st != CUBLAS_STATUS_SUCCESS)
    fail(SA_ERR_BACKEND, "cuBLASLt: a %lld x %lld x %lld product failed with status %d",
         static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), static_cast<int>(st));
}

}  // namespace sa::cuda

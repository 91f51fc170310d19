#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"
#include "policy/vattention.h"

namespace sa::cuda {

namespace {
constexpr size_t k_ring_bytes = 8u << 20;      // pinned staging for small uploads
constexpr size_t k_small_upload = 1u << 20;    // larger uploads copy synchronously
constexpr size_t k_max_download_chunk = 64u << 20;

enum scratch_slot : size_t {
  k_attention = 0,
  k_swiglu_up = 1,
  k_sampling = 2,
  k_lt_x = 3,        // the rows of a library product as f16
  k_lt_weights = 4,  // a band of weight rows dequantized to f16
  k_lt_work = 5,     // cuBLASLt's workspace
  k_gemv_inputs = 6, // the rows of a matrix-vector product quantized to int16
  k_unseen_sets = 7, // RetroAttention: the key sets of past rows' unseen pages
  k_vattention = 8,  // vAttention: the draws' partials, the pilot's scores and norms
  k_sets = 9,        // attention over key sets: split partials and merge counters (apart from
                     // k_attention, which PRR's side stream may use meanwhile)
  k_slots = 10
};
// A band of dequantized weight rows: at most this many bytes (it stays in L2 between the
// dequantization and the product).
constexpr int64_t k_band_bytes = 32 << 20;
// Rows from which a product of dequantized weights goes to the library (fewer rows do not pay
// for writing the f16 weights).
constexpr int64_t k_lt_min_rows_dequantized = 128;

etype etype_of(dtype t) { return static_cast<etype>(static_cast<uint32_t>(t)); }

uint8_t* dev(const tensor& t) {
  if (!t.buf) fail(SA_ERR_INTERNAL, "cuda backend: tensor without a buffer");
  const auto* b = dynamic_cast<const cuda_buffer*>(t.buf);
  if (!b) fail(SA_ERR_INTERNAL, "cuda backend: buffer belongs to another backend");
  if (t.offset > b->size() || t.n_bytes() > b->size() - t.offset)
    fail(SA_ERR_INTERNAL, "cuda backend: tensor of %zu bytes at %zu outside a buffer of %zu",
         t.n_bytes(), t.offset, b->size());
  return b->data() + t.offset;
}
template <typename T>
T* ptr(const tensor& t) {
  return reinterpret_cast<T*>(dev(t));
}
const int32_t* ints(const tensor& t) {
  if (t.type != dtype::i32) fail(SA_ERR_INTERNAL, "cuda backend: metadata of type %s", traits(t.type).name);
  return ptr<const int32_t>(t);
}

// The page table of a selection (pages [rankers][select_bound], plan on the device).
page_table page_table_of(const tensor& pages, int64_t select_bound, const tensor& plan, int32_t page_size,
                         bool group_mean) {
  page_table pt;
  pt.pages = ints(pages);
  pt.plan = ints(plan);
  pt.stride = select_bound;
  pt.page_size = page_size;
  pt.per_head = group_mean ? 0 : 1;
  return pt;
}

bool is_kv_type(dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }

weight_ref weight_of(const tensor& w) {
  weight_ref r;
  r.base = dev(w);
  r.type = etype_of(w.type);
  r.cols = w.ne[0];
  r.rows = w.rows();
  return r;
}
}  // namespace

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
  if (e == cudaErrorMemoryAllocation)
    fail(SA_ERR_NOMEM, "CUDA: %s: out of device memory (%s)", what, cudaGetErrorString(e));
  fail(SA_ERR_BACKEND, "CUDA: %s failed: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

// ---- buffers -----------------------------------------------------------------------------------

cuda_buffer::cuda_buffer(int device, size_t bytes) : device_(device), size_(bytes) {
  check(cudaSetDevice(device), "cudaSetDevice");
  void* p = nullptr;
  const cudaError_t a = cudaMalloc(&p, bytes == 0 ? 16 : bytes);
  if (a == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    fail(SA_ERR_NOMEM, "CUDA: out of device memory: %zu bytes asked for, %zu free of %zu on device %d",
         bytes, free_bytes, total, device);
  }
  check(a, "cudaMalloc");
  data_ = static_cast<uint8_t*>(p);
  // Zero-filled, and done before the buffer is handed out: the memset runs on the legacy
  // stream, which the backends' non-blocking streams do not wait for.
  const cudaError_t e = cudaMemset(p, 0, bytes == 0 ? 16 : bytes);
  const cudaError_t w = e == cudaSuccess ? cudaStreamSynchronize(nullptr) : e;
  if (w != cudaSuccess) {
    cudaFree(p);
    check(w, "cudaMemset");
  }
}

cuda_buffer::~cuda_buffer() {
  if (cudaSetDevice(device_) == cudaSuccess) cudaFree(data_);
}

// ---- the backend -------------------------------------------------------------------------------

cuda_backend::cuda_backend(int device) : device_(device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  n_sms_ = prop.multiProcessorCount;
  // The main stream ranks above the side stream (PRR's speculation and its tail): where both
  // have blocks waiting, the main one's run first (SA_CUDA_PRIORITY=0: both at the default,
  // a diagnostic).
  int least = 0, greatest = 0;
  const char* prio = std::getenv("SA_CUDA_PRIORITY");
  if ((prio && std::strcmp(prio, "0") == 0) || cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess)
    least = greatest = 0;
  cudaGetLastError();
  check(cudaStreamCreateWithPriority(&main_, cudaStreamNonBlocking, greatest), "cudaStreamCreate");
  stream_ = main_;
  check(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, least), "cudaStreamCreate");
  check(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming), "cudaEventCreate");
  // SA_CUDA_SIDE_STREAM=0 keeps side ops on the main stream (a diagnostic: the same results).
  const char* side = std::getenv("SA_CUDA_SIDE_STREAM");
  side_enabled_ = !(side && std::strcmp(side, "0") == 0);
  void* ring = nullptr;
  check(cudaHostAlloc(&ring, k_ring_bytes, cudaHostAllocDefault), "cudaHostAlloc");
  up_ring_ = static_cast<uint8_t*>(ring);
  up_size_ = k_ring_bytes;
  scratch_.resize(k_slots);
  lt_ = cublaslt::open(&lt_why_);
  // SA_CUDA_GRAPHS=0 runs every step eagerly (a diagnostic: recorded and eager steps run the
  // same kernels, so their results must be identical).
  const char* g = std::getenv("SA_CUDA_GRAPHS");
  graphs_ = !(g && std::strcmp(g, "0") == 0);
  // SA_CUDA_RETRO_ONE_PASS=0 corrects RetroAttention's past rows by their own ops, after the
  // decode row's attention (a diagnostic: the same results, summed in another order).
  const char* rp = std::getenv("SA_CUDA_RETRO_ONE_PASS");
  retro_one_pass_ = !(rp && std::strcmp(rp, "0") == 0);
}

cuda_backend::~cuda_backend() {
  cudaSetDevice(device_);
  if (main_) cudaStreamSynchronize(main_);
  if (side_) cudaStreamSynchronize(side_);
  for (auto& [key, st] : steps_)
    if (st.exec) cudaGraphExecDestroy(st.exec);
  lt_.reset();
  for (const pending_upload& p : up_pending_) cudaEventDestroy(p.done);
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  scratch_.clear();
  if (up_ring_) cudaFreeHost(up_ring_);
  if (down_) cudaFreeHost(down_);
  if (fork_) cudaEventDestroy(fork_);
  if (join_) cudaEventDestroy(join_);
  if (side_) cudaStreamDestroy(side_);
  if (main_) cudaStreamDestroy(main_);
}

void cuda_backend::begin_side() {
  // (A step that failed between begin and join left its side behind: it is dropped.)
  stream_ = main_;
  side_unjoined_ = false;
  side_open_ = true;
  if (!side_enabled_) return;
  check(cudaEventRecord(fork_, main_), "cudaEventRecord");
  check(cudaStreamWaitEvent(side_, fork_, 0), "cudaStreamWaitEvent");
  stream_ = side_;
}

void cuda_backend::end_side() {
  if (!side_open_) fail(SA_ERR_INTERNAL, "cuda backend: end_side without begin_side");
  side_open_ = false;
  side_unjoined_ = true;
  if (!side_enabled_) return;
  stream_ = main_;
  check(cudaEventRecord(join_, side_), "cudaEventRecord");
}

void cuda_backend::join_side() {
  if (!side_unjoined_) fail(SA_ERR_INTERNAL, "cuda backend: join_side without a side queue");
  side_unjoined_ = false;
  if (!side_enabled_) return;
  check(cudaStreamWaitEvent(main_, join_, 0), "cudaStreamWaitEvent");
}

void cuda_backend::bind_thread() { check(cudaSetDevice(device_), "cudaSetDevice"); }

buffer_ptr cuda_backend::alloc(size_t bytes) {
  if (capturing_) fail(SA_ERR_INTERNAL, "cuda backend: allocation inside a recorded step");
  return std::make_unique<cuda_buffer>(device_, bytes);
}

void cuda_backend::upload(buffer& dst, size_t offset, const void* src, size_t n) {
  if (capturing_) fail(SA_ERR_INTERNAL, "cuda backend: upload inside a recorded step");
  auto* b = dynamic_cast<cuda_buffer*>(&dst);
  if (!b || offset > b->size() || n > b->size() - offset)
    fail(SA_ERR_INTERNAL, "cuda backend: upload of %zu bytes at %zu outside its buffer", n, offset);
  if (n == 0) return;
  if (n > k_small_upload) {
    check(cudaMemcpyAsync(b->data() + offset, src, n, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return;
  }
  // A region of the pinned ring: wrap to its start when the tail is too short, and wait for
  // the copies still reading the bytes about to be reused.
  size_t begin = up_head_;
  if (begin + n > up_size_) {
    while (!up_pending_.empty() && up_pending_.front().begin >= begin) {
      check(cudaEventSynchronize(up_pending_.front().done), "cudaEventSynchronize");
      free_events_.push_back(up_pending_.front().done);
      up_pending_.pop_front();
    }
    begin = 0;
  }
  const size_t end = begin + n;
  while (!up_pending_.empty() && up_pending_.front().begin < end && up_pending_.front().end > begin) {
    check(cudaEventSynchronize(up_pending_.front().done), "cudaEventSynchronize");
    free_events_.push_back(up_pending_.front().done);
    up_pending_.pop_front();
  }
  std::memcpy(up_ring_ + begin, src, n);
  check(cudaMemcpyAsync(b->data() + offset, up_ring_ + begin, n, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync");
  cudaEvent_t ev;
  if (free_events_.empty()) {
    check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
  } else {
    ev = free_events_.back();
    free_events_.pop_back();
  }
  check(cudaEventRecord(ev, stream_), "cudaEventRecord");
  up_pending_.push_back({begin, end, ev});
  up_head_ = (end + 255) / 256 * 256;
}

void cuda_backend::download(const buffer& src, size_t offset, void* dst, size_t n) {
  if (capturing_) fail(SA_ERR_INTERNAL, "cuda backend: download inside a recorded step");
  const auto* b = dynamic_cast<const cuda_buffer*>(&src);
  if (!b || offset > b->size() || n > b->size() - offset)
    fail(SA_ERR_INTERNAL, "cuda backend: download of %zu bytes at %zu outside its buffer", n, offset);
  const size_t chunk = std::min(std::max(n, size_t{4096}), k_max_download_chunk);
  if (down_size_ < chunk) {
    if (down_) cudaFreeHost(down_);
    down_ = nullptr;
    down_size_ = 0;
    void* p = nullptr;
    check(cudaHostAlloc(&p, chunk, cudaHostAllocDefault), "cudaHostAlloc");
    down_ = static_cast<uint8_t*>(p);
    down_size_ = chunk;
  }
  for (size_t done = 0; done < n;) {
    const size_t m = std::min(n - done, down_size_);
    check(cudaMemcpyAsync(down_, b->data() + offset + done, m, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_), "the step (a kernel failed or a copy could not run)");
    std::memcpy(static_cast<uint8_t*>(dst) + done, down_, m);
    done += m;
  }
  if (n == 0) check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

void cuda_backend::synchronize() {
  check(cudaStreamSynchronize(stream_), "the step (a kernel failed or a copy could not run)");
}

size_t cuda_backend::weight_size(dtype type, int64_t cols, int64_t rows) const {
  return device_weight_planes(type, cols, rows).bytes;
}

void cuda_backend::upload_weight(buffer& dst, size_t offset, const void* file_bytes, dtype type,
                                 int64_t cols, int64_t rows) {
  const size_t bytes = weight_size(type, cols, rows);
  std::vector<uint8_t> host(bytes, 0);
  repack_weight(type, static_cast<const uint8_t*>(file_bytes), cols, rows, host.data());
  auto* b = dynamic_cast<cuda_buffer*>(&dst);
  if (!b || offset > b->size() || bytes > b->size() - offset)
    fail(SA_ERR_INTERNAL, "cuda backend: weight of %zu bytes at %zu outside its buffer", bytes, offset);
  check(cudaMemcpyAsync(b->data() + offset, host.data(), bytes, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

void* cuda_backend::scratch(size_t slot, size_t bytes) {
  std::unique_ptr<cuda_buffer>& b = scratch_[slot];
  if (!b || b->size() < bytes) {
    if (capturing_) fail(SA_ERR_INTERNAL, "cuda backend: scratch growth inside a recorded step");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");  // the old one may be in use
    const size_t size = std::max(bytes, b ? b->size() * 2 : bytes);
    b.reset();
    b = std::make_unique<cuda_buffer>(device_, size);
    ++generation_;
  }
  return b->data();
}

void cuda_backend::run_step(uint64_t key, const std::function<void()>& enqueue) {
  if (!graphs_) {
    enqueue();
    ++counts_.eager;
    return;
  }
  recorded_step& st = steps_[key];
  if (st.exec && st.generation == generation_) {
    check(cudaGraphLaunch(st.exec, stream_), "cudaGraphLaunch");
    ++counts_.replayed;
    return;
  }
  if (st.exec) {  // stale: a scratch buffer moved since it was recorded
    cudaGraphExecDestroy(st.exec);
    st.exec = nullptr;
    st.seen = 0;
  }
  if (st.seen++ == 0) {  // first time: run eagerly, so lazily sized scratch settles
    enqueue();
    ++counts_.eager;
    return;
  }
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  capturing_ = true;
  cudaGraph_t graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    capturing_ = false;
    stream_ = main_;  // a side queue the failure left open is abandoned with the capture
    side_open_ = side_unjoined_ = false;
    cudaStreamEndCapture(stream_, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  capturing_ = false;
  check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority);
  cudaGraphDestroy(graph);
  check(e, "cudaGraphInstantiate");
  st.exec = exec;
  st.generation = generation_;
  ++counts_.recorded;
  check(cudaGraphLaunch(st.exec, stream_), "cudaGraphLaunch");
}

// ---- ops ---------------------------------------------------------------------------------------

void cuda_backend::embed(const tensor& table, const tensor& ids, const tensor& out) {
  check(launch_embed(weight_of(table), ints(ids), ids.elements(), ptr<float>(out), stream_), "embed");
}

void cuda_backend::products(const tensor& x, std::span<const tensor> w, std::span<const tensor> y,
                            epilogue ep) {
  const int64_t n = x.rows();
  product_task tasks[3];
  bool gemv = n <= 8, gemm = true;
  for (size_t j = 0; j < w.size(); ++j) {
    // SwiGLU: gate and up (w[0], w[1]) make one output, y[0].
    const tensor& out = ep == epilogue::swiglu ? y[0] : y[j];
    if (x.ne[0] != w[j].ne[0] || out.rows() != n || out.ne[0] != w[j].rows())
      fail(SA_ERR_INTERNAL, "matmul: shapes w[%lld][%lld] x[%lld][%lld] y[%lld][%lld] disagree",
           static_cast<long long>(w[j].rows()), static_cast<long long>(w[j].ne[0]),
           static_cast<long long>(n), static_cast<long long>(x.ne[0]),
           static_cast<long long>(out.rows()), static_cast<long long>(out.ne[0]));
    tasks[j].w = weight_of(w[j]);
    tasks[j].y = ptr<float>(out);
    gemv = gemv && gemv_supported(tasks[j].w) && tasks[j].w.type == tasks[0].w.type;
    gemm = gemm && gemm_supported(tasks[j].w);
  }
  const int32_t count = static_cast<int32_t>(w.size());
  if (gemv) {
    const size_t bytes = gemv_input_bytes(tasks[0].w, n);
    void* inputs = bytes ? scratch(k_gemv_inputs, bytes) : nullptr;
    check(launch_gemv(tasks, count, ptr<float>(x), n, ep, inputs, stream_), "matmul (gemv)");
  } else if (gemm && ep != epilogue::swiglu) {
    gemm_products(tasks, count, ptr<float>(x), n, ep == epilogue::accumulate);
  } else if (gemm) {
    // silu(x gate^T) * (x up^T): two products, the second into scratch, then the SwiGLU.
    const int64_t n_ff = w[0].rows();
    float* up = static_cast<float*>(scratch(k_swiglu_up, static_cast<size_t>(n * n_ff) * sizeof(float)));
    product_task gu[2] = {tasks[0], tasks[1]};
    gu[1].y = up;
    gemm_products(gu, 2, ptr<float>(x), n, false);
    check(launch_swiglu(gu[0].y, up, gu[0].y, n * n_ff, stream_), "swiglu");
  } else {
    check(launch_matmul_generic(tasks, count, ptr<float>(x), n, ep, stream_), "matmul (generic)");
  }
}

void cuda_backend::gemm_products(const product_task* tasks, int32_t count, const float* x, int64_t n,
                                 bool accumulate) {
  const epilogue ep = accumulate ? epilogue::accumulate : epilogue::store;
  const int64_t k = tasks[0].w.cols;
  // Each task goes to the library when it is loaded, has kernels for the shapes and, for weights
  // that must be dequantized first, the rows pay for it; else to the project's kernel.
  auto band_rows = [&](const weight_ref& w) {
    if (w.type == etype::f16) return w.rows;
    return std::min(w.rows, std::max<int64_t>(256, k_band_bytes / (k * 2) / 256 * 256));
  };
  auto to_library = [&](const weight_ref& w) {
    if (!lt_ || (w.type != etype::f16 && n < k_lt_min_rows_dequantized)) return false;
    const int64_t band = band_rows(w), last = w.rows % band;
    return lt_->supports(n, band, k, w.rows, accumulate) &&
           (last == 0 || lt_->supports(n, last, k, w.rows, accumulate));
  };
  void* xh = nullptr;
  for (int32_t t = 0; t < count; ++t) {
    const weight_ref& w = tasks[t].w;
    if (!to_library(w)) {
      check(launch_gemm(&tasks[t], 1, x, n, ep, nullptr, stream_), "matmul (gemm)");
      continue;
    }
    if (!xh) {
      xh = scratch(k_lt_x, static_cast<size_t>(n * k) * 2);
      check(launch_rows_to_half(x, n * k, xh, stream_), "matmul (rows to f16)");
    }
    void* work = scratch(k_lt_work, cublaslt::k_workspace_bytes);
    if (w.type == etype::f16) {
      lt_->gemm(w.base, xh, n, w.rows, k, tasks[t].y, w.rows, accumulate, work, stream_);
      continue;
    }
    const int64_t band = band_rows(w);
    void* wh = scratch(k_lt_weights, static_cast<size_t>(band * k) * 2);
    for (int64_t r0 = 0; r0 < w.rows; r0 += band) {
      const int64_t rows = std::min(band, w.rows - r0);
      check(launch_dequantize_rows(w, r0, rows, wh, stream_), "matmul (dequantize to f16)");
      lt_->gemm(wh, xh, n, rows, k, tasks[t].y + r0, w.rows, accumulate, work, stream_);
    }
  }
}

std::string cuda_backend::prefill_products() const {
  return lt_ ? std::string("cuBLASLt") : "mma.sync kernel" + (lt_why_.empty() ? "" : " (" + lt_why_ + ")");
}

void cuda_backend::matmul(const tensor& w, const tensor& x, const tensor& y) {
  products(x, std::span<const tensor>(&w, 1), std::span<const tensor>(&y, 1), epilogue::store);
}

void cuda_backend::matmul_add(const tensor& w, const tensor& x, const tensor& y) {
  products(x, std::span<const tensor>(&w, 1), std::span<const tensor>(&y, 1), epilogue::accumulate);
}

void cuda_backend::matmul_n(const tensor& x, std::span<const tensor> w, std::span<const tensor> y) {
  if (w.size() != y.size() || w.empty() || w.size() > 3)
    fail(SA_ERR_INTERNAL, "matmul_n: %zu weights for %zu outputs", w.size(), y.size());
  // One launch when the weights share a type and width (q, k, v); otherwise one each.
  bool same = true;
  for (const tensor& t : w) same = same && t.type == w[0].type && t.ne[0] == w[0].ne[0];
  if (same) {
    products(x, w, y, epilogue::store);
  } else {
    for (size_t j = 0; j < w.size(); ++j) matmul(w[j], x, y[j]);
  }
}

void cuda_backend::matmul_swiglu(const tensor& gate, const tensor& up, const tensor& x,
                                 const tensor& out) {
  if (gate.type != up.type || gate.rows() != up.rows() || gate.ne[0] != up.ne[0])
    fail(SA_ERR_INTERNAL, "matmul_swiglu: gate and up differ in type or shape");
  const tensor w[] = {gate, up};
  products(x, w, std::span<const tensor>(&out, 1), epilogue::swiglu);
}

void cuda_backend::add_bias(const tensor& y, const tensor& b) {
  check(launch_add_bias(ptr<float>(y), ptr<float>(b), y.rows(), y.ne[0], stream_), "add_bias");
}

void cuda_backend::rmsnorm(const tensor& x, const tensor& w, float eps, const tensor& y) {
  check(launch_rmsnorm(ptr<float>(x), ptr<float>(w), ptr<float>(y), x.rows(), x.ne[0], eps, stream_),
        "rmsnorm");
}

rope_desc cuda_backend::rope_of(const rope_params& p) const {
  rope_desc r;
  r.neox = p.mode == rope_mode::neox ? 1 : 0;
  r.n_rot = p.n_rot;
  r.freq_base = p.freq_base;
  r.freq_scale = p.freq_scale;
  r.factors = p.freq_factors ? ptr<const float>(*p.freq_factors) : nullptr;
  return r;
}

void cuda_backend::rope(const tensor& x, int32_t n_heads, int32_t head_dim, const tensor& positions,
                        const rope_params& p) {
  check(launch_rope(ptr<float>(x), positions.elements(), n_heads, head_dim, ints(positions),
                    rope_of(p), stream_),
        "rope");
}

void cuda_backend::swiglu(const tensor& gate, const tensor& up, const tensor& out) {
  check(launch_swiglu(ptr<float>(gate), ptr<float>(up), ptr<float>(out), gate.elements(), stream_),
        "swiglu");
}

void cuda_backend::add(const tensor& a, const tensor& b) {
  check(launch_add(ptr<float>(a), ptr<float>(b), a.elements(), stream_), "add");
}

void cuda_backend::store_kv(const tensor& cache, int64_t capacity, const tensor& src,
                            const tensor& slots) {
  if (!is_kv_type(cache.type)) fail(SA_ERR_INTERNAL, "store_kv: a cache of type %s", traits(cache.type).name);
  const int64_t n = slots.elements();
  const int32_t head_dim = static_cast<int32_t>(cache.ne[0]);
  const int32_t n_kv = n ? static_cast<int32_t>(src.elements() / n / head_dim) : 0;
  check(launch_store_kv(dev(cache), etype_of(cache.type), capacity, ptr<float>(src), ints(slots), n,
                        n_kv, head_dim, stream_),
        "store_kv");
}

void cuda_backend::rope_store_kv(const tensor& q, const tensor& k, const tensor& v, int32_t n_heads,
                                 int32_t n_kv_heads, int32_t head_dim, const tensor& positions,
                                 const rope_params& p, const tensor& k_cache,
                                 const tensor& v_cache, int64_t capacity, const tensor& slots) {
  write_kv(q, k, v, n_heads, n_kv_heads, head_dim, positions, p, k_cache, v_cache, capacity, slots, nullptr,
           "rope_store_kv");
}

// rope_store_kv, and with `page` the page summaries of its one row's key (one kernel).
void cuda_backend::write_kv(const tensor& q, const tensor& k, const tensor& v, int32_t n_heads, int32_t n_kv_heads,
                            int32_t head_dim, const tensor& positions, const rope_params& p, const tensor& k_cache,
                            const tensor& v_cache, int64_t capacity, const tensor& slots,
                            const newest_page_desc* page, const char* op) {
  if (!is_kv_type(k_cache.type) || k_cache.type != v_cache.type)
    fail(SA_ERR_INTERNAL, "%s: caches of types %s and %s", op, traits(k_cache.type).name, traits(v_cache.type).name);
  check(launch_rope_store_kv(ptr<float>(q), ptr<float>(k), ptr<float>(v), positions.elements(), n_heads,
                             n_kv_heads, head_dim, ints(positions), rope_of(p), dev(k_cache), dev(v_cache),
                             etype_of(k_cache.type), capacity, ints(slots), stream_, page),
        op);
}

attention_args cuda_backend::args_of(const tensor& q, const kv_view& kv, int32_t n_heads,
                                     int32_t n_kv_heads, int32_t head_dim, float scale,
                                     const tensor& out, const tensor& lse) const {
  if (!kv.k || !kv.v || !is_kv_type(kv.k->type) || kv.k->type != kv.v->type)
    fail(SA_ERR_INTERNAL, "attention: K and V caches of types %s and %s",
         kv.k ? traits(kv.k->type).name : "-", kv.v ? traits(kv.v->type).name : "-");
  if (head_dim % 8 != 0 || head_dim > 256 || n_kv_heads < 1 || n_heads % n_kv_heads != 0)
    fail(SA_ERR_UNSUPPORTED,
         "the CUDA backend runs attention for head_dim a multiple of 8 up to 256 and whole GQA "
         "groups (this call: head_dim %d, %d query over %d KV heads)",
         head_dim, n_heads, n_kv_heads);
  attention_args a;
  a.q = ptr<const float>(q);
  a.k = dev(*kv.k);
  a.v = dev(*kv.v);
  a.v_rows = kv.v_rows ? ints(*kv.v_rows) : nullptr;
  a.kv_type = etype_of(kv.k->type);
  a.n = q.elements() / (int64_t{n_heads} * head_dim);
  a.k_capacity = kv.capacity;
  a.v_capacity = kv.v_capacity ? kv.v_capacity : kv.capacity;
  a.n_heads = n_heads;
  a.n_kv_heads = n_kv_heads;
  a.head_dim = head_dim;
  a.scale = scale;
  a.out = ptr<float>(out);
  a.lse = ptr<float>(lse);
  return a;
}

void cuda_backend::attention(const tensor& q, const kv_view& kv, int32_t n_heads,
                             int32_t n_kv_heads, int32_t head_dim, const tensor& kv_len,
                             int64_t kv_bound, float scale, const tensor& out, const tensor& lse,
                             const key_mass* mass) {
  attention_args a = args_of(q, kv, n_heads, n_kv_heads, head_dim, scale, out, lse);
  a.kv_len = ints(kv_len);
  a.kv_bound = kv_bound;
  if (kv_len.elements() != a.n) fail(SA_ERR_INTERNAL, "attention: %lld lengths for %lld rows",
                                     static_cast<long long>(kv_len.elements()), static_cast<long long>(a.n));
  const size_t work = attention_workspace_bytes(a, n_sms_);
  void* ws = work ? scratch(k_attention, work) : nullptr;
  check(launch_attention(a, ws, n_sms_, stream_), "attention");
  if (mass) {
    if (!mass->row_weights || mass->row_weights->elements() != a.n ||
        mass->mass->elements() < mass->n_keys * n_heads)
      fail(SA_ERR_INTERNAL, "attention: key mass buffers do not match the batch");
    check(launch_attention_mass(a, ptr<const float>(*mass->row_weights), ptr<float>(*mass->mass),
                                mass->n_keys, stream_),
          "attention mass");
  }
}

void cuda_backend::attention_sets(const tensor& q, const kv_view& kv, int32_t n_heads,
                                  int32_t n_kv_heads, int32_t head_dim, const key_sets& sets,
                                  float scale, const tensor& out, const tensor& lse) {
  if (kv.v_rows) fail(SA_ERR_INTERNAL, "attention_sets: values must sit at the keys' rows");
  const attention_args a = args_of(q, kv, n_heads, n_kv_heads, head_dim, scale, out, lse);
  sets_args s;
  s.offsets = ints(*sets.offsets);
  s.slots = ints(*sets.slots);
  s.log_weights = sets.log_weights ? ptr<const float>(*sets.log_weights) : nullptr;
  s.items = a.n * n_heads;
  s.largest = sets.largest;
  if (sets.offsets->elements() != s.items + 1)
    fail(SA_ERR_INTERNAL, "attention_sets: %lld offsets for %lld items",
         static_cast<long long>(sets.offsets->elements()), static_cast<long long>(s.items));
  const size_t work = attention_sets_workspace_bytes(a, s, n_sms_);
  check(launch_attention_sets(a, s, work ? scratch(k_sets, work) : nullptr, n_sms_, stream_), "attention_sets");
}

void cuda_backend::merge_attention(const tensor& out, const tensor& lse, const tensor& out_b,
                                   const tensor& lse_b) {
  const int64_t items = lse.elements();
  if (lse_b.elements() != items || out.n_bytes() != out_b.n_bytes() || items == 0 ||
      out.elements() % items != 0)
    fail(SA_ERR_INTERNAL, "merge_attention: partials of different shapes");
  check(launch_merge_attention(ptr<float>(out), ptr<float>(lse), ptr<const float>(out_b),
                               ptr<const float>(lse_b), items,
                               static_cast<int32_t>(out.elements() / items), stream_),
        "merge_attention");
}

void cuda_backend::probe_keys(const tensor& q, const kv_view& kv, int32_t n_heads,
                              int32_t n_kv_heads, int32_t head_dim, const key_sets& sets,
                              float scale, const tensor& scores, const tensor& vnorm2) {
  const attention_args a = args_of(q, kv, n_heads, n_kv_heads, head_dim, scale, q, q);
  sets_args s;
  s.offsets = ints(*sets.offsets);
  s.slots = ints(*sets.slots);
  s.items = a.n * n_heads;
  s.largest = sets.largest;
  if (scores.elements() < sets.total || vnorm2.elements() < sets.total)
    fail(SA_ERR_INTERNAL, "probe_keys: outputs hold fewer than %lld keys", static_cast<long long>(sets.total));
  check(launch_probe_keys(a, s, ptr<float>(scores), ptr<float>(vnorm2), stream_), "probe_keys");
}

namespace {
// Summaries are f32 or the keys' own type (an element-wise max or min of keys is one of them).
void check_summary_type(const tensor& k, const tensor& summaries, const char* op) {
  if (summaries.type != dtype::f32 && summaries.type != k.type)
    fail(SA_ERR_INTERNAL, "%s: %s summaries of %s keys", op, traits(summaries.type).name, traits(k.type).name);
}
}  // namespace

dtype cuda_backend::page_summary_type(dtype key_type, int32_t head_dim) const {
  // The keys' own 16-bit type when a summary row's halves are whole 16-byte chunks (what the
  // scoring kernel copies): half the bytes selection reads, the same scores.
  if ((key_type == dtype::f16 || key_type == dtype::bf16) && head_dim % 8 == 0) return key_type;
  return dtype::f32;
}

void cuda_backend::summarize_pages(const tensor& k, int64_t capacity, int32_t page_size,
                                   int64_t n_keys, int64_t first_page, int64_t n_pages,
                                   const tensor& summaries, int64_t pages_capacity) {
  const int32_t head_dim = static_cast<int32_t>(k.ne[0]);
  const int32_t n_kv = static_cast<int32_t>(k.rows() / capacity);
  if (page_size < 1 || n_keys > capacity || first_page < 0 || first_page + n_pages > pages_capacity ||
      summaries.elements() < int64_t{n_kv} * pages_capacity * 2 * head_dim || !is_kv_type(k.type))
    fail(SA_ERR_INTERNAL, "summarize_pages: pages [%lld, +%lld) do not fit",
         static_cast<long long>(first_page), static_cast<long long>(n_pages));
  check_summary_type(k, summaries, "summarize_pages");
  check(launch_summarize_pages(dev(k), etype_of(k.type), capacity, n_kv, head_dim, page_size, n_keys,
                               first_page, n_pages, dev(summaries), etype_of(summaries.type), pages_capacity,
                               stream_),
        "summarize_pages");
}

void cuda_backend::page_scores(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                               int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                               int64_t n_pages, bool group_mean, const tensor& scores) {
  const int64_t rankers = group_mean ? n_kv_heads : n_heads;
  if (n_pages > pages_capacity || scores.elements() < rankers * n_pages)
    fail(SA_ERR_INTERNAL, "page_scores: %lld pages do not fit", static_cast<long long>(n_pages));
  if (!is_kv_type(summaries.type))
    fail(SA_ERR_INTERNAL, "page_scores: summaries of type %s", traits(summaries.type).name);
  check(launch_page_scores(ptr<const float>(q), dev(summaries), etype_of(summaries.type), pages_capacity, n_heads,
                           n_kv_heads, head_dim, n_pages, group_mean, ptr<float>(scores), stream_),
        "page_scores");
}

namespace {
void check_plan(const tensor& plan, const char* op) {
  if (plan.type != dtype::i32 || plan.elements() < 4)
    fail(SA_ERR_INTERNAL, "%s: a page plan of %lld %s elements", op, static_cast<long long>(plan.elements()),
         traits(plan.type).name);
}

// The arguments of summarize_newest_page (and of the write it is fused into) checked.
void check_newest_page(const tensor& k, int64_t capacity, int32_t page_size, const tensor& plan,
                       const tensor& summaries, int64_t pages_capacity, const char* op) {
  check_plan(plan, op);
  const int64_t head_dim = k.ne[0];
  const int64_t n_kv = capacity > 0 ? k.rows() / capacity : 0;
  if (page_size < 1 || pages_capacity * page_size < capacity || !is_kv_type(k.type) ||
      summaries.elements() < n_kv * pages_capacity * 2 * head_dim)
    fail(SA_ERR_INTERNAL, "%s: summaries of %lld pages do not cover %lld rows", op,
         static_cast<long long>(pages_capacity), static_cast<long long>(capacity));
  check_summary_type(k, summaries, op);
}
}  // namespace

void cuda_backend::rope_store_kv_summarized(const tensor& q, const tensor& k, const tensor& v,
                                            int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                            const tensor& positions, const rope_params& p,
                                            const tensor& k_cache, const tensor& v_cache,
                                            int64_t capacity, const tensor& slots,
                                            const newest_page& page) {
  check_newest_page(k_cache, capacity, page.page_size, page.plan, page.summaries, page.pages_capacity,
                    "rope_store_kv_summarized");
  newest_page_desc d;
  d.summaries = dev(page.summaries);
  d.sum_type = etype_of(page.summaries.type);
  d.pages_capacity = page.pages_capacity;
  d.page_size = page.page_size;
  d.plan = ints(page.plan);
  write_kv(q, k, v, n_heads, n_kv_heads, head_dim, positions, p, k_cache, v_cache, capacity, slots, &d,
           "rope_store_kv_summarized");
}

void cuda_backend::summarize_newest_page(const tensor& k, int64_t capacity, int32_t page_size,
                                         const tensor& plan, const tensor& summaries,
                                         int64_t pages_capacity) {
  check_newest_page(k, capacity, page_size, plan, summaries, pages_capacity, "summarize_newest_page");
  const int32_t head_dim = static_cast<int32_t>(k.ne[0]);
  const int32_t n_kv = static_cast<int32_t>(k.rows() / capacity);
  check(launch_summarize_newest_page(dev(k), etype_of(k.type), capacity, n_kv, head_dim, page_size,
                                     ints(plan), dev(summaries), etype_of(summaries.type), pages_capacity, stream_),
        "summarize_newest_page");
}

void cuda_backend::select_pages(const tensor& q, const tensor& summaries, int64_t pages_capacity,
                                int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                bool group_mean, int32_t sink_pages, int32_t local_pages,
                                const tensor& plan, int64_t pages_bound, const tensor& scores,
                                const tensor& pages, int64_t select_bound) {
  check_plan(plan, "select_pages");
  const int64_t rankers = group_mean ? n_kv_heads : n_heads;
  if (n_kv_heads < 1 || n_heads % n_kv_heads != 0 || scores.elements() < rankers * pages_bound || pages.type != dtype::i32 ||
      pages.elements() < rankers * select_bound || q.elements() < int64_t{n_heads} * head_dim ||
      summaries.elements() < int64_t{n_kv_heads} * pages_capacity * 2 * head_dim || local_pages < 1 ||
      sink_pages < 0)
    fail(SA_ERR_INTERNAL, "select_pages: %lld pages or %lld selected per ranker do not fit",
         static_cast<long long>(pages_bound), static_cast<long long>(select_bound));
  if (!is_kv_type(summaries.type))
    fail(SA_ERR_INTERNAL, "select_pages: summaries of type %s", traits(summaries.type).name);
  if ((int64_t{head_dim} * traits(summaries.type).block_bytes) % 4 != 0 || summaries.offset % 16 != 0)
    fail(SA_ERR_UNSUPPORTED, "the CUDA backend selects pages over 16-byte aligned summaries whose rows are "
         "whole 4-byte words (this call: head_dim %d, %s summaries)", head_dim, traits(summaries.type).name);
  check(launch_select_pages(ptr<const float>(q), dev(summaries), etype_of(summaries.type), pages_capacity, n_heads,
                            n_kv_heads, head_dim, group_mean, sink_pages, local_pages, ints(plan),
                            pages_bound, ptr<float>(scores), ptr<int32_t>(pages), select_bound, stream_),
        "select_pages");
}

void cuda_backend::attention_pages(const tensor& q, const kv_view& kv, int32_t n_heads,
                                   int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                   bool group_mean, const tensor& pages, int64_t select_bound,
                                   const tensor& plan, float scale, const tensor& out,
                                   const tensor& lse, bool masked) {
  check_plan(plan, "attention_pages");
  if (kv.v_rows) fail(SA_ERR_INTERNAL, "attention_pages: values must sit at the keys' rows");
  page_table pt = page_table_of(pages, select_bound, plan, page_size, group_mean);
  pt.masked = masked ? 1 : 0;
  // (Half a wave of blocks on the side stream, to leave the selection room beside PRR's
  // speculation, was measured and not kept: H200, sa-bench gpu sparse --keys, P beside the
  // selection 15.7 -> 15.7 us at 32K per group and 38.7 -> 35.5 at 128K, but 24.0 -> 25.2 at 32K
  // per head and 65.8 -> 81.4 at 128K, where P's attention needs the whole wave for its bytes.)
  launch_pages("attention_pages", args_of(q, kv, n_heads, n_kv_heads, head_dim, scale, out, lse), pages, pt);
}

void cuda_backend::launch_pages(const char* op, attention_args a, const tensor& pages, const page_table& pt) {
  const int64_t rankers = pt.per_head ? a.n_heads : a.n_kv_heads;
  if (a.n != 1 || pt.page_size < 1 || pt.stride < 1 || pages.type != dtype::i32 ||
      pages.elements() < rankers * pt.stride)
    fail(SA_ERR_INTERNAL, "%s: %lld rows, %lld pages per ranker", op, static_cast<long long>(a.n),
         static_cast<long long>(pt.stride));
  a.kv_bound = pt.stride * pt.page_size;  // the most keys a ranker reads: the launch shape
  const size_t work = attention_pages_workspace_bytes(a, pt, n_sms_);
  check(launch_attention_pages(a, pt, work ? scratch(k_attention, work) : nullptr, n_sms_, stream_), op);
}

void cuda_backend::attention_unseen_pages(const tensor& q, const kv_view& kv, int32_t n_heads,
                                          int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                          bool group_mean, const tensor& pages, int64_t select_bound,
                                          const tensor& plan, const tensor& stamps,
                                          int64_t pages_capacity, const tensor& rows, float scale,
                                          const tensor& out, const tensor& lse, const tensor& keys) {
  const int64_t n = check_unseen_pages(q, n_heads, n_kv_heads, head_dim, page_size, group_mean, pages,
                                       select_bound, plan, stamps, pages_capacity, rows, keys);
  if (kv.v_rows) fail(SA_ERR_INTERNAL, "attention_unseen_pages: values must sit at the keys' rows");
  const attention_args a = args_of(q, kv, n_heads, n_kv_heads, head_dim, scale, out, lse);
  unseen_sets_args u;
  u.pages = ints(pages);
  u.select_bound = select_bound;
  u.plan = ints(plan);
  u.stamps = ints(stamps);
  u.pages_capacity = pages_capacity;
  u.rows = ints(rows);
  u.n = static_cast<int32_t>(n);
  u.n_heads = n_heads;
  u.group = group_mean ? n_heads / n_kv_heads : 1;
  u.page_size = page_size;
  u.counts = reinterpret_cast<int32_t*>(dev(keys));
  void* work = scratch(k_unseen_sets, unseen_sets_bytes(n * n_heads, select_bound, page_size));
  sets_args sets;
  check(launch_unseen_sets(u, work, sets, stream_), "attention_unseen_pages (key sets)");
  const size_t sets_work = attention_sets_workspace_bytes(a, sets, n_sms_);
  check(launch_attention_sets(a, sets, sets_work ? scratch(k_sets, sets_work) : nullptr, n_sms_, stream_),
        "attention_unseen_pages");
}

void cuda_backend::attention_pages_window(const tensor& q, const kv_view& kv, int32_t n_heads,
                                          int32_t n_kv_heads, int32_t head_dim, int32_t page_size,
                                          bool group_mean, const tensor& pages, int64_t select_bound,
                                          const tensor& plan, const tensor& stamps,
                                          int64_t pages_capacity, const tensor& rows, float scale,
                                          const tensor& prior_out, const tensor& prior_lse,
                                          const tensor& out, const tensor& lse, const tensor& keys) {
  // One pass over the pages for every row where the tensor-core kernel takes them (it merges
  // the past rows' outputs and stamps the pages as it finishes); else the four ops.
  attention_args a = args_of(q, kv, n_heads, n_kv_heads, head_dim, scale, out, lse);
  const page_table pt = page_table_of(pages, select_bound, plan, page_size, group_mean);
  const int64_t n_past = a.n - 1;
  if (!retro_one_pass_ || n_past < 1 || n_past > 15 || kv.v_rows ||
      !attention_pages_window_fits(a, pt, static_cast<int32_t>(n_past))) {
    backend::attention_pages_window(q, kv, n_heads, n_kv_heads, head_dim, page_size, group_mean, pages, select_bound,
                                    plan, stamps, pages_capacity, rows, scale, prior_out, prior_lse, out, lse,
                                    keys);
    return;
  }
  check_plan(plan, "attention_pages_window");
  const int64_t width = int64_t{n_heads} * head_dim;
  check_unseen_pages(q.as_2d(width).row_range(0, n_past), n_heads, n_kv_heads, head_dim, page_size, group_mean,
                     pages, select_bound, plan, stamps, pages_capacity, rows, keys);
  if (out.elements() != a.n * width || lse.elements() != a.n * n_heads ||
      prior_out.elements() != n_past * width || prior_lse.elements() != n_past * n_heads)
    fail(SA_ERR_INTERNAL, "attention_pages_window: outputs for %lld rows", static_cast<long long>(a.n));
  a.kv_bound = select_bound * page_size;  // the most keys a ranker reads: the launch shape
  past_rows pr;
  pr.rows = ints(rows);
  pr.stamps = ptr<int32_t>(stamps);
  pr.prior_out = ptr<const float>(prior_out);
  pr.prior_lse = ptr<const float>(prior_lse);
  pr.pages_capacity = pages_capacity;
  pr.keys = reinterpret_cast<int32_t*>(dev(keys));
  pr.n_past = static_cast<int32_t>(n_past);
  const size_t work = attention_pages_window_workspace_bytes(a, pt, n_sms_);
  check(launch_attention_pages_window(a, pt, pr, work ? scratch(k_attention, work) : nullptr, n_sms_, stream_),
        "attention_pages_window");
}

void cuda_backend::predict_pages(const tensor& state, int64_t pages_capacity, int32_t n_rankers, float phi,
                                 int32_t sink_pages, int32_t local_pages, const tensor& plan, int64_t pages_bound,
                                 const tensor& scores, const tensor& pages, int64_t select_bound) {
  check_predict_pages(state, pages_capacity, n_rankers, sink_pages, local_pages, plan, pages_bound, scores, pages,
                      select_bound);
  check(launch_forecast_pages(ptr<const float>(state), pages_capacity, n_rankers, phi, ints(plan), pages_bound,
                              ptr<float>(scores), stream_),
        "predict_pages (forecast)");
  check(launch_top_pages(ptr<const float>(scores), n_rankers, pages_bound, sink_pages, local_pages, ints(plan),
                         reinterpret_cast<int32_t*>(dev(pages)), select_bound, stream_),
        "predict_pages");
}

void cuda_backend::update_predictor(const tensor& state, int64_t pages_capacity, int32_t n_rankers,
                                    const tensor& scores, int64_t scores_stride, const tensor& plan, float alpha,
                                    float beta, float phi) {
  check_update_predictor(state, pages_capacity, n_rankers, scores, scores_stride, plan);
  check(launch_update_predictor(ptr<float>(state), pages_capacity, n_rankers, ptr<const float>(scores),
                                scores_stride, ints(plan), alpha, beta, phi, stream_),
        "update_predictor");
}

void cuda_backend::mask_pages(const tensor& a, int64_t a_bound, const tensor& plan_a, const tensor& b,
                              int64_t b_bound, const tensor& plan_b, int32_t n_rankers, bool keep_shared,
                              const tensor& out, const tensor* kept) {
  check_mask_pages(a, a_bound, plan_a, b, b_bound, plan_b, n_rankers, out, kept);
  check(launch_mask_pages(ints(a), a_bound, ints(plan_a), ints(b), b_bound, ints(plan_b), n_rankers, keep_shared,
                          reinterpret_cast<int32_t*>(dev(out)), kept ? reinterpret_cast<int32_t*>(dev(*kept)) : nullptr,
                          stream_),
        "mask_pages");
}

void cuda_backend::attention_kept_pages(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                        int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                                        int64_t select_bound, const tensor& plan, const tensor& counts, float scale,
                                        bool merge, const tensor& out, const tensor& lse, const tensor& out_b,
                                        const tensor& lse_b) {
  check_plan(plan, "attention_kept_pages");
  const attention_args a = args_of(q, kv, n_heads, n_kv_heads, head_dim, scale, out, lse);
  if (kv.v_rows || !attention_kept_pages_fits(a)) {
    backend::attention_kept_pages(q, kv, n_heads, n_kv_heads, head_dim, page_size, group_mean, pages, select_bound,
                                  plan, counts, scale, merge, out, lse, out_b, lse_b);
    return;
  }
  if (counts.type != dtype::i32 || counts.elements() < (group_mean ? n_kv_heads : n_heads))
    fail(SA_ERR_INTERNAL, "attention_kept_pages: counts of %lld rankers", static_cast<long long>(counts.elements()));
  page_table pt = page_table_of(pages, select_bound, plan, page_size, group_mean);
  pt.counts = ints(counts);
  pt.merge = merge ? 1 : 0;
  // (A half or a quarter of the wave for these few pages was measured and not kept: within
  // 1 us at 32K and per group, 3-12 us slower per head at 128K at a hit rate of 0.84.)
  launch_pages("attention_kept_pages", a, pages, pt);
}

vattention_args cuda_backend::vattention_args_of(const char* op, const tensor& q, const kv_view& kv,
                                                      int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                                      int32_t page_size, bool group_mean, const tensor& pages,
                                                      int64_t select_bound, const tensor& plan, int64_t keys_bound,
                                                      float scale, const vattention_params& p,
                                                      const tensor& record, const tensor& out, const tensor& lse) {
  check_vattention(op, q, kv, n_heads, n_kv_heads, head_dim, page_size, group_mean, pages, select_bound, plan,
                   keys_bound, record, out, lse);
  check_plan(plan, op);
  vattention_args v;
  v.a = args_of(q, kv, n_heads, n_kv_heads, head_dim, scale, out, lse);
  v.pages = ints(pages);
  v.select_bound = select_bound;
  v.plan = ints(plan);
  v.page_size = page_size;
  v.group_mean = group_mean ? 1 : 0;
  v.seed = p.seed;
  v.layer = p.layer;
  v.pilot_ratio = p.pilot_ratio;
  v.z = vattention::normal_quantile(1.0 - p.delta / 4.0);
  v.eps = p.epsilon / 4.0;
  v.record = reinterpret_cast<int32_t*>(dev(record));
  // Launch shapes: a row of up to keys_bound keys, its pilot (pilot_size grows with n_s).
  const int64_t pilot_bound = std::max<int64_t>(1, vattention::pilot_size(keys_bound, p.pilot_ratio));
  const size_t bytes = vattention_workspace(v, keys_bound, pilot_bound, nullptr);
  vattention_workspace(v, keys_bound, pilot_bound, scratch(k_vattention, bytes));
  return v;
}

void cuda_backend::vattention_budget(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                     int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                                     int64_t select_bound, const tensor& plan, int64_t keys_bound, float scale,
                                     const vattention_params& p, const tensor& out, const tensor& lse,
                                     const tensor& record) {
  const vattention_args v = vattention_args_of("vattention_budget", q, kv, n_heads, n_kv_heads, head_dim,
                                               page_size, group_mean, pages, select_bound, plan, keys_bound,
                                               scale, p, record, out, lse);
  check(launch_vattention_budget(v, stream_), "vattention_budget");
}

void cuda_backend::vattention_sample(const tensor& q, const kv_view& kv, int32_t n_heads, int32_t n_kv_heads,
                                     int32_t head_dim, int32_t page_size, bool group_mean, const tensor& pages,
                                     int64_t select_bound, const tensor& plan, int64_t keys_bound, float scale,
                                     const vattention_params& p, const tensor& record, const tensor& out,
                                     const tensor& lse) {
  const vattention_args v = vattention_args_of("vattention_sample", q, kv, n_heads, n_kv_heads, head_dim,
                                               page_size, group_mean, pages, select_bound, plan, keys_bound,
                                               scale, p, record, out, lse);
  check(launch_vattention_sample(v, stream_), "vattention_sample");
}

void cuda_backend::stamp_pages(const tensor& pages, int64_t select_bound, const tensor& plan,
                               int32_t n_rankers, bool every_page, const tensor& stamps,
                               int64_t pages_capacity) {
  check_stamp_pages(pages, select_bound, plan, n_rankers, every_page, stamps, pages_capacity);
  check(launch_stamp_pages(ints(pages), select_bound, ints(plan), n_rankers, every_page,
                           reinterpret_cast<int32_t*>(dev(stamps)), pages_capacity, stream_),
        "stamp_pages");
}

void cuda_backend::copy(const tensor& src, const tensor& dst) {
  if (src.n_bytes() != dst.n_bytes())
    fail(SA_ERR_INTERNAL, "copy: %zu bytes into %zu", src.n_bytes(), dst.n_bytes());
  if (src.n_bytes() == 0) return;
  check(cudaMemcpyAsync(dev(dst), dev(src), src.n_bytes(), cudaMemcpyDeviceToDevice, stream_), "copy");
}

void cuda_backend::gather_rope(const tensor& src, int64_t src_capacity, const tensor& rows,
                               const tensor& positions, int64_t n, const rope_params& p,
                               const tensor& dst, int64_t dst_capacity) {
  if (n > dst_capacity || dst.type != src.type || !is_kv_type(src.type) || rows.elements() < n ||
      positions.elements() < n)
    fail(SA_ERR_INTERNAL, "gather_rope: %lld rows do not fit in %lld", static_cast<long long>(n),
         static_cast<long long>(dst_capacity));
  const int32_t head_dim = static_cast<int32_t>(src.ne[0]);
  const int32_t n_kv = static_cast<int32_t>(src.rows() / src_capacity);
  check(launch_gather_rope(dev(src), etype_of(src.type), src_capacity, ints(rows), ints(positions), n,
                           n_kv, head_dim, rope_of(p), dev(dst), dst_capacity, stream_),
        "gather_rope");
}

void cuda_backend::move_rows(const tensor& cache, int64_t capacity, const tensor& moves, int64_t n) {
  if (moves.elements() < 3 * n) fail(SA_ERR_INTERNAL, "move_rows: %lld moves listed in %lld ints",
                                     static_cast<long long>(n), static_cast<long long>(moves.elements()));
  const int32_t n_heads = static_cast<int32_t>(cache.rows() / capacity);
  check(launch_move_rows(dev(cache), static_cast<int64_t>(cache.row_size()), capacity, n_heads,
                         ints(moves), n, stream_),
        "move_rows");
}

void cuda_backend::cascade_update(const tensor& mass, const tensor& order, const tensor& plan,
                                  const cascade_params& p, int64_t q_bound, int64_t touched_bound,
                                  const tensor& score, const tensor& orig, const tensor& moves,
                                  const tensor* k, const tensor* v, int64_t capacity) {
  check_cascade_update(mass, order, plan, p, q_bound, touched_bound, score, orig, moves, k, v, capacity);
  cascade_rows kv;
  if (k) {
    kv.k = dev(*k);
    kv.v = dev(*v);
    kv.row_bytes = static_cast<int64_t>(k->row_size());
    kv.capacity = capacity;
  }
  check(launch_cascade_update(p.scores ? ptr<const float>(mass) : nullptr, ints(order), ints(plan), p,
                              static_cast<int32_t>(q_bound), static_cast<int32_t>(touched_bound),
                              ptr<float>(score), reinterpret_cast<int64_t*>(dev(orig)), ptr<int32_t>(moves), kv,
                              stream_),
        "cascade_update");
}

void cuda_backend::sample(const tensor& logits, const sampler_config& c, const tensor& uniform,
                          const tensor& token) {
  sample_args a;
  a.logits = ptr<const float>(logits);
  a.n_vocab = static_cast<int32_t>(logits.elements());
  a.temperature = c.temperature;
  a.top_k = c.top_k;
  a.top_p = c.top_p;
  a.uniform = reinterpret_cast<const double*>(dev(uniform));
  a.token = ptr<int32_t>(token);
  const size_t bytes = sample_workspace_bytes(a.n_vocab);
  check(launch_sample(a, scratch(k_sampling, bytes), bytes, stream_), "sample");
}

}  // namespace sa::cuda

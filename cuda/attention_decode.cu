// Attention for few query rows (decode), split over the keys (flash-decoding), GQA-aware, and
// the attention ops built from the same inner loop: key sets with log weights (the sparse
// methods' primitive), key probes, and the per-key attention mass of the cascade.
//
// attention_split: grid (split, KV head x head group, row), 128 threads. A block reads the keys
// [s0, s1) of one KV head once and scores them against every query head of its group (up to 8
// at a time), so each K/V byte moves once per group. Keys stream through shared memory in
// tiles of 32 (cp.async, three stages: two tiles in flight while one is computed); LPK lanes
// hold one key (8 elements each, one 16-byte read of an f16/bf16 row), each warp 8 keys of a
// tile; scores are kept in log2 units (q pre-scaled by scale * log2 e) with an online softmax
// per lane group, merged over the warp by shuffles and over the 4 warps in shared memory. With
// one split the block writes out and lse. Otherwise it writes a partial (out normalised, lse)
// and counts itself done; the last block of a (row, head group) merges the partials (weights
// e^(lse_s - max)) and resets the count, so one launch does the whole attention. The split
// count follows kv_bound, not the lengths, so a recorded step replays for every length up to
// its bound.
// Bytes: K and V of the keys attended once (kv_len * n_kv_heads * head_dim * 2 * elem) plus q,
// out and the partials (n_splits * n_heads * (head_dim + 1) * 4, written and read once).
//
// attention_sets: grid (item = row x query head, split), the same block over a share of the
// item's listed keys (their number is read on the device), merged by the item's last block as
// above. The splits follow the sets' host-side bound on a set's size: a few dozen items of a
// thousand keys or more (RetroAttention's past rows) took one block each and left most SMs
// idle (143 µs a layer at 32K on an H100, 22 µs split).
//
// attention_pages_window (RetroAttention's step): the tensor-core kernel over the decode row's
// pages with the window's past rows as further tile rows (PAST): q rows [0, n_past) are past
// rows, each masked to the keys x <= its position of pages stamped before it; the block that
// merges the splits merges the past rows into their cached outputs and stamps the pages.
// Bytes: the pages' K and V once for every row (the separate ops read the supplements' keys a
// second time, by slot), the stamps of the block's pages, the cached outputs once.
// Each lane masks its own keys for its own rows (8 lanes of a warp test each key). Measured and
// dropped (H200, two builds in one call): one test per key by the thread that copies its V row,
// into a mask in shared memory — 186 to 172 registers, but Retro w = 2 decoded 158.6 against
// 159.5 tokens/s at 32K and 126.2 against 125.8 at 128K: the lanes' tests are not what the
// kernel waits on.
#include <algorithm>
#include <atomic>

#include "common.cuh"
#include "mma.cuh"

namespace sa::cuda {

namespace {

constexpr int k_warps = 4;
constexpr int k_threads = k_warps * k_warp;
constexpr int STAGES = 3;    // tiles in shared memory: two loading while one is computed
constexpr int MAX_SPLITS = 256;
constexpr int64_t MAX_COUNTERS = 65536;  // (row, KV head, head group) merges one launch tracks
constexpr float k_log2e = 1.4426950408889634f;
constexpr int k_block_pages = 256;  // page ids the tensor-core kernel stages for its key range
constexpr float k_ln2 = 0.6931471805599453f;

// Where a block's keys come from: a range of rows (dense), a list of slots with optional
// log weights (key sets), or a list of pages (key j at row pages[j / page_size] * page_size +
// j % page_size).
struct key_source {
  const int32_t* slots = nullptr;      // null: key j at row j
  const float* log_weights = nullptr;  // added to the score (natural log), or null
  const int32_t* pages = nullptr;      // or the ranker's pages
  int32_t page_size = 0;
  bool masked = false;                 // pages may be -1 (no key)
  int64_t n_keys = 0;                  // masked: rows from n_keys on hold no key
  int64_t begin = 0, end = 0;          // keys [begin, end) of the range or the list
};

__device__ __forceinline__ int64_t page_row(const int32_t* pages, int32_t page_size, int64_t j) {
  return static_cast<int64_t>(pages[j / page_size]) * page_size + j % page_size;
}
// A page id of -1 (PRR's masked tables, which only the CUDA-core kernel takes) holds no key,
// nor does a row at n_keys or past it: a compacted table (mask_pages) ends with -1s, not with
// the newest page, so paged_keys does not cut that page short. Such keys read row 0 and are
// masked.
__device__ __forceinline__ bool masked_key(const int32_t* pages, int32_t page_size, int64_t n_keys, int64_t j) {
  const int32_t page = pages[j / page_size];
  return page < 0 || static_cast<int64_t>(page) * page_size + j % page_size >= n_keys;
}
__device__ __forceinline__ int64_t masked_page_row(const int32_t* pages, int32_t page_size, int64_t n_keys,
                                                   int64_t j) {
  return masked_key(pages, page_size, n_keys, j) ? 0 : static_cast<int64_t>(pages[j / page_size]) * page_size + j % page_size;
}

// The keys ranker r's pages hold: whole pages, but the newest page (if listed: it sorts last)
// holds only up to key n_keys - 1.
__device__ __forceinline__ int64_t paged_keys(const page_table& pt, const int32_t* pages, int32_t r) {
  const int64_t n_keys = pt.plan[0], n_pages = pt.plan[1], n_sel = pt.counts ? pt.counts[r] : pt.plan[2];
  if (n_sel <= 0) return 0;
  const int64_t full = n_sel * pt.page_size;
  return pages[n_sel - 1] == n_pages - 1 ? full - (n_pages * pt.page_size - n_keys) : full;
}

struct block_out {
  float* out;      // where the normalised output goes (head_dim floats per head, head stride hs)
  float* lse;      // log-sum-exp per head (stride ls)
  int64_t hs, ls;
};

// The in-kernel merge of split partials (null: the block writes its result as final).
struct merge_ctx {
  int32_t n_splits;
  int32_t* counter;    // blocks of this (row, head group) done so far; reset by the last
  const float* part_o; // [heads of the group][n_splits][head_dim] at this group's first head
  const float* part_lse;
  float* out;          // the final out / lse of the group's first head
  float* lse;
};

// Keys per tile: 32, or 16 for rows over 256 bytes (f32 caches, head_dim 256) so that three
// stages still fit in shared memory.
template <typename T, int LPK>
constexpr int tile_keys() {
  return LPK * 8 * static_cast<int>(sizeof(typename T::storage)) <= 256 ? 32 : 16;
}
template <typename T, int LPK>
constexpr size_t tile_bytes(int head_dim) {
  return static_cast<size_t>(STAGES) * 2 * tile_keys<T, LPK>() * head_dim * sizeof(typename T::storage);
}
template <typename T, int LPK>
size_t smem_bytes(int head_dim, int gmax) {
  return tile_bytes<T, LPK>(head_dim) + static_cast<size_t>(k_warps) * gmax * head_dim * sizeof(float);
}

// The end of a block's work, shared by both decode kernels: the per-warp results (sm_acc
// [k_warps][GMAX][hd] output sums, sm_m / sm_l their running max in log2 units and sums) are
// combined into the block's normalised output and lse (bo); with a merge context, the last
// block of the group to finish then merges every split's partial. sm_w holds GMAX *
// MAX_SPLITS floats of scratch.
// Earlier outputs the first n rows' final results are merged with (RetroAttention's cached
// outputs of its past rows), at the items the results go to (out, lse: from the final
// output's first item).
struct prior_rows {
  const float* out = nullptr;
  const float* lse = nullptr;
  int32_t n = 0;
};
// (o, l) merged by log-sum-exp with row g's prior output (po its element d); l natural log.
__device__ __forceinline__ float with_prior(float o, float l, float po, float pl, float* merged_lse) {
  const float m = fmaxf(l, pl);
  if (m == -INFINITY) {
    *merged_lse = -INFINITY;
    return 0.0f;
  }
  const float wn = expf(l - m), wp = expf(pl - m);
  *merged_lse = m + logf(wn + wp);
  return (o * wn + po * wp) / (wn + wp);
}

// Row g's output, partials and merge go to item offset g from bo's and mc's first, or with
// gpr > 0 (gpr heads of each of several q rows) to (g / gpr) row_items + g % gpr; rows below
// pr.n are merged with their prior outputs as they are written final. Returns whether this
// block merged (the last of its group; true without a merge context).
template <int GMAX>
__device__ bool finish_block(const float* sm_acc, const float (*sm_m)[GMAX], const float (*sm_l)[GMAX],
                             float* sm_w, int32_t nh, int hd, const block_out& bo, const merge_ctx* mc,
                             int32_t gpr = 0, int64_t row_items = 0, const prior_rows& pr = prior_rows{}) {
  const int lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp;
  auto at = [&](int g) -> int64_t { return gpr > 0 ? (g / gpr) * row_items + g % gpr : g; };
  // The prior lse, read before any is written: it may be the output's own (a merge in place).
  __shared__ float sm_pl[GMAX];
  if (threadIdx.x < pr.n && threadIdx.x < GMAX) sm_pl[threadIdx.x] = pr.lse[at(threadIdx.x)];
  __syncthreads();
  for (int idx = threadIdx.x; idx < nh * hd; idx += k_threads) {
    const int g = idx / hd, d = idx % hd;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < k_warps; ++w) mx = fmaxf(mx, sm_m[w][g]);
    float L = 0.0f, O = 0.0f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < k_warps; ++w) {
        const float c = exp2f(sm_m[w][g] - mx);
        L = fmaf(sm_l[w][g], c, L);
        O = fmaf(sm_acc[(w * GMAX + g) * hd + d], c, O);
      }
    }
    float o = L > 0.0f ? O / L : 0.0f, l = L > 0.0f ? (mx + log2f(L)) * k_ln2 : -INFINITY;
    if (!mc && g < pr.n) o = with_prior(o, l, pr.out[at(g) * hd + d], sm_pl[g], &l);
    bo.out[at(g) * bo.hs + d] = o;
    if (d == 0) bo.lse[at(g) * bo.ls] = l;
  }
  if (!mc) return true;

  // The last block of the group merges every split's partial. (Loading RetroAttention's prior
  // outputs and the pages to stamp before the count, so that the merge would not wait for them,
  // was measured and not kept: the fence below then waits for those loads in every block; the
  // window kernel at 32K went from 30.0-30.9 to 30.5-31.8 us a launch, ncu, one H200.)
  __shared__ int last;
  __shared__ float sm_total[GMAX], sm_max[GMAX];
  __threadfence();  // this block's partial is visible before it counts itself done
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(mc->counter, 1) == mc->n_splits - 1;
  __syncthreads();
  if (!last) return false;
  __threadfence();
  // The partials come from L2: every load of a lane is issued before its results are used
  // (a chain of dependent L2 round trips here would cost more than the keys of a short split).
  const int ns = mc->n_splits;
  constexpr int LSE_PER_LANE = MAX_SPLITS / k_warp;
  for (int g = warp; g < nh; g += k_warps) {
    float lv[LSE_PER_LANE];
#pragma unroll
    for (int u = 0; u < LSE_PER_LANE; ++u) {
      const int sp = lane + u * k_warp;
      lv[u] = sp < ns ? __ldcg(mc->part_lse + at(g) * ns + sp) : -INFINITY;
    }
    float mx = lv[0];
#pragma unroll
    for (int u = 1; u < LSE_PER_LANE; ++u) mx = fmaxf(mx, lv[u]);
    mx = warp_max(mx);
    float total = 0.0f;
#pragma unroll
    for (int u = 0; u < LSE_PER_LANE; ++u) {
      const int sp = lane + u * k_warp;
      if (sp >= ns) break;
      const float w = mx == -INFINITY ? 0.0f : expf(lv[u] - mx);
      sm_w[g * MAX_SPLITS + sp] = w;
      total += w;
    }
    total = warp_sum(total);
    if (lane == 0) {
      sm_total[g] = total;
      sm_max[g] = mx;
    }
  }
  __syncthreads();
  // Four dims per thread (16-byte loads), sixteen splits in flight.
  const int hd4 = hd / 4;
  for (int idx = threadIdx.x; idx < nh * hd4; idx += k_threads) {
    const int g = idx / hd4, d4 = idx % hd4;
    const float4* po = reinterpret_cast<const float4*>(mc->part_o + at(g) * ns * hd) + d4;
    const float* w = sm_w + g * MAX_SPLITS;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int sp = 0; sp < ns; sp += 16) {
      float4 v[16];
#pragma unroll
      for (int u = 0; u < 16; ++u)
        v[u] = sp + u < ns ? __ldcg(po + static_cast<int64_t>(sp + u) * hd4) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int u = 0; u < 16; ++u) {
        const float wu = sp + u < ns ? w[sp + u] : 0.0f;
        o.x = fmaf(wu, v[u].x, o.x);
        o.y = fmaf(wu, v[u].y, o.y);
        o.z = fmaf(wu, v[u].z, o.z);
        o.w = fmaf(wu, v[u].w, o.w);
      }
    }
    const float total = sm_total[g], inv = total > 0.0f ? 1.0f / total : 0.0f;
    float* out = mc->out + at(g) * hd + 4 * d4;  // a view may start at any float
    float r[4] = {o.x * inv, o.y * inv, o.z * inv, o.w * inv};
    float l = total > 0.0f ? sm_max[g] + logf(total) : -INFINITY;
    if (g < pr.n) {
      const float pl = sm_pl[g], l0 = l;
#pragma unroll
      for (int e = 0; e < 4; ++e) r[e] = with_prior(r[e], l0, pr.out[at(g) * hd + 4 * d4 + e], pl, &l);
    }
    out[0] = r[0], out[1] = r[1], out[2] = r[2], out[3] = r[3];
    if (d4 == 0) mc->lse[at(g)] = l;
  }
  if (threadIdx.x == 0) *mc->counter = 0;  // ready for the next launch (or replay)
  return true;
}

// The shared inner loop: heads [h0, h0 + nh) of one row against keys of KV head kvh.
template <typename T, int LPK, int GMAX>
__device__ void attend_block(const attention_args& a, int64_t row, int32_t kvh, int32_t h0,
                             int32_t nh, const key_source& src, const block_out& bo,
                             const merge_ctx* mc) {
  using S = typename T::storage;
  constexpr int KPW = k_warp / LPK;  // keys per warp per step
  constexpr int E16 = 16 / sizeof(S);  // elements per 16-byte piece
  constexpr int TK = tile_keys<T, LPK>();
  static_assert(TK / k_warps >= KPW, "a warp's share of a tile covers its lane groups");
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ float sm_m[k_warps][GMAX], sm_l[k_warps][GMAX];
  const int hd = a.head_dim;
  S* tiles = reinterpret_cast<S*>(smem);                                   // [STAGES][2][TK][hd]
  float* sm_acc = reinterpret_cast<float*>(smem + tile_bytes<T, LPK>(hd));  // [k_warps][GMAX][hd]
  const int lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp;
  const int kg = lane / LPK, dl = lane % LPK;
  const bool dims_ok = dl * 8 < hd;
  const int d0 = dims_ok ? dl * 8 : 0;

  float q[GMAX][8];
#pragma unroll
  for (int g = 0; g < GMAX; ++g) {
    const bool ok = g < nh && dims_ok;
    const float* qp = a.q + (row * a.n_heads + h0 + (ok ? g : 0)) * hd + d0;
#pragma unroll
    for (int i = 0; i < 8; ++i) q[g][i] = ok ? qp[i] * a.scale * k_log2e : 0.0f;
  }
  float m[GMAX], l[GMAX], acc[GMAX][8];
#pragma unroll
  for (int g = 0; g < GMAX; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[g][i] = 0.0f;
  }
  const S* kb = static_cast<const S*>(a.k) + static_cast<int64_t>(kvh) * a.k_capacity * hd;
  const S* vb = static_cast<const S*>(a.v) + static_cast<int64_t>(kvh) * a.v_capacity * hd;
  const int64_t n_keys = src.end - src.begin;
  const int64_t n_tiles = (n_keys + TK - 1) / TK;
  // (Each row one bulk copy, as the tensor-core kernel below does, measured within noise end to
  // end: H200, 32K, one call each, RetroAttention w = 2 133.7 -> 135.6 tokens/s, vAttention
  // 77.9 -> 77.7; not kept.)
  // 16-byte pieces per row, rounded up to a power of two (no division in the copy loop).
  constexpr int PP = LPK * 8 / E16;

  auto load_tile = [&](int64_t t, int stage) {
    S* kt = tiles + static_cast<size_t>(stage) * 2 * TK * hd;
    S* vt = kt + TK * hd;
#pragma unroll
    for (int idx = threadIdx.x; idx < TK * PP; idx += k_threads) {
      const int r = idx / PP, c = idx % PP;
      if (c * E16 >= hd) continue;
      int64_t j = src.begin + t * TK + r;
      if (j >= src.end) j = src.end - 1;  // a valid key; masked when scored
      const int64_t key = src.slots ? src.slots[j]
                          : src.pages ? (src.masked ? masked_page_row(src.pages, src.page_size, src.n_keys, j)
                                                    : page_row(src.pages, src.page_size, j))
                                      : j;
      const int64_t vrow = a.v_rows ? a.v_rows[key] : key;
      cp_async16(kt + r * hd + c * E16, kb + key * hd + c * E16);
      cp_async16(vt + r * hd + c * E16, vb + vrow * hd + c * E16);
    }
  };

#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < n_tiles) load_tile(st, st);
    cp_async_commit();
  }
  for (int64_t t = 0; t < n_tiles; ++t) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // tile t is in; every warp is done with the stage about to be refilled
    if (t + STAGES - 1 < n_tiles) load_tile(t + STAGES - 1, static_cast<int>((t + STAGES - 1) % STAGES));
    cp_async_commit();
    const S* kt = tiles + static_cast<size_t>(t % STAGES) * 2 * TK * hd;
    const S* vt = kt + TK * hd;
#pragma unroll
    for (int i0 = 0; i0 < TK / k_warps; i0 += KPW) {
      const int i = warp * (TK / k_warps) + i0 + kg;  // key within the tile
      const int64_t j = src.begin + t * TK + i;
      float k8[8], v8[8];
      if (dims_ok) {
        load8_shared<T>(kt + i * hd + d0, k8);
        load8_shared<T>(vt + i * hd + d0, v8);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) k8[e] = v8[e] = 0.0f;
      }
      float s[GMAX];
#pragma unroll
      for (int g = 0; g < GMAX; ++g) {
        float d = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) d = fmaf(q[g][e], k8[e], d);
        s[g] = group_sum<LPK>(d);
      }
      if (j >= src.end || (src.masked && masked_key(src.pages, src.page_size, src.n_keys, j))) continue;  // a whole lane group
      if (src.log_weights) {
        const float w = src.log_weights[j] * k_log2e;
#pragma unroll
        for (int g = 0; g < GMAX; ++g) s[g] += w;
      }
#pragma unroll
      for (int g = 0; g < GMAX; ++g) {
        const float mn = fmaxf(m[g], s[g]);
        const float corr = exp2f(m[g] - mn);
        const float p = exp2f(s[g] - mn);
        l[g] = fmaf(l[g], corr, p);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] = fmaf(acc[g][e], corr, p * v8[e]);
        m[g] = mn;
      }
    }
  }
  // Merge the lane groups of the warp (lanes with the same dims, LPK apart).
#pragma unroll
  for (int off = LPK; off < k_warp; off *= 2) {
#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m[g], off);
      const float l2 = __shfl_xor_sync(0xffffffffu, l[g], off);
      const float mn = fmaxf(m[g], m2);
      const float c1 = mn == -INFINITY ? 0.0f : exp2f(m[g] - mn);
      const float c2 = mn == -INFINITY ? 0.0f : exp2f(m2 - mn);
      l[g] = l[g] * c1 + l2 * c2;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float a2 = __shfl_xor_sync(0xffffffffu, acc[g][e], off);
        acc[g][e] = acc[g][e] * c1 + a2 * c2;
      }
      m[g] = mn;
    }
  }
  if (kg == 0) {
#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
      if (dims_ok)
#pragma unroll
        for (int e = 0; e < 8; ++e) sm_acc[(warp * GMAX + g) * hd + d0 + e] = acc[g][e];
      if (dl == 0) {
        sm_m[warp][g] = m[g];
        sm_l[warp][g] = l[g];
      }
    }
  }
  __shared__ float sm_w[GMAX][MAX_SPLITS];
  finish_block<GMAX>(sm_acc, sm_m, sm_l, &sm_w[0][0], nh, hd, bo, mc);
}

// ---- the tensor-core decode kernel (f16 / bf16 caches, head_dim 64 or 128, groups <= 16) ------
// One block per (split, KV head, row), 4 warps. The group's query heads are the 16 rows of an
// mma tile (rows past the group are zero): S = Q K^T and O += P V run as m16n8k16 products, so
// the cores spend a few instructions per key however many heads share it and the loads stay
// ahead. Keys stream in tiles of 64 ([TK][HD + 8] halves per K and V: the padding puts the
// eight rows of an ldmatrix in distinct banks), three stages, each row one bulk copy (row_stages:
// a thread a row of K or V); warp w takes keys [16w, 16w + 16) of every tile and keeps its own
// running max and sums (log2 units) per row.
// Q enters the products as f16 (bf16 caches: as the sum of two bf16 parts, hi + lo, so the
// scores keep about 16 bits), P as the cache's type. Same splits, partials and last-block merge
// as the CUDA-core kernel. Bytes: K and V of the keys once; q, partials and out are small.
template <bool BF16, int HD>
struct mma_decode {
  static constexpr int TK = 64, LD = HD + 8;
  static constexpr size_t tile_bytes = static_cast<size_t>(STAGES) * 2 * TK * LD * 2;
  static constexpr size_t finish_bytes = (static_cast<size_t>(k_warps) * 16 * HD + 16 * MAX_SPLITS) * sizeof(float);
  static constexpr size_t smem = tile_bytes > finish_bytes ? tile_bytes : finish_bytes;
};

template <typename T, int HD, bool PAST = false>
__global__ void __launch_bounds__(k_threads, 2) attention_mma_kernel(const attention_args a, const page_table pt,
                                                                     int32_t n_splits, float* part_o,
                                                                     float* part_lse, int32_t* counters,
                                                                     const past_rows pr) {
  pdl_begin();
  using S = typename T::storage;
  constexpr bool BF16 = T::code == etype::bf16;
  using C = mma_decode<BF16, HD>;
  constexpr int TK = C::TK, LD = C::LD, KS = HD / 16, NB = HD / 8, QP = BF16 ? 2 : 1;
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ __align__(16) S sq[QP][16][LD];
  __shared__ float sm_m[k_warps][16], sm_l[k_warps][16];
  S* tiles = reinterpret_cast<S*>(smem);  // [STAGES][K, V][TK][LD]
  const int lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp;
  const int g = lane / 4, c = lane % 4;

  // blockIdx.y: a KV head and its group's query heads, or (pages chosen per query head) one
  // query head.
  // With past rows (PAST) tile rows [G i, G (i + 1)) are q row i's heads h0 .. h0 + G - 1: past
  // rows i < n_past, then the decode row (q row n_past, the batch's last).
  const int32_t split = blockIdx.x;
  const int32_t NP = PAST ? pr.n_past : 0;
  const int64_t row = PAST ? NP : blockIdx.z;
  const int32_t group = a.n_heads / a.n_kv_heads;
  const bool one_head = pt.pages && pt.per_head;
  const int32_t kvh = one_head ? blockIdx.y / group : blockIdx.y;
  const int32_t G = one_head ? 1 : group, h0 = one_head ? blockIdx.y : kvh * G;
  const int32_t R = G * (NP + 1);  // tile rows in use
  const int32_t* pages = pt.pages ? pt.pages + blockIdx.y * pt.stride : nullptr;
  const int64_t len = pages ? paged_keys(pt, pages, blockIdx.y) : a.kv_len[row];
  const int64_t chunk = (len + n_splits - 1) / n_splits;
  const int64_t begin = len < split * chunk ? len : split * chunk;
  const int64_t end = len < begin + chunk ? len : begin + chunk;
  const int64_t n_tiles = (end - begin + TK - 1) / TK;
  const S* kb = static_cast<const S*>(a.k) + static_cast<int64_t>(kvh) * a.k_capacity * HD;
  const S* vb = static_cast<const S*>(a.v) + static_cast<int64_t>(kvh) * a.v_capacity * HD;

  // A paged block's page ids, staged once (each key's copy used to load its page's id from
  // global memory and divide by the page size): ids of pages [pg0, pg0 + k_block_pages) in sp.
  __shared__ int32_t sp[k_block_pages];
  const int32_t ps = pt.page_size;
  const int shift = pages && (ps & (ps - 1)) == 0 ? __ffs(ps) - 1 : -1;  // log2(page size), if a power of 2
  const int64_t pg0 = pages && end > begin ? begin / ps : 0;
  const bool staged = pages && end > begin && (end - 1) / ps - pg0 < k_block_pages;
  // The tiles' stages, filled a row at a time (row_stages); each fill brings TK rows of K and V.
  __shared__ uint64_t bars[STAGES];
  const row_stages rs{bars};
  constexpr uint32_t row_bytes = HD * sizeof(S), fill_bytes = 2 * TK * row_bytes;
  static_assert(k_threads == 2 * TK, "a thread copies one row of K or of V of each tile");
  if (threadIdx.x == 0) {
    rs.init(STAGES);
    for (int st = 0; st < STAGES - 1; ++st)
      if (st < n_tiles) rs.expect(st, fill_bytes);
  }
  if (staged)
    for (int64_t i = threadIdx.x; i <= (end - 1) / ps - pg0; i += k_threads) sp[i] = pages[pg0 + i];
  __syncthreads();
  auto key_row = [&](int64_t j) -> int64_t {
    if (!pages) return j;
    if (!staged) return page_row(pages, ps, j);
    if (shift >= 0) return static_cast<int64_t>(sp[(j >> shift) - pg0]) * ps + (j & (ps - 1));
    return static_cast<int64_t>(sp[j / ps - pg0]) * ps + j % ps;
  };

  // Thread x copies row x % TK of the tile's K (x < TK) or V.
  auto load_tile = [&](int64_t t, int stage) {
    const int r = threadIdx.x % TK;
    int64_t j = begin + t * TK + r;
    if (j >= end) j = end - 1;  // a valid key; its probability is zero
    const int64_t key = key_row(j);
    S* dst = tiles + (static_cast<size_t>(stage) * 2 * TK + (threadIdx.x < TK ? 0 : TK) + r) * LD;
    if (threadIdx.x < TK) {
      rs.copy(dst, kb + key * HD, row_bytes, stage);
    } else {
      const int64_t vrow = a.v_rows ? a.v_rows[key] : key;
      rs.copy(dst, vb + vrow * HD, row_bytes, stage);
    }
  };
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < n_tiles) load_tile(st, st);
    rs.commit();
  }

  // Past rows: the position limit of the thread's two tile rows (g, g + 8) — none for the
  // decode row, -1 for unused rows and positions outside [0, n_keys) — and the stamps of the
  // block's pages beside their ids (while the first tiles load). A key of page p at row x
  // counts for a row limited at `at` when stamps[p] < at and x <= at; s_count[r] counts them
  // for the first tile row r of each past row.
  __shared__ int32_t sst[PAST ? k_block_pages : 1];
  __shared__ int32_t s_count[PAST ? 16 : 1];
  int32_t at_r[2] = {INT32_MAX, INT32_MAX}, count[2] = {0, 0};
  const int32_t* stamps = PAST ? pr.stamps + blockIdx.y * pr.pages_capacity : nullptr;
  auto stamp_of = [&](int32_t page) -> int32_t {
    return page >= 0 && page < pr.pages_capacity ? stamps[page] : INT32_MAX;
  };
  if constexpr (PAST) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = g + 8 * h;
      if (r < G * NP) {
        const int32_t at = pr.rows[r / G];
        at_r[h] = at >= 0 && at < pt.plan[0] ? at : -1;
      } else if (r >= R) {
        at_r[h] = -1;
      }
    }
    if (threadIdx.x < 16) s_count[threadIdx.x] = 0;
    if (staged)
      for (int64_t i = threadIdx.x; i <= (end - 1) / ps - pg0; i += k_threads) sst[i] = stamp_of(sp[i]);
  }

  // The group's queries, scaled to log2 units, as 16 rows of halves (hi, and for bf16 lo); every
  // load issued before any is used (q comes from L2, just written).
  constexpr int QE = 16 * HD / k_threads;
  float qx[QE];
#pragma unroll
  for (int e = 0; e < QE; ++e) {
    const int idx = threadIdx.x + e * k_threads, r = idx / HD, d = idx % HD;
    if constexpr (PAST)
      qx[e] = r < R ? a.q[((r / G) * a.n_heads + h0 + r % G) * HD + d] : 0.0f;
    else
      qx[e] = r < G ? a.q[(row * a.n_heads + h0 + r) * HD + d] : 0.0f;
  }
#pragma unroll
  for (int e = 0; e < QE; ++e) {
    const int idx = threadIdx.x + e * k_threads, r = idx / HD, d = idx % HD;
    const float x = qx[e] * a.scale * k_log2e;
    const S hi = T::from(x);
    sq[0][r][d] = hi;
    if constexpr (BF16) sq[QP - 1][r][d] = T::from(x - T::load(&hi));
  }
  __syncthreads();
  uint32_t qf[QP][KS][4];
#pragma unroll
  for (int p = 0; p < QP; ++p)
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) ldmatrix_x4(qf[p][ks], &sq[p][lane % 16][16 * ks + 8 * (lane / 16)]);

  float o[NB][4];
#pragma unroll
  for (int nb = 0; nb < NB; ++nb) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g and g + 8

  for (int64_t t = 0; t < n_tiles; ++t) {
    const int next = static_cast<int>((t + STAGES - 1) % STAGES);
    rs.wait<STAGES - 2>(static_cast<int>(t % STAGES), static_cast<uint32_t>(t / STAGES) & 1u);
    if (threadIdx.x == 0 && t + STAGES - 1 < n_tiles) rs.expect(next, fill_bytes);
    __syncthreads();  // tile t is in; every warp is done with the stage about to be refilled
    if (t + STAGES - 1 < n_tiles) load_tile(t + STAGES - 1, next);
    rs.commit();
    const S* kt = tiles + static_cast<size_t>(t % STAGES) * 2 * TK * LD + 16 * warp * LD;
    const S* vt = kt + TK * LD;

    // Scores of the warp's 16 keys: s[nb] holds rows g, g + 8 x keys 8nb + 2c, + 1.
    float s[2][4];
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) {
      s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < KS / 2; ++kk) {
        uint32_t b[4];
        ldmatrix_x4(b, kt + (8 * nb + lane % 8) * LD + 32 * kk + 8 * (lane / 8));
#pragma unroll
        for (int p = 0; p < QP; ++p) {
          mma_16816<BF16>(s[nb], qf[p][2 * kk], b[0], b[1]);
          mma_16816<BF16>(s[nb], qf[p][2 * kk + 1], b[2], b[3]);
        }
      }
    }
    const int64_t j0 = begin + t * TK + 16 * warp + 2 * c;
#pragma unroll
    for (int nb = 0; nb < 2; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (j0 + 8 * nb + (e & 1) >= end)
          s[nb][e] = -INFINITY;
    if constexpr (PAST) {
      // s[nb][2h + e] is tile row g + 8h against key j0 + 8nb + e.
#pragma unroll
      for (int nb = 0; nb < 2; ++nb)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t j = j0 + 8 * nb + e;
          if (j >= end) continue;
          int32_t page, st;
          if (staged) {
            const int64_t at = (shift >= 0 ? j >> shift : j / ps) - pg0;
            page = sp[at];
            st = sst[at];
          } else {
            page = pages[j / ps];
            st = stamp_of(page);
          }
          const int64_t x = int64_t{page} * ps + (shift >= 0 ? j & (ps - 1) : j % ps);  // no 64-bit division
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            if (!(st < at_r[h] && x <= at_r[h])) s[nb][2 * h + e] = -INFINITY;
            else count[h] += 1;
          }
        }
    }
    // Online softmax per row; the four lanes of a row (same g) share its max.
    float corr[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mn = fmaxf(m[h], mx);
      const float base = mn == -INFINITY ? 0.0f : mn;
      corr[h] = exp2f(m[h] - base);
      float sum = 0.0f;
#pragma unroll
      for (int nb = 0; nb < 2; ++nb) {
        s[nb][2 * h] = exp2f(s[nb][2 * h] - base);
        s[nb][2 * h + 1] = exp2f(s[nb][2 * h + 1] - base);
        sum += s[nb][2 * h] + s[nb][2 * h + 1];
      }
      l[h] = fmaf(l[h], corr[h], sum);
      m[h] = mn;
    }
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
      o[nb][0] *= corr[0], o[nb][1] *= corr[0];
      o[nb][2] *= corr[1], o[nb][3] *= corr[1];
    }
    // P as the A operand (rows x the warp's 16 keys), straight from the score registers.
    const uint32_t pa[4] = {pack2<BF16>(s[0][0], s[0][1]), pack2<BF16>(s[0][2], s[0][3]),
                            pack2<BF16>(s[1][0], s[1][1]), pack2<BF16>(s[1][2], s[1][3])};
#pragma unroll
    for (int dp = 0; dp < NB / 2; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, vt + (lane % 8 + 8 * ((lane / 8) % 2)) * LD + 16 * dp + 8 * (lane / 16));
      mma_16816<BF16>(o[2 * dp], pa, b[0], b[1]);
      mma_16816<BF16>(o[2 * dp + 1], pa, b[2], b[3]);
    }
  }
  // Row sums over the four lanes of each row; then the warps' results through shared memory
  // (the tiles' space, free once every copy has landed and every warp has left the loop).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  cp_async_wait<0>();
  __syncthreads();
  float* sm_acc = reinterpret_cast<float*>(smem);  // [k_warps][16][HD]
  float* sm_w = sm_acc + k_warps * 16 * HD;        // [16][MAX_SPLITS]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    if (r >= R) continue;
    float* dst = sm_acc + (warp * 16 + r) * HD + 2 * c;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) *reinterpret_cast<float2*>(dst + 8 * nb) = make_float2(o[nb][2 * h], o[nb][2 * h + 1]);
    if (c == 0) {
      sm_m[warp][r] = m[h];
      sm_l[warp][r] = l[h];
    }
  }
  if constexpr (PAST) {
    // Every tile row ends in one merge: row r at item (r / G) n_heads + h0 + r % G. The keys
    // counted for each past row (its first tile row's, over the 4 lanes of the row and the
    // warps) go out directly or, split, through the partials to the merging block.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      count[h] += __shfl_xor_sync(0xffffffffu, count[h], 1);
      count[h] += __shfl_xor_sync(0xffffffffu, count[h], 2);
      const int r = g + 8 * h;
      if (c == 0 && r < G * NP && r % G == 0) atomicAdd(&s_count[r], count[h]);
    }
    __syncthreads();
    const int64_t item = h0;
    const prior_rows prior{pr.prior_out + item * HD, pr.prior_lse + item, G * NP};
    // The merging block stamps the ranker's pages once every block has read their stamps.
    auto stamp = [&] {
      const int64_t n_sel = pt.plan[2] < pt.stride ? pt.plan[2] : pt.stride;
      int32_t* st = pr.stamps + blockIdx.y * pr.pages_capacity;
      for (int64_t j = threadIdx.x; j < n_sel; j += k_threads) {
        const int32_t page = pages[j];
        if (page >= 0 && page < pr.pages_capacity) st[page] = pt.plan[0] - 1;
      }
    };
    if (n_splits == 1) {
      for (int idx = threadIdx.x; idx < NP * G; idx += k_threads)
        pr.keys[(idx / G) * a.n_heads + h0 + idx % G] = s_count[(idx / G) * G];
      const block_out bo{a.out + item * HD, a.lse + item, HD, 1};
      finish_block<16>(sm_acc, sm_m, sm_l, sm_w, R, HD, bo, nullptr, G, a.n_heads, prior);
      stamp();
      return;
    }
    for (int i = threadIdx.x; i < NP; i += k_threads)
      pr.part_keys[(static_cast<int64_t>(i) * a.n_heads + h0) * n_splits + split] = s_count[i * G];
    const block_out bo{part_o + (item * n_splits + split) * HD, part_lse + item * n_splits + split,
                       static_cast<int64_t>(n_splits) * HD, n_splits};
    const merge_ctx mc{n_splits, counters + blockIdx.y, part_o + item * n_splits * HD, part_lse + item * n_splits,
                       a.out + item * HD, a.lse + item};
    if (!finish_block<16>(sm_acc, sm_m, sm_l, sm_w, R, HD, bo, &mc, G, a.n_heads, prior)) return;
    for (int idx = threadIdx.x; idx < NP * G; idx += k_threads) {
      const int32_t* pk = pr.part_keys + (static_cast<int64_t>(idx / G) * a.n_heads + h0) * n_splits;
      int32_t total = 0;
      for (int sp_ = 0; sp_ < n_splits; ++sp_) total += __ldcg(pk + sp_);
      pr.keys[(idx / G) * a.n_heads + h0 + idx % G] = total;
    }
    stamp();
    return;
  }
  const int64_t item = row * a.n_heads + h0;
  // PRR's repair merges into the output the speculation left (in place: finish_block reads
  // each prior before writing it).
  const prior_rows prior = pt.merge ? prior_rows{a.out + item * HD, a.lse + item, G} : prior_rows{};
  if (n_splits == 1) {
    const block_out bo{a.out + item * HD, a.lse + item, HD, 1};
    finish_block<16>(sm_acc, sm_m, sm_l, sm_w, G, HD, bo, nullptr, 0, 0, prior);
    return;
  }
  const block_out bo{part_o + (item * n_splits + split) * HD, part_lse + item * n_splits + split,
                     static_cast<int64_t>(n_splits) * HD, n_splits};
  const merge_ctx mc{n_splits, counters + row * gridDim.y + blockIdx.y, part_o + item * n_splits * HD,
                     part_lse + item * n_splits, a.out + item * HD, a.lse + item};
  finish_block<16>(sm_acc, sm_m, sm_l, sm_w, G, HD, bo, &mc, 0, 0, prior);
}

template <typename T, int LPK, int GMAX>
__global__ void __launch_bounds__(k_threads) attention_split_kernel(const attention_args a,
                                                                    const page_table pt,
                                                                    int32_t n_splits,
                                                                    int32_t n_groups, float* part_o,
                                                                    float* part_lse,
                                                                    int32_t* counters) {
  pdl_begin();
  const int32_t split = blockIdx.x;
  const int32_t kvh = blockIdx.y / n_groups, hg = blockIdx.y % n_groups;
  const int64_t row = blockIdx.z;
  const int32_t G = a.n_heads / a.n_kv_heads;
  const int32_t h0 = kvh * G + hg * GMAX, nh = min(GMAX, G - hg * GMAX);
  key_source src;
  const int32_t ranker = pt.per_head ? h0 : kvh;
  if (pt.pages) {  // pages per query head: GMAX is 1 and h0 the head
    src.pages = pt.pages + ranker * pt.stride;
    src.page_size = pt.page_size;
    src.masked = pt.masked != 0;
    src.n_keys = pt.plan[0];
  }
  const int64_t len = src.pages ? paged_keys(pt, src.pages, ranker) : a.kv_len[row];
  const int64_t chunk = (len + n_splits - 1) / n_splits;
  src.begin = len < split * chunk ? len : split * chunk;
  src.end = len < src.begin + chunk ? len : src.begin + chunk;
  const int64_t item = row * a.n_heads + h0;
  if (n_splits == 1) {
    const block_out bo{a.out + item * a.head_dim, a.lse + item, a.head_dim, 1};
    attend_block<T, LPK, GMAX>(a, row, kvh, h0, nh, src, bo, nullptr);
    return;
  }
  const block_out bo{part_o + (item * n_splits + split) * a.head_dim, part_lse + item * n_splits + split,
                     static_cast<int64_t>(n_splits) * a.head_dim, n_splits};
  const merge_ctx mc{n_splits, counters + row * gridDim.y + blockIdx.y, part_o + item * n_splits * a.head_dim,
                     part_lse + item * n_splits, a.out + item * a.head_dim, a.lse + item};
  attend_block<T, LPK, GMAX>(a, row, kvh, h0, nh, src, bo, &mc);
}

template <typename T, int LPK, int GMAX>
__global__ void __launch_bounds__(k_threads) attention_sets_kernel(const attention_args a,
                                                                   const sets_args sets, int32_t n_splits,
                                                                   float* part_o, float* part_lse,
                                                                   int32_t* counters) {
  pdl_begin();
  // grid: (items: row * n_heads + h, n_splits); one query head, a contiguous share of its
  // listed keys (their number is on the device); the last split of an item merges.
  const int64_t item = blockIdx.x;
  const int32_t split = blockIdx.y;
  const int64_t row = item / a.n_heads;
  const int32_t h = static_cast<int32_t>(item % a.n_heads);
  key_source src;
  src.slots = sets.slots;
  src.log_weights = sets.log_weights;
  const int64_t first = sets.offsets[item], len = (sets.ends ? sets.ends[item] : sets.offsets[item + 1]) - first;
  const int64_t chunk = (len + n_splits - 1) / n_splits;
  src.begin = first + min(len, split * chunk);
  src.end = first + min(len, split * chunk + chunk);
  const int32_t kvh = h / (a.n_heads / a.n_kv_heads);
  if (n_splits == 1) {
    const block_out bo{a.out + item * a.head_dim, a.lse + item, a.head_dim, 1};
    attend_block<T, LPK, GMAX>(a, row, kvh, h, 1, src, bo, nullptr);
    return;
  }
  const block_out bo{part_o + (item * n_splits + split) * a.head_dim, part_lse + item * n_splits + split,
                     static_cast<int64_t>(n_splits) * a.head_dim, n_splits};
  const merge_ctx mc{n_splits, counters + item, part_o + item * n_splits * a.head_dim, part_lse + item * n_splits,
                     a.out + item * a.head_dim, a.lse + item};
  attend_block<T, LPK, GMAX>(a, row, kvh, h, 1, src, bo, &mc);
}

template <typename T>
__global__ void probe_keys_kernel(const attention_args a, const sets_args sets, float* scores,
                                  float* vnorm2) {
  pdl_begin();
  // grid: (ceil(largest / 128), items); a thread per listed key
  using S = typename T::storage;
  const int64_t item = blockIdx.y;
  const int64_t j = sets.offsets[item] + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= (sets.ends ? sets.ends[item] : sets.offsets[item + 1])) return;
  const int32_t h = static_cast<int32_t>(item % a.n_heads), kvh = h / (a.n_heads / a.n_kv_heads);
  const int64_t row = static_cast<int64_t>(kvh) * a.k_capacity + sets.slots[j];
  const S* k = static_cast<const S*>(a.k) + row * a.head_dim;
  const S* v = static_cast<const S*>(a.v) + row * a.head_dim;
  const float* q = a.q + item * a.head_dim;
  float s = 0.0f, n2 = 0.0f;
  for (int d = 0; d < a.head_dim; ++d) {
    s = fmaf(q[d], T::load(k + d), s);
    const float vd = T::load(v + d);
    n2 = fmaf(vd, vd, n2);
  }
  scores[j] = s * a.scale;
  vnorm2[j] = n2;
}

template <typename T>
__global__ void attention_mass_kernel(const attention_args a, const float* row_weights,
                                      float* mass, int64_t n_keys) {
  pdl_begin();
  // grid: (ceil(n_keys / 128), n_heads); a thread per key: sum over the rows that see it.
  using S = typename T::storage;
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int32_t h = blockIdx.y;
  if (j >= n_keys) return;
  const int32_t kvh = h / (a.n_heads / a.n_kv_heads);
  const S* k = static_cast<const S*>(a.k) + (static_cast<int64_t>(kvh) * a.k_capacity + j) * a.head_dim;
  float sum = 0.0f;
  for (int64_t i = 0; i < a.n; ++i) {
    if (j >= a.kv_len[i]) continue;
    const float* q = a.q + (i * a.n_heads + h) * a.head_dim;
    float s = 0.0f;
    for (int d = 0; d < a.head_dim; ++d) s = fmaf(q[d], T::load(k + d), s);
    sum = fmaf(row_weights[i], expf(s * a.scale - a.lse[i * a.n_heads + h]), sum);
  }
  mass[static_cast<int64_t>(h) * n_keys + j] = sum;
}

// The same mass with the key's dims across LPK lanes (8 each, one 16-byte load for f16/bf16):
// grid (ceil(n_keys / (256 / LPK)), n_kv_heads), 256 threads; a warp holds 32 / LPK keys and
// computes each key's scores for every query head of its group and every row, the lanes'
// partial dots summed by shuffles. Each key row is read once per group (coalesced), not once
// per query head by one thread as above; a block's keys are one pass of its warps, so a decode
// step has thousands of blocks to hide the loads' latency. Bytes: n_keys * n_kv_heads *
// head_dim * elem of keys, the queries (L1), n_heads * n_keys * 4 of mass written.
template <int LPK>
constexpr int64_t mass_keys_per_block() {
  return 256 / LPK;
}

template <typename T, int LPK>
__global__ void __launch_bounds__(256)
    attention_mass_lanes_kernel(const attention_args a, const float* row_weights, float* mass, int64_t n_keys) {
  pdl_begin();
  using S = typename T::storage;
  constexpr int KPW = k_warp / LPK;  // keys a warp holds at once
  const int lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp;
  const int sub = lane / LPK, part = lane % LPK;
  const int32_t kvh = blockIdx.y, group = a.n_heads / a.n_kv_heads;
  const int64_t first = blockIdx.x * mass_keys_per_block<LPK>();
  const int64_t end = min(first + mass_keys_per_block<LPK>(), n_keys);
  const int n_warps = blockDim.x / k_warp;
  for (int64_t base = first + warp * KPW; base < end; base += n_warps * KPW) {
    const int64_t j = base + sub;
    const bool valid = j < end;
    float kf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (valid) load8<T>(static_cast<const S*>(a.k) + (kvh * a.k_capacity + j) * a.head_dim + part * 8, kf);
    for (int32_t g = 0; g < group; ++g) {
      const int32_t h = kvh * group + g;
      float sum = 0.0f;
      for (int64_t i = 0; i < a.n; ++i) {
        const float4* qp = reinterpret_cast<const float4*>(a.q + (i * a.n_heads + h) * a.head_dim + part * 8);
        const float4 q0 = qp[0], q1 = qp[1];
        float s = q0.x * kf[0];
        s = fmaf(q0.y, kf[1], s);
        s = fmaf(q0.z, kf[2], s);
        s = fmaf(q0.w, kf[3], s);
        s = fmaf(q1.x, kf[4], s);
        s = fmaf(q1.y, kf[5], s);
        s = fmaf(q1.z, kf[6], s);
        s = fmaf(q1.w, kf[7], s);
#pragma unroll
        for (int o = LPK / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o, LPK);
        if (valid && j < a.kv_len[i])
          sum = fmaf(row_weights[i], expf(s * a.scale - a.lse[i * a.n_heads + h]), sum);
      }
      if (valid && part == 0) mass[static_cast<int64_t>(h) * n_keys + j] = sum;
    }
  }
}

// Runs f<T, LPK, GMAX> for the cache type, head dim and group of a (GMAX up to MAXG).
template <template <typename, int, int> class K, int MAXG, typename F>
cudaError_t dispatch(const attention_args& a, int32_t heads_per_block, F&& f) {
  const int lpk_needed = (a.head_dim + 7) / 8;
  return with_kv_type(a.kv_type, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    auto by_g = [&](auto lpk) -> cudaError_t {
      constexpr int LPK = decltype(lpk)::value;
      if (MAXG == 1 || heads_per_block <= 1) return f(K<T, LPK, 1>{});
      if constexpr (MAXG > 1) {
        if (heads_per_block <= 2) return f(K<T, LPK, 2>{});
        if (heads_per_block <= 4) return f(K<T, LPK, 4>{});
        return f(K<T, LPK, 8>{});
      }
      return cudaErrorInvalidValue;
    };
    if (lpk_needed <= 4) return by_g(std::integral_constant<int, 4>{});
    if (lpk_needed <= 8) return by_g(std::integral_constant<int, 8>{});
    if (lpk_needed <= 16) return by_g(std::integral_constant<int, 16>{});
    if (lpk_needed <= 32) return by_g(std::integral_constant<int, 32>{});
    return cudaErrorInvalidValue;
  });
}

template <typename T, int LPK, int GMAX>
struct split_k {
  cudaError_t launch(dim3 grid, cudaStream_t s, const attention_args& a, const page_table& pt,
                     int32_t n_splits, int32_t n_groups, float* po, float* pl, int32_t* counters) const {
    const size_t smem = smem_bytes<T, LPK>(a.head_dim, GMAX);
    const cudaError_t e = cudaFuncSetAttribute(attention_split_kernel<T, LPK, GMAX>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    launch_kernel(attention_split_kernel<T, LPK, GMAX>, grid, k_threads, smem, s, a, pt, n_splits, n_groups, po, pl,
                                                                        counters);
    return cudaGetLastError();
  }
};
template <typename T, int LPK, int GMAX>
struct sets_k {
  cudaError_t launch(dim3 grid, cudaStream_t s, const attention_args& a, const sets_args& sets, int32_t n_splits,
                     float* po, float* pl, int32_t* counters) const {
    const size_t smem = smem_bytes<T, LPK>(a.head_dim, GMAX);
    const cudaError_t e = cudaFuncSetAttribute(attention_sets_kernel<T, LPK, GMAX>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    launch_kernel(attention_sets_kernel<T, LPK, GMAX>, grid, k_threads, smem, s, a, sets, n_splits, po, pl,
                  counters);
    return cudaGetLastError();
  }
};

int32_t heads_per_block(const attention_args& a) { return std::min(a.n_heads / a.n_kv_heads, 8); }
int32_t head_groups(const attention_args& a) {
  const int32_t hpb = heads_per_block(a);
  return (a.n_heads / a.n_kv_heads + hpb - 1) / hpb;
}

// Blocks of the split kernel one SM holds for these shapes (cached per kernel and head_dim).
template <typename T, int LPK, int GMAX>
int32_t resident_blocks(int32_t head_dim) {
  static std::atomic<int64_t> cached{0};  // head_dim << 32 | blocks
  const int64_t c = cached.load(std::memory_order_relaxed);
  if (c >> 32 == head_dim && (c & 0xFFFFFFFF) > 0) return static_cast<int32_t>(c & 0xFFFFFFFF);
  const size_t smem = smem_bytes<T, LPK>(head_dim, GMAX);
  int n = 0;
  if (cudaFuncSetAttribute(attention_split_kernel<T, LPK, GMAX>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, attention_split_kernel<T, LPK, GMAX>, k_threads,
                                                    smem) != cudaSuccess ||
      n < 1) {
    cudaGetLastError();
    n = 2;
  }
  cached.store(static_cast<int64_t>(head_dim) << 32 | n, std::memory_order_relaxed);
  return n;
}

template <typename T, int LPK, int GMAX>
struct occupancy_k {
  int32_t blocks(int32_t head_dim) const { return resident_blocks<T, LPK, GMAX>(head_dim); }
};

// Whether the tensor-core kernel takes these shapes (else the CUDA-core one does).
bool mma_supported(const attention_args& a) {
  return (a.kv_type == etype::f16 || a.kv_type == etype::bf16) && (a.head_dim == 64 || a.head_dim == 128) &&
         a.n_heads / a.n_kv_heads <= 16;
}

// Runs f with the tensor-core kernel's cache type and head dim.
template <typename F>
cudaError_t with_mma(const attention_args& a, F&& f) {
  return with_kv_type(a.kv_type, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    if constexpr (sizeof(typename T::storage) == 2) {
      if (a.head_dim == 64) return f(T{}, std::integral_constant<int, 64>{});
      return f(T{}, std::integral_constant<int, 128>{});
    }
    return cudaErrorInvalidValue;
  });
}

template <typename T, int HD, bool PAST = false>
cudaError_t prepare_mma() {
  using C = mma_decode<T::code == etype::bf16, HD>;
  return cudaFuncSetAttribute(attention_mma_kernel<T, HD, PAST>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(C::smem));
}

// Blocks of the tensor-core kernel one SM holds (cached per instantiation).
template <typename T, int HD>
int32_t mma_resident_blocks() {
  static std::atomic<int32_t> cached{0};
  int32_t n = cached.load(std::memory_order_relaxed);
  if (n > 0) return n;
  int got = 0;
  if (prepare_mma<T, HD>() != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&got, attention_mma_kernel<T, HD>, k_threads,
                                                    mma_decode<T::code == etype::bf16, HD>::smem) != cudaSuccess ||
      got < 1) {
    cudaGetLastError();
    got = 1;
  }
  cached.store(got, std::memory_order_relaxed);
  return got;
}

// Splits per (row, KV head, head group) — per (row, query head) when each head reads its own
// pages: as many blocks as the GPU holds at once (one even wave), at least 128 keys each; one
// split when the merges would not fit their counters. (H100, 128K keys, 1/16 of the pages:
// half a wave, two or three took per-group page attention from 21.6 to 22.3, 28.3 or 28.1 us
// and per-head from 49.5 to 65.7, 51.3 or 60.1; dense attention was 194 us at half a wave,
// 198 at one, 212 at two.)
int32_t split_count(const attention_args& a, int32_t n_sms, bool per_head = false) {
  const bool mma = mma_supported(a);
  const int64_t blocks = per_head ? static_cast<int64_t>(a.n_heads) * a.n
                                  : static_cast<int64_t>(a.n_kv_heads) * (mma ? 1 : head_groups(a)) * a.n;
  if (blocks > MAX_COUNTERS) return 1;
  int32_t per_sm = 2;
  if (mma) {
    with_mma(a, [&](auto t, auto hd) -> cudaError_t {
      per_sm = mma_resident_blocks<decltype(t), decltype(hd)::value>();
      return cudaSuccess;
    });
  } else {
    dispatch<occupancy_k, 8>(a, per_head ? 1 : heads_per_block(a), [&](auto k) -> cudaError_t {
      per_sm = k.blocks(a.head_dim);
      return cudaSuccess;
    });
  }
  const int64_t wave = static_cast<int64_t>(per_sm) * n_sms;
  const int64_t want = std::max<int64_t>(1, wave / blocks);
  const int64_t by_len = std::max<int64_t>(1, a.kv_bound / 128);
  return static_cast<int32_t>(std::min<int64_t>({want, by_len, MAX_SPLITS}));
}

}  // namespace

// In attention_prefill.cu: the tensor-core path for many rows, when it takes these shapes.
// Few row blocks over a long kv_bound are split over the keys through work, of
// flash_workspace_bytes (0: no split, work may be null).
bool flash_supported(const attention_args& a);
size_t flash_workspace_bytes(const attention_args& a, int32_t n_sms);
cudaError_t launch_flash_attention(const attention_args& a, void* work, int32_t n_sms, cudaStream_t s);

// MAX_COUNTERS merge counters first (zero when the workspace is made, and every merging block
// resets its own, so they are zero between launches whatever shapes used the rest), then the
// partials [n][n_heads][n_splits][head_dim + 1] floats.
namespace {
size_t split_workspace_bytes(const attention_args& a, int32_t n_splits) {
  if (n_splits == 1) return 0;
  return MAX_COUNTERS * sizeof(int32_t) +
         static_cast<size_t>(a.n) * a.n_heads * n_splits * (a.head_dim + 1) * sizeof(float);
}

// The decode kernels over a row's keys (dense) or its rankers' pages.
cudaError_t launch_split(const attention_args& a, const page_table& pt, void* work, int32_t n_sms,
                         cudaStream_t s) {
  if (a.head_dim % 8 != 0 || a.head_dim > 256 || a.n_heads % a.n_kv_heads != 0)
    return cudaErrorInvalidValue;
  const bool per_head = pt.pages && pt.per_head;
  const int32_t hpb = per_head ? 1 : heads_per_block(a);
  const int32_t groups = per_head ? a.n_heads / a.n_kv_heads : head_groups(a);
  const int32_t n_splits = split_count(a, n_sms, per_head);
  if (n_splits > 1 && !work) return cudaErrorInvalidValue;
  int32_t* counters = static_cast<int32_t*>(work);
  float* po = work ? reinterpret_cast<float*>(counters + MAX_COUNTERS) : nullptr;
  float* pl = po ? po + static_cast<size_t>(a.n) * a.n_heads * n_splits * a.head_dim : nullptr;
  const bool kept = pt.counts || pt.merge;
  if (kept && (pt.masked || !mma_supported(a))) return cudaErrorInvalidValue;
  if (mma_supported(a) && !pt.masked) {  // masked tables: the CUDA-core kernel
    const dim3 grid(static_cast<unsigned>(n_splits), static_cast<unsigned>(per_head ? a.n_heads : a.n_kv_heads),
                    static_cast<unsigned>(a.n));
    return with_mma(a, [&](auto t, auto hd) -> cudaError_t {
      using T = decltype(t);
      constexpr int HD = decltype(hd)::value;
      const cudaError_t e = prepare_mma<T, HD>();
      if (e != cudaSuccess) return e;
      launch_kernel(attention_mma_kernel<T, HD>, grid, k_threads, mma_decode<T::code == etype::bf16, HD>::smem, s,
          a, pt, n_splits, po, pl, counters, past_rows{});
      return cudaGetLastError();
    });
  }
  const dim3 grid(static_cast<unsigned>(n_splits), static_cast<unsigned>(a.n_kv_heads * groups),
                  static_cast<unsigned>(a.n));
  return dispatch<split_k, 8>(a, hpb, [&](auto k) -> cudaError_t {
    return k.launch(grid, s, a, pt, n_splits, groups, po, pl, counters);
  });
}
}  // namespace

// The flash path's partials go after the MAX_COUNTERS merge counters: the same scratch serves
// the split kernels, which need those counters left zero.
size_t attention_workspace_bytes(const attention_args& a, int32_t n_sms) {
  if (flash_supported(a)) {
    const size_t bytes = flash_workspace_bytes(a, n_sms);
    return bytes ? MAX_COUNTERS * sizeof(int32_t) + bytes : 0;
  }
  return split_workspace_bytes(a, split_count(a, n_sms));
}

cudaError_t launch_attention(const attention_args& a, void* work, int32_t n_sms, cudaStream_t s) {
  if (a.n <= 0) return cudaSuccess;
  if (flash_supported(a))
    return launch_flash_attention(a, work ? static_cast<int32_t*>(work) + MAX_COUNTERS : nullptr, n_sms, s);
  return launch_split(a, page_table{}, work, n_sms, s);
}

size_t attention_pages_workspace_bytes(const attention_args& a, const page_table& pt, int32_t n_sms) {
  return split_workspace_bytes(a, split_count(a, n_sms, pt.per_head != 0));
}

cudaError_t launch_attention_pages(const attention_args& a, const page_table& pt, void* work,
                                   int32_t n_sms, cudaStream_t s) {
  if (a.n != 1 || !pt.pages || !pt.plan || pt.page_size < 1) return cudaErrorInvalidValue;
  return launch_split(a, pt, work, n_sms, s);
}

bool attention_kept_pages_fits(const attention_args& a) {
  return a.n == 1 && a.head_dim % 8 == 0 && a.n_kv_heads > 0 && a.n_heads % a.n_kv_heads == 0 && mma_supported(a);
}

bool attention_pages_window_fits(const attention_args& a, const page_table& pt, int32_t n_past) {
  if (a.n_kv_heads < 1 || a.n_heads % a.n_kv_heads != 0 || n_past < 1 || pt.masked || !pt.pages) return false;
  const int32_t g = pt.per_head ? 1 : a.n_heads / a.n_kv_heads;
  return mma_supported(a) && g * (n_past + 1) <= 16;
}

// The split kernels' workspace for a.n rows, then the past rows' key counts per split
// [n_past][n_heads][n_splits].
size_t attention_pages_window_workspace_bytes(const attention_args& a, const page_table& pt, int32_t n_sms) {
  attention_args one = a;
  one.n = 1;
  const int32_t n_splits = split_count(one, n_sms, pt.per_head != 0);
  const size_t bytes = split_workspace_bytes(a, n_splits);
  return bytes ? bytes + static_cast<size_t>(a.n - 1) * a.n_heads * n_splits * sizeof(int32_t) : 0;
}

cudaError_t launch_attention_pages_window(const attention_args& a, const page_table& pt, const past_rows& pr,
                                          void* work, int32_t n_sms, cudaStream_t s) {
  if (!attention_pages_window_fits(a, pt, pr.n_past) || a.n != pr.n_past + 1 || !pt.plan || pt.page_size < 1 ||
      !pr.rows || !pr.stamps || !pr.keys || !pr.prior_out || !pr.prior_lse || pr.pages_capacity < 1)
    return cudaErrorInvalidValue;
  attention_args one = a;
  one.n = 1;
  const bool per_head = pt.per_head != 0;
  const int32_t n_splits = split_count(one, n_sms, per_head);
  if (n_splits > 1 && !work) return cudaErrorInvalidValue;
  int32_t* counters = static_cast<int32_t*>(work);
  float* po = work ? reinterpret_cast<float*>(counters + MAX_COUNTERS) : nullptr;
  float* pl = po ? po + static_cast<size_t>(a.n) * a.n_heads * n_splits * a.head_dim : nullptr;
  past_rows p = pr;
  p.part_keys = pl ? reinterpret_cast<int32_t*>(pl + static_cast<size_t>(a.n) * a.n_heads * n_splits) : nullptr;
  const dim3 grid(static_cast<unsigned>(n_splits), static_cast<unsigned>(per_head ? a.n_heads : a.n_kv_heads), 1);
  return with_mma(a, [&](auto t, auto hd) -> cudaError_t {
    using T = decltype(t);
    constexpr int HD = decltype(hd)::value;
    const cudaError_t e = prepare_mma<T, HD, true>();
    if (e != cudaSuccess) return e;
    launch_kernel(attention_mma_kernel<T, HD, true>, grid, k_threads, mma_decode<T::code == etype::bf16, HD>::smem, s,
                  a, pt, n_splits, po, pl, counters, p);
    return cudaGetLastError();
  });
}

cudaError_t launch_attention_mass(const attention_args& a, const float* row_weights, float* mass,
                                  int64_t n_keys, cudaStream_t s) {
  if (n_keys <= 0) return cudaSuccess;
  const int lpk = a.head_dim / 8;
  if (a.head_dim % 8 == 0 && (lpk == 4 || lpk == 8 || lpk == 16 || lpk == 32)) {
    const dim3 grid(static_cast<unsigned>(ceil_div(n_keys, 256 / lpk)), static_cast<unsigned>(a.n_kv_heads));
    return with_kv_type(a.kv_type, [&](auto t) {
      using T = decltype(t);
      switch (lpk) {
        case 4: launch_kernel(attention_mass_lanes_kernel<T, 4>, grid, 256, 0, s, a, row_weights, mass, n_keys); break;
        case 8: launch_kernel(attention_mass_lanes_kernel<T, 8>, grid, 256, 0, s, a, row_weights, mass, n_keys); break;
        case 16: launch_kernel(attention_mass_lanes_kernel<T, 16>, grid, 256, 0, s, a, row_weights, mass, n_keys); break;
        default: launch_kernel(attention_mass_lanes_kernel<T, 32>, grid, 256, 0, s, a, row_weights, mass, n_keys); break;
      }
      return cudaGetLastError();
    });
  }
  const dim3 grid(static_cast<unsigned>(ceil_div(n_keys, 128)), static_cast<unsigned>(a.n_heads));
  return with_kv_type(a.kv_type, [&](auto t) {
    attention_mass_kernel<decltype(t)><<<grid, 128, 0, s>>>(a, row_weights, mass, n_keys);
    return cudaGetLastError();
  });
}

namespace {
// Splits per listed item: enough blocks for a wave of the CUDA-core kernel, at least 128 keys
// each by the sets' host-side bound on a set's size; one when the merges would not fit their
// counters. (A few past rows' unseen pages are a few dozen items of a thousand keys or more:
// one block each left most SMs idle.)
int32_t sets_split_count(const attention_args& a, const sets_args& sets, int32_t n_sms) {
  if (sets.items <= 0 || sets.items > MAX_COUNTERS || sets.items != a.n * a.n_heads) return 1;
  int32_t per_sm = 2;
  dispatch<occupancy_k, 1>(a, 1, [&](auto k) -> cudaError_t {
    per_sm = k.blocks(a.head_dim);
    return cudaSuccess;
  });
  const int64_t want = std::max<int64_t>(1, static_cast<int64_t>(per_sm) * n_sms / sets.items);
  const int64_t by_len = std::max<int64_t>(1, sets.largest / 128);
  return static_cast<int32_t>(std::min<int64_t>({want, by_len, MAX_SPLITS}));
}
}  // namespace

size_t attention_sets_workspace_bytes(const attention_args& a, const sets_args& sets, int32_t n_sms) {
  return split_workspace_bytes(a, sets_split_count(a, sets, n_sms));
}

cudaError_t launch_attention_sets(const attention_args& a, const sets_args& sets, void* work, int32_t n_sms,
                                  cudaStream_t s) {
  if (sets.items <= 0) return cudaSuccess;
  if (a.head_dim % 8 != 0 || a.head_dim > 256) return cudaErrorInvalidValue;
  const int32_t n_splits = sets_split_count(a, sets, n_sms);
  if (n_splits > 1 && !work) return cudaErrorInvalidValue;
  int32_t* counters = static_cast<int32_t*>(work);
  float* po = work ? reinterpret_cast<float*>(counters + MAX_COUNTERS) : nullptr;
  float* pl = po ? po + static_cast<size_t>(a.n) * a.n_heads * n_splits * a.head_dim : nullptr;
  return dispatch<sets_k, 1>(a, 1, [&](auto k) -> cudaError_t {
    return k.launch(dim3(static_cast<unsigned>(sets.items), static_cast<unsigned>(n_splits)), s, a, sets,
                    n_splits, po, pl, counters);
  });
}

cudaError_t launch_probe_keys(const attention_args& a, const sets_args& sets, float* scores,
                              float* vnorm2, cudaStream_t s) {
  if (sets.items <= 0 || sets.largest <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(ceil_div(sets.largest, 128)), static_cast<unsigned>(sets.items));
  return with_kv_type(a.kv_type, [&](auto t) {
    probe_keys_kernel<decltype(t)><<<grid, 128, 0, s>>>(a, sets, scores, vnorm2);
    return cudaGetLastError();
  });
}

}  // namespace sa::cuda

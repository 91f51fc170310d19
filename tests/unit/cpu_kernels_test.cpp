// The CPU backend's SIMD kernel sets against the reference set, bit for bit: matrix products of
// every weight type (decode rows, fused, and prefill rows, tiled; unaligned rows, lengths that are
// not a multiple of 8 or of 4 rows), dot products, attention, and whole greedy decodes of the
// shipped model. A set this CPU cannot run reports as skipped.
//
// The opt-in int8 sets change results: their integer products are checked against the scalar
// integer oracle bit for bit, against the reference within the input's quantization error, and
// on greedy decodes of the shipped models by how often they pick the reference's token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/kernel_set.h"
#include "backend/cpu/ops.h"
#include "int8_inputs.h"
#include "model/model.h"
#include "quant/quants.h"
#include "session/session.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

using sa::dtype;
using sa::cpu::kernel_set;

// Runs f once with set s active, then restores the set that was active.
template <class F>
void with_set(kernel_set s, F f) {
  const kernel_set was = sa::cpu::active_kernel_set();
  ASSERT_TRUE(sa::cpu::use_kernel_set(s));
  f();
  sa::cpu::use_kernel_set(was);
}

class cpu_kernels : public ::testing::TestWithParam<kernel_set> {
 protected:
  void SetUp() override {
    if (!sa::cpu::kernel_set_supported(GetParam()))
      GTEST_SKIP() << "this build or CPU has no " << sa::cpu::kernel_set_name(GetParam()) << " kernels";
  }
};

// The set's name as a test name ("avx2-int8" -> "avx2_int8").
std::string set_name(const ::testing::TestParamInfo<kernel_set>& p) {
  std::string s = sa::cpu::kernel_set_name(p.param);
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

// Every set whose float kernels are its own (the int8 sets keep their base set's, except the
// AVX-512 ones: attention's on 16 lanes).
INSTANTIATE_TEST_SUITE_P(sets, cpu_kernels, ::testing::Values(kernel_set::avx2, kernel_set::avx512_vnni, kernel_set::neon),
                         set_name);

// Whether the set's integer products replace the reference's (their results differ from it).
bool int8_set(kernel_set s) {
  bool int8 = false;
  with_set(s, [&] { int8 = sa::cpu::active_kernels().dot_q8 != nullptr; });
  return int8;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_P(cpu_kernels, dot_products_equal_the_reference_bitwise) {
  for (int64_t n : {1, 7, 8, 9, 31, 64, 100, 4096})
    for (uint32_t seed = 0; seed < 50; ++seed) {
      const std::vector<float> a = sa_test::random_normal(static_cast<size_t>(n), 2 * seed + 1),
                               b = sa_test::random_normal(static_cast<size_t>(n), 2 * seed + 2);
      float want = 0, got = 0;
      with_set(kernel_set::reference, [&] { want = sa::cpu::active_kernels().dot_f32(a.data(), b.data(), n); });
      with_set(GetParam(), [&] { got = sa::cpu::active_kernels().dot_f32(a.data(), b.data(), n); });
      ASSERT_EQ(std::memcmp(&want, &got, sizeof want), 0) << "n = " << n << ": " << want << " vs " << got;
    }
}

TEST_P(cpu_kernels, register_blocks_equal_the_reference_dot_products_bitwise) {
  with_set(GetParam(), [&] {
    const auto blk = sa::cpu::active_kernels().dot_block;
    for (int64_t n : {1, 7, 8, 9, 31, 100, 4096})
      for (int64_t rows = 1; rows <= 4; ++rows)
        for (int64_t nx = 1; nx <= 3; ++nx) {
          const std::vector<float> w = sa_test::random_normal(static_cast<size_t>(rows * n), static_cast<uint64_t>(n + rows));
          const std::vector<float> x = sa_test::random_normal(static_cast<size_t>(nx * n), static_cast<uint64_t>(7 * n + nx));
          float got[12];
          blk(w.data(), rows, x.data(), nx, n, got);
          for (int64_t i = 0; i < nx; ++i)
            for (int64_t r = 0; r < rows; ++r) {
              const float want = sa::cpu::dot_f32(w.data() + r * n, x.data() + i * n, n);
              ASSERT_EQ(std::memcmp(&want, &got[i * 4 + r], sizeof want), 0)
                  << "n = " << n << ", block " << rows << " x " << nx << " at (" << i << ", " << r << ")";
            }
        }
  });
}

// Attention's score blocks: every (key, query) pair the reference's dot product, scaled, with +0
// added; full 4 x 4 blocks and partial ones, lengths with and without a tail of 8, a row stride
// wider than the block.
TEST_P(cpu_kernels, attention_scores_equal_the_reference_dot_products_bitwise) {
  const sa::cpu::kernels* k = nullptr;
  with_set(GetParam(), [&] { k = &sa::cpu::active_kernels(); });
  ASSERT_NE(k->scores, nullptr) << "every set has attention's score kernel";
  const int64_t stride = 11;
  for (int64_t n : {1, 7, 8, 36, 64, 100, 128})
    for (int64_t rows = 1; rows <= 4; ++rows)
      for (int64_t nq = 1; nq <= 4; ++nq) {
        const std::vector<float> keys = sa_test::random_normal(static_cast<size_t>(rows * n), static_cast<uint64_t>(n + rows));
        const std::vector<float> q = sa_test::random_normal(static_cast<size_t>(nq * n), static_cast<uint64_t>(5 * n + nq));
        std::vector<float> got(static_cast<size_t>(4 * stride), -1.0f);
        k->scores(keys.data(), rows, q.data(), nq, n, 0.125f, got.data(), stride);
        for (int64_t i = 0; i < nq; ++i)
          for (int64_t r = 0; r < rows; ++r) {
            const float want = sa::cpu::dot_f32(keys.data() + r * n, q.data() + i * n, n) * 0.125f + 0.0f;
            ASSERT_EQ(std::memcmp(&want, &got[static_cast<size_t>(i * stride + r)], sizeof want), 0)
                << "n = " << n << ", block " << rows << " x " << nq << " at (" << i << ", " << r << ")";
          }
      }
}

TEST_P(cpu_kernels, scaled_adds_equal_the_reference_bitwise) {
  for (int64_t n : {1, 7, 8, 9, 64, 100}) {
    const std::vector<float> x = sa_test::random_normal(static_cast<size_t>(n), static_cast<uint64_t>(n));
    const std::vector<float> y0 = sa_test::random_normal(static_cast<size_t>(n), static_cast<uint64_t>(n + 1));
    std::vector<float> want = y0, got = y0;
    sa::cpu::add_scaled(want.data(), x.data(), 0.37f, n);
    with_set(GetParam(), [&] { sa::cpu::active_kernels().add_scaled(got.data(), x.data(), 0.37f, n); });
    EXPECT_TRUE(same_bits(want, got)) << "n = " << n;
  }
}

TEST_P(cpu_kernels, weighted_sums_of_rows_equal_the_reference_bitwise) {
  for (int64_t n : {1, 7, 8, 9, 64, 100, 136}) {
    for (int64_t count : {0, 1, 3, 32}) {
      const int64_t stride = n + 3;  // rows not packed
      const std::vector<float> x = sa_test::random_normal(static_cast<size_t>(count * stride + n), static_cast<uint64_t>(n));
      const std::vector<float> a = sa_test::random_normal(static_cast<size_t>(count + 1), static_cast<uint64_t>(count + 5));
      const std::vector<float> y0 = sa_test::random_normal(static_cast<size_t>(n), static_cast<uint64_t>(n + 1));
      std::vector<float> want = y0, got = y0;
      for (int64_t t = 0; t < count; ++t) sa::cpu::add_scaled(want.data(), x.data() + t * stride, a[static_cast<size_t>(t)], n);
      with_set(GetParam(), [&] {
        sa::cpu::active_kernels().add_scaled_rows(got.data(), x.data(), stride, a.data(), count, n);
      });
      EXPECT_TRUE(same_bits(want, got)) << "n = " << n << ", rows " << count;
    }
  }
}

// Two outputs' weighted sums from the same rows, each the reference's adds in order.
TEST_P(cpu_kernels, weighted_sums_into_two_outputs_equal_the_reference_bitwise) {
  const sa::cpu::kernels* k = nullptr;
  with_set(GetParam(), [&] { k = &sa::cpu::active_kernels(); });
  if (k->add_scaled_rows2 == nullptr) GTEST_SKIP() << "no two-output kernel in this set: attention takes add_scaled_rows";
  for (int64_t n : {1, 9, 64, 100, 136}) {
    for (int64_t count : {0, 1, 3, 32}) {
      const int64_t stride = n + 3;
      const std::vector<float> x = sa_test::random_normal(static_cast<size_t>(count * stride + n), static_cast<uint64_t>(n));
      const std::vector<float> a0 = sa_test::random_normal(static_cast<size_t>(count + 1), static_cast<uint64_t>(count + 5));
      const std::vector<float> a1 = sa_test::random_normal(static_cast<size_t>(count + 1), static_cast<uint64_t>(count + 6));
      const std::vector<float> y0 = sa_test::random_normal(static_cast<size_t>(n), static_cast<uint64_t>(n + 1));
      const std::vector<float> y1 = sa_test::random_normal(static_cast<size_t>(n), static_cast<uint64_t>(n + 2));
      std::vector<float> want0 = y0, want1 = y1, got0 = y0, got1 = y1;
      for (int64_t t = 0; t < count; ++t) {
        sa::cpu::add_scaled(want0.data(), x.data() + t * stride, a0[static_cast<size_t>(t)], n);
        sa::cpu::add_scaled(want1.data(), x.data() + t * stride, a1[static_cast<size_t>(t)], n);
      }
      k->add_scaled_rows2(got0.data(), got1.data(), x.data(), stride, a0.data(), a1.data(), count, n);
      EXPECT_TRUE(same_bits(want0, got0)) << "n = " << n << ", rows " << count << ", first output";
      EXPECT_TRUE(same_bits(want1, got1)) << "n = " << n << ", rows " << count << ", second output";
    }
  }
}

// The gated activation: the set's swiglu against the reference's bit for bit, gates swept
// through every branch of the exponential (and the special values), odd lengths for the tails.
TEST_P(cpu_kernels, swiglu_equals_the_reference_bitwise) {
  std::vector<float> g;
  for (float v = -100.0f; v < 100.0f; v += 0.0417f) g.push_back(v);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {-inf, inf, std::numeric_limits<float>::quiet_NaN(), -0.0f, 0.0f, 87.3f, 87.31f, -88.3f, -88.31f})
    g.push_back(v);
  const std::vector<float> u = sa_test::random_normal(g.size(), 9);
  const sa::cpu::kernels* k = nullptr;
  with_set(GetParam(), [&] { k = &sa::cpu::active_kernels(); });
  for (size_t n : {g.size(), g.size() - 3, size_t{5}}) {
    std::vector<float> want(n), got(n);
    sa::cpu::swiglu_span(g.data(), u.data(), want.data(), static_cast<int64_t>(n));
    k->swiglu(g.data(), u.data(), got.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << "g " << g[i];
        continue;
      }
      ASSERT_EQ(std::memcmp(&want[i], &got[i], sizeof(float)), 0) << "g " << g[i] << ": " << want[i] << " vs " << got[i];
    }
  }
}

// Where a test's weight rows start in misaligned_weights(): one byte in, so that no row or
// block is aligned (f32 rows, which the reference reads in place, are as aligned as a model
// file keeps them).
size_t weight_offset(dtype type) { return type == dtype::f32 ? 0 : 1; }

// n_out random rows of n_in weights stored as `type`, starting weight_offset(type) bytes in.
std::vector<uint8_t> misaligned_weights(dtype type, int64_t n_in, int64_t n_out) {
  const size_t row = static_cast<size_t>(sa::row_bytes(type, n_in)), at = weight_offset(type);
  std::vector<uint8_t> w(row * static_cast<size_t>(n_out) + 1);
  const std::vector<float> wf = sa_test::random_normal(static_cast<size_t>(n_out * n_in), 3, 0.5f);
  for (int64_t o = 0; o < n_out; ++o)
    sa::quantize_row(type, wf.data() + o * n_in, w.data() + at + static_cast<size_t>(o) * row, n_in);
  return w;
}

TEST_P(cpu_kernels, matrix_products_of_every_type_equal_the_reference_bitwise) {
  sa::cpu::thread_pool pool(2);
  sa::cpu::scratch_t scratch(2);
  const dtype types[] = {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0, dtype::q4_k, dtype::q6_k};
  const bool int8 = int8_set(GetParam());
  for (dtype type : types) {
    if (int8 && sa::cpu::q8_block(type) > 0) continue;  // cpu_int8_kernels holds these to their oracle
    const int64_t block = sa::traits(type).block_elems;
    // n_in: a multiple of the block; plain floats also get lengths that are not a multiple of 8.
    std::vector<int64_t> lengths = {block == 1 ? 64 : 256, 512};
    if (block == 1) lengths.insert(lengths.end(), {13, 100});
    for (int64_t n_in : lengths)
      for (int64_t n : {1, 2, 4, 5, 9}) {  // <= 4: the fused decode kernels; more: tiles
        const int64_t n_out = 13;            // not a multiple of the 4-row groups
        const size_t row = static_cast<size_t>(sa::row_bytes(type, n_in));
        const size_t at = weight_offset(type);
        const std::vector<uint8_t> w = misaligned_weights(type, n_in, n_out);
        const std::vector<float> x = sa_test::random_normal(static_cast<size_t>(n * n_in), 4);
        for (bool accumulate : {false, true}) {
          std::vector<float> want(static_cast<size_t>(n * n_out), 0.25f), got = want;
          with_set(kernel_set::reference, [&] {
            sa::cpu::matmul_rows(pool, scratch, type, w.data() + at, row, n_out, n_in, x.data(), n, want.data(), accumulate);
          });
          with_set(GetParam(), [&] {
            sa::cpu::matmul_rows(pool, scratch, type, w.data() + at, row, n_out, n_in, x.data(), n, got.data(), accumulate);
          });
          EXPECT_TRUE(same_bits(want, got)) << sa::traits(type).name << " n_in " << n_in << " rows " << n
                                            << (accumulate ? " accumulating" : "");
        }
      }
  }
}

// A set's fused decode product (dot_rows: weight rows expanded in registers) equals the
// reference's two steps, the row dequantized then dot_f32 with the input, bit for bit — called
// directly, without the thread pool (so it also runs under an emulator), 1 to 4 rows at a time,
// rows starting at odd bytes.
TEST_P(cpu_kernels, fused_decode_rows_equal_the_reference_dequantize_then_dot_bitwise) {
  const sa::cpu::kernels* k = nullptr;
  with_set(GetParam(), [&] { k = &sa::cpu::active_kernels(); });
  if (!k->dot_rows) GTEST_SKIP() << "no fused decode product in this set";
  const sa::cpu::kernels& ref = [] {
    const sa::cpu::kernels* r = nullptr;
    with_set(kernel_set::reference, [&] { r = &sa::cpu::active_kernels(); });
    return *r;
  }();
  const dtype types[] = {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0, dtype::q4_k, dtype::q6_k};
  for (dtype type : types) {
    ASSERT_TRUE(k->dot_rows_types(type)) << sa::traits(type).name;
    const int64_t block = sa::traits(type).block_elems;
    std::vector<int64_t> lengths = {block == 1 ? 64 : 256, 768};
    if (block == 1) lengths.insert(lengths.end(), {13, 100});
    for (int64_t n_in : lengths) {
      const size_t row = static_cast<size_t>(sa::row_bytes(type, n_in)), at = weight_offset(type);
      const std::vector<uint8_t> w = misaligned_weights(type, n_in, 4);
      const std::vector<float> x = sa_test::random_normal(static_cast<size_t>(n_in), 5);
      for (int64_t rows = 1; rows <= 4; ++rows) {
        std::vector<float> want(static_cast<size_t>(rows)), got(static_cast<size_t>(rows), NAN), deq(static_cast<size_t>(n_in));
        for (int64_t r = 0; r < rows; ++r) {
          sa::dequantize_row(type, w.data() + at + static_cast<size_t>(r) * row, deq.data(), n_in);
          want[static_cast<size_t>(r)] = ref.dot_f32(deq.data(), x.data(), n_in);
        }
        k->dot_rows(type, w.data() + at, row, rows, x.data(), n_in, got.data());
        EXPECT_TRUE(same_bits(want, got)) << sa::traits(type).name << " n_in " << n_in << ", " << rows << " rows";
      }
    }
  }
}

// Rows over blocks of keys and queries (a head_dim that is not a multiple of 8, one that is with
// a group of 3, so blocks of 4 queries span rows), lengths past the 16 partial sums and short.
TEST_P(cpu_kernels, attention_equals_the_reference_bitwise) {
  sa::cpu::thread_pool pool(2);
  sa::cpu::scratch_t scratch(2);
  struct shape {
    int32_t n_heads, n_kv, hd;
  };
  for (const shape sh : {shape{4, 2, 36}, shape{6, 2, 64}}) {
    const int32_t n_heads = sh.n_heads, n_kv = sh.n_kv, hd = sh.hd;
    const int64_t cap = 70, n = 5;
    const std::vector<float> q = sa_test::random_normal(static_cast<size_t>(n * n_heads * hd), 5);
    const std::vector<float> k = sa_test::random_normal(static_cast<size_t>(n_kv * cap * hd), 6);
    const std::vector<float> v = sa_test::random_normal(static_cast<size_t>(n_kv * cap * hd), 7);
    const sa::cpu::kv_rows kr{reinterpret_cast<const uint8_t*>(k.data()), dtype::f32, hd};
    const sa::cpu::kv_rows vr{reinterpret_cast<const uint8_t*>(v.data()), dtype::f32, hd};
    const std::vector<int32_t> len = {70, 41, 1, 17, 66};
    auto run = [&](std::vector<float>& out, std::vector<float>& lse) {
      out.assign(static_cast<size_t>(n * n_heads * hd), 0.0f);
      lse.assign(static_cast<size_t>(n * n_heads), 0.0f);
      sa::cpu::attention_rows(pool, scratch, q.data(), n, n_heads, n_kv, hd, kr, cap, vr, cap, nullptr, len,
                              0.17f, out.data(), lse.data(), nullptr, nullptr, 0);
    };
    std::vector<float> want_out, want_lse, got_out, got_lse;
    with_set(kernel_set::reference, [&] { run(want_out, want_lse); });
    with_set(GetParam(), [&] { run(got_out, got_lse); });
    EXPECT_TRUE(same_bits(want_out, got_out)) << "head_dim " << hd;
    EXPECT_TRUE(same_bits(want_lse, got_lse)) << "head_dim " << hd;
  }
}

// attention_rows takes each KV head's queries over blocks of rows together (a key's row fetched
// once for all of them) when that leaves every thread work, and one (row, query head) at a time
// otherwise; both must give the same bits. One row at a time on a pool of 8 threads takes the
// second way, every row at once on 2 threads the first: group sizes 1, 3 and 4, f32, f16 and
// bf16 caches, lengths out of order (0 included), values through an index.
TEST_P(cpu_kernels, attention_over_blocks_of_rows_equals_one_query_at_a_time_bitwise) {
  sa::cpu::thread_pool two(2), eight(8);
  sa::cpu::scratch_t s2(2), s8(8);
  struct shape {
    int32_t n_heads, n_kv, hd;
  };
  for (const shape sh : {shape{2, 2, 36}, shape{6, 2, 64}, shape{8, 2, 40}}) {
    for (dtype type : {dtype::f32, dtype::f16, dtype::bf16}) {
      for (bool indexed : {false, true}) {
        const int64_t cap = 77, n = 9;
        const int32_t hd = sh.hd;
        const std::vector<float> q = sa_test::random_normal(static_cast<size_t>(n * sh.n_heads * hd), 11);
        const size_t rb = static_cast<size_t>(sa::row_bytes(type, hd));
        std::vector<uint8_t> kb(rb * static_cast<size_t>(sh.n_kv * cap)), vb(kb.size());
        const std::vector<float> k = sa_test::random_normal(static_cast<size_t>(sh.n_kv * cap * hd), 12);
        const std::vector<float> v = sa_test::random_normal(static_cast<size_t>(sh.n_kv * cap * hd), 13);
        for (int64_t r = 0; r < sh.n_kv * cap; ++r) {
          sa::cpu::store_row(type, k.data() + r * hd, kb.data() + static_cast<size_t>(r) * rb, hd);
          sa::cpu::store_row(type, v.data() + r * hd, vb.data() + static_cast<size_t>(r) * rb, hd);
        }
        const sa::cpu::kv_rows kr{kb.data(), type, hd}, vr{vb.data(), type, hd};
        std::vector<int32_t> v_rows(static_cast<size_t>(cap));
        for (int64_t t = 0; t < cap; ++t) v_rows[static_cast<size_t>(t)] = static_cast<int32_t>((t * 31 + 5) % cap);
        const int32_t* vi = indexed ? v_rows.data() : nullptr;
        const std::vector<int32_t> len = {77, 5, 0, 33, 34, 3, 1, 76, 18};
        const size_t per_row = static_cast<size_t>(sh.n_heads * hd);
        std::vector<float> out(n * per_row), lse(static_cast<size_t>(n * sh.n_heads));
        std::vector<float> one_out = out, one_lse = lse;
        with_set(GetParam(), [&] {
          sa::cpu::attention_rows(two, s2, q.data(), n, sh.n_heads, sh.n_kv, hd, kr, cap, vr, cap, vi, len, 0.13f,
                                  out.data(), lse.data(), nullptr, nullptr, 0);
          for (int64_t i = 0; i < n; ++i)
            sa::cpu::attention_rows(eight, s8, q.data() + i * per_row, 1, sh.n_heads, sh.n_kv, hd, kr, cap, vr, cap,
                                    vi, std::span<const int32_t>(len.data() + i, 1), 0.13f,
                                    one_out.data() + i * per_row, one_lse.data() + i * sh.n_heads, nullptr, nullptr, 0);
        });
        EXPECT_TRUE(same_bits(one_out, out)) << sa::traits(type).name << " heads " << sh.n_heads << "/" << sh.n_kv
                                             << (indexed ? " indexed" : "");
        EXPECT_TRUE(same_bits(one_lse, lse));
      }
    }
  }
}

// The softmax's exponential: the set's exp_shifted against the reference's bit for bit, over a
// sweep through every branch (underflow, the polynomial, overflow) and the special values; and the
// reference itself within 2 ulp of e^x (double) where the result is a normal float.
TEST_P(cpu_kernels, softmax_exponentials_equal_the_reference_bitwise) {
  std::vector<float> x;
  for (float v = -100.0f; v < 100.0f; v += 0.0371f) x.push_back(v);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {-inf, inf, std::numeric_limits<float>::quiet_NaN(), -0.0f, 0.0f, -87.3f, -87.29f, 88.3f, 88.31f,
                  1e-30f, -1e-30f, -0.34657359f, 0.34657359f, -86.5f})
    x.push_back(v);
  const sa::cpu::kernels* k = nullptr;
  with_set(GetParam(), [&] { k = &sa::cpu::active_kernels(); });
  for (float m : {0.0f, 3.5f, -2.25f}) {
    std::vector<float> want = x, got = x;
    const float want_sum = sa::cpu::exp_shifted(want.data(), static_cast<int64_t>(want.size()), m);
    const float got_sum = k->exp_shifted(got.data(), static_cast<int64_t>(got.size()), m);
    if (std::isnan(want_sum))
      EXPECT_TRUE(std::isnan(got_sum)) << "m " << m;
    else
      EXPECT_EQ(std::memcmp(&want_sum, &got_sum, sizeof(float)), 0) << "m " << m << ": " << want_sum << " vs " << got_sum;
    // Sums of ordinary values, every length to 40 (the tails of 16 partial sums).
    const std::vector<float> finite = sa_test::random_normal(40, 3);
    for (int64_t len = 0; len <= 40; ++len) {
      std::vector<float> w = finite, g = finite;
      const float ws = sa::cpu::exp_shifted(w.data(), len, m), gs = k->exp_shifted(g.data(), len, m);
      ASSERT_EQ(std::memcmp(&ws, &gs, sizeof(float)), 0) << "length " << len << " m " << m;
    }
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << "x " << x[i] << " m " << m;
        continue;
      }
      ASSERT_EQ(std::memcmp(&want[i], &got[i], sizeof(float)), 0)
          << "x " << x[i] << " m " << m << ": " << want[i] << " vs " << got[i];
    }
  }
  for (float v : x) {
    const float e = sa::cpu::softmax_exp(v);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(e));
    } else if (v <= -87.3f) {
      EXPECT_EQ(e, 0.0f) << v;
    } else if (v > 88.3f) {
      EXPECT_EQ(e, inf) << v;
    } else {
      const double want = std::exp(static_cast<double>(v));
      if (want < static_cast<double>(std::numeric_limits<float>::min())) continue;  // subnormal results
      EXPECT_LE(std::fabs(static_cast<double>(e) - want), 2.0 * std::ldexp(want, -23)) << v;
    }
  }
}

TEST_P(cpu_kernels, greedy_decodes_of_the_shipped_models_are_the_references_bits) {
  if (int8_set(GetParam())) GTEST_SKIP() << "an int8 set's products are not the reference's: cpu_int8_kernels compares its decodes";
  for (const char* file : {"sa-default-q8_0.gguf", "sa-default-f16.gguf"}) {
    const auto m = sa::model::load(sa_test::models_dir() + "/" + file, true);
    auto decode = [&](std::vector<int32_t>& tokens, std::vector<float>& logits) {
      sa::session_config c;
      c.n_threads = 2;
      sa::session s(m, c);
      const std::vector<int32_t> prompt = sa_test::token_stream(48, 11);
      s.prefill(prompt, nullptr);
      for (int i = 0; i < 16; ++i) {
        const std::vector<float>& l = s.logits();
        logits.insert(logits.end(), l.begin(), l.end());
        const int32_t t = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
        tokens.push_back(t);
        s.decode(t);
      }
    };
    std::vector<int32_t> want_t, got_t;
    std::vector<float> want_l, got_l;
    with_set(kernel_set::reference, [&] { decode(want_t, want_l); });
    with_set(GetParam(), [&] { decode(got_t, got_l); });
    EXPECT_EQ(want_t, got_t) << file;
    EXPECT_TRUE(same_bits(want_l, got_l)) << file << ": logits over a 48-token prompt and 16 steps";
  }
}

// ---- The opt-in int8 sets ----------------------------------------------------------------------

class cpu_int8_kernels : public cpu_kernels {};

INSTANTIATE_TEST_SUITE_P(sets, cpu_int8_kernels,
                         ::testing::Values(kernel_set::avx2_int8, kernel_set::avx512_vnni, kernel_set::neon_dotprod,
                                           kernel_set::avx512_amx),
                         set_name);

constexpr dtype k_int8_types[] = {dtype::q8_0, dtype::q4_0, dtype::q4_k, dtype::q6_k};

// An input row quantized for `type`, its storage owned.
struct quantized_input {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int16_t> sums;
  std::vector<uint8_t> u;
  quantized_input(dtype type, const std::vector<float>& x) {
    const int64_t n = static_cast<int64_t>(x.size()), block = sa::cpu::q8_block(type);
    q.resize(x.size());
    d.resize(static_cast<size_t>(n / block));
    sums.resize(static_cast<size_t>(n / 16));
    u.resize(x.size());
    sa::cpu::quantize_q8_row(x.data(), n, block, q.data(), d.data(), sums.data());
    sa::cpu::bias_q8_row(q.data(), n, u.data());
  }
  // With the biased levels (q8_row::u) or without: kernels take either.
  sa::cpu::q8_row row(bool biased = false) const {
    return {q.data(), d.data(), sums.data(), biased ? u.data() : nullptr};
  }
};

// Inputs with the awkward cases in them: a block of zeros, an outlier, a block of one value.
std::vector<float> awkward_input(int64_t n, uint64_t seed) {
  std::vector<float> x = sa_test::random_normal(static_cast<size_t>(n), seed);
  for (int64_t i = 0; i < std::min<int64_t>(n, 32); ++i) x[static_cast<size_t>(i)] = 0.0f;
  if (n > 64) x[static_cast<size_t>(n / 2 + 3)] = 40.0f;
  if (n >= 128)
    for (int64_t i = 96; i < 128; ++i) x[static_cast<size_t>(i)] = -1.5f;
  return x;
}

TEST(cpu_int8_quantizer, levels_scales_and_sums_are_the_stated_ones) {
  for (int64_t block : {32, 256}) {
    const int64_t n = 3 * 256;
    const std::vector<float> x = awkward_input(n, 9);
    std::vector<int8_t> q(static_cast<size_t>(n));
    std::vector<float> d(static_cast<size_t>(n / block));
    std::vector<int16_t> sums(static_cast<size_t>(n / 16));
    sa::cpu::quantize_q8_row(x.data(), n, block, q.data(), d.data(), sums.data());
    for (int64_t b = 0; b < n / block; ++b) {
      float amax = 0;
      for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(b * block + i)]));
      ASSERT_EQ(d[static_cast<size_t>(b)], amax / 127.0f);
      for (int64_t i = 0; i < block; ++i) {
        const size_t at = static_cast<size_t>(b * block + i);
        ASSERT_GE(q[at], -127);
        // within half a step of the input, and the nearest level
        ASSERT_LE(std::fabs(d[static_cast<size_t>(b)] * q[at] - x[at]), 0.5001f * d[static_cast<size_t>(b)] + 1e-30f);
        if (amax == 0.0f) {
          ASSERT_EQ(q[at], 0);
        }
      }
    }
    if (block == 256)
      for (int64_t k = 0; k < n / 16; ++k) {
        int s = 0;
        for (int64_t i = 0; i < 16; ++i) s += q[static_cast<size_t>(16 * k + i)];
        ASSERT_EQ(sums[static_cast<size_t>(k)], s);
      }
  }
}

// An int8 set's quantizer against quantize_q8_row bit for bit: random rows with the awkward
// blocks, special values (NaN, infinities, -0, tiny and huge values) and both block sizes.
TEST_P(cpu_int8_kernels, the_sets_quantizer_equals_the_reference_bitwise) {
  const sa::cpu::kernels* k = nullptr;
  with_set(GetParam(), [&] { k = &sa::cpu::active_kernels(); });
  ASSERT_NE(k->quantize_q8, nullptr);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t block : {32, 256}) {
    for (uint64_t seed = 0; seed < 20; ++seed) {
      const int64_t n = 4 * 256;
      std::vector<float> x = awkward_input(n, 100 + seed);
      for (float& v : x) v *= seed % 3 == 0 ? 1e-30f : seed % 3 == 1 ? 1.0f : 1e30f;
      if (seed == 5) x[300] = nan;
      if (seed == 6) x[301] = inf, x[600] = -inf;
      if (seed == 7) x[40] = -0.0f, x[41] = 1e-38f, x[42] = -3.4e38f;
      std::vector<int8_t> wq(static_cast<size_t>(n)), gq(wq.size());
      std::vector<float> wd(static_cast<size_t>(n / block)), gd(wd.size());
      std::vector<int16_t> ws(static_cast<size_t>(n / 16)), gs(ws.size());
      sa::cpu::quantize_q8_row(x.data(), n, block, wq.data(), wd.data(), ws.data());
      k->quantize_q8(x.data(), n, block, gq.data(), gd.data(), gs.data());
      EXPECT_EQ(wq, gq) << "block " << block << " seed " << seed;
      EXPECT_EQ(std::memcmp(wd.data(), gd.data(), wd.size() * sizeof(float)), 0) << "block " << block << " seed " << seed;
      if (block == 256) {
        EXPECT_EQ(ws, gs) << "seed " << seed;
      }
    }
  }
}

TEST(cpu_int8_quantizer, zeros_stay_zero_in_a_block_of_tiny_values) {
  std::vector<float> x(32, 0.0f);
  x[3] = 1e-38f;  // 127 / 1e-38 overflows a float
  x[7] = -2e-38f;
  std::vector<int8_t> q(32);
  float d = 0;
  sa::cpu::quantize_q8_row(x.data(), 32, 32, q.data(), &d, nullptr);
  for (int i = 0; i < 32; ++i) {
    if (i != 3 && i != 7) {
      EXPECT_EQ(q[static_cast<size_t>(i)], 0) << i;
    }
  }
  EXPECT_LE(q[7], 0);
}

// The scalar oracle against plain integer arithmetic on the dequantized weights: with the
// weights' own levels the sums are exact, so the oracle is within float rounding of
// sum_i w_i * d * q_i.
TEST(cpu_int8_quantizer, the_oracle_is_the_dot_product_of_the_quantized_input) {
  for (dtype type : k_int8_types) {
    const int64_t n = 3 * 256;
    const size_t row = static_cast<size_t>(sa::row_bytes(type, n));
    std::vector<uint8_t> w(row);
    const std::vector<float> wf = sa_test::random_normal(static_cast<size_t>(n), 21, 0.5f);
    sa::quantize_row(type, wf.data(), w.data(), n);
    std::vector<float> wd(static_cast<size_t>(n));
    sa::dequantize_row(type, w.data(), wd.data(), n);
    const std::vector<float> x = awkward_input(n, 22);
    const quantized_input xq(type, x);
    const int64_t block = sa::cpu::q8_block(type);
    double want = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double xi = static_cast<double>(xq.d[static_cast<size_t>(i / block)]) * xq.q[static_cast<size_t>(i)];
      want += static_cast<double>(wd[static_cast<size_t>(i)]) * xi;
      mag += std::fabs(static_cast<double>(wd[static_cast<size_t>(i)]) * xi);
    }
    float got = 0;
    const sa::cpu::q8_row xr = xq.row();
    sa::cpu::dot_q8_scalar(type, w.data(), row, 1, &xr, 1, n, &got);
    EXPECT_NEAR(got, want, 1e-5 * mag + 1e-6) << sa::traits(type).name;
  }
}

TEST_P(cpu_int8_kernels, integer_products_equal_the_scalar_oracle_bitwise) {
  const auto dot = [&] {
    const sa::cpu::kernels* k = nullptr;
    with_set(GetParam(), [&] { k = &sa::cpu::active_kernels(); });
    return k->dot_q8;
  }();
  ASSERT_NE(dot, nullptr);
  for (dtype type : k_int8_types) {
    const int64_t block = sa::cpu::q8_block(type);
    for (int64_t blocks : {1, 2, 3, 7, 9, 33})
      for (int64_t rows = 1; rows <= 4; ++rows)
        for (int64_t nx : {1, 2, 3, 4, 5, 9}) {  // above 4: a prefill's inputs in one call
          const int64_t n = blocks * block;
          const size_t row = static_cast<size_t>(sa::row_bytes(type, n));
          std::vector<uint8_t> w(row * static_cast<size_t>(rows) + 1);  // + 1: rows start unaligned
          const std::vector<float> wf =
              sa_test::random_normal(static_cast<size_t>(rows * n), static_cast<uint64_t>(100 + nx), 0.5f);
          for (int64_t r = 0; r < rows; ++r)
            sa::quantize_row(type, wf.data() + r * n, w.data() + 1 + static_cast<size_t>(r) * row, n);
          std::vector<quantized_input> xq;
          std::vector<sa::cpu::q8_row> xr;
          for (int64_t i = 0; i < nx; ++i) xq.emplace_back(type, awkward_input(n, static_cast<uint64_t>(200 + 4 * nx + i)));
          for (const bool biased : {false, true}) {
            xr.clear();
            for (const quantized_input& q : xq) xr.push_back(q.row(biased));
            std::vector<float> want(static_cast<size_t>(4 * nx)), got(want.size());
            sa::cpu::dot_q8_scalar(type, w.data() + 1, row, rows, xr.data(), nx, n, want.data());
            dot(type, w.data() + 1, row, rows, xr.data(), nx, n, got.data());
            for (int64_t i = 0; i < nx; ++i)
              for (int64_t r = 0; r < rows; ++r)
                ASSERT_EQ(std::memcmp(&want[i * 4 + r], &got[i * 4 + r], sizeof(float)), 0)
                    << sa::traits(type).name << " n_in " << n << ", " << rows << " rows x " << nx << " inputs, at ("
                    << i << ", " << r << "), biased inputs " << biased << ": " << want[i * 4 + r] << " vs "
                    << got[i * 4 + r];
          }
        }
  }
}

// Bytes drawn at random are weight blocks too (any level, any scale short of inf/NaN): the
// extremes of every field (Q8_0 levels of -128, Q6_K scales of -128) must not overflow a lane.
TEST_P(cpu_int8_kernels, integer_products_of_random_blocks_equal_the_scalar_oracle_bitwise) {
  const sa::cpu::kernels* k = nullptr;
  with_set(GetParam(), [&] { k = &sa::cpu::active_kernels(); });
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint8_t>(state >> 56);
  };
  for (dtype type : k_int8_types) {
    const int64_t n = 5 * sa::cpu::q8_block(type);
    const size_t row = static_cast<size_t>(sa::row_bytes(type, n));
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<uint8_t> w(4 * row);
      for (uint8_t& b : w) b = next();
      // f16 scales with a small exponent, so that no product is inf or NaN
      const size_t bytes = static_cast<size_t>(sa::traits(type).block_bytes);
      const size_t scale_at = type == dtype::q6_k ? 208 : 0;
      const int scales = type == dtype::q4_k ? 2 : 1;
      for (size_t b = scale_at; b + 2 <= w.size(); b += bytes)
        for (size_t s = 0; s < static_cast<size_t>(scales); ++s) w[b + 2 * s + 1] = static_cast<uint8_t>(w[b + 2 * s + 1] & 0x93);
      std::vector<float> x = awkward_input(n, 300 + static_cast<uint64_t>(rep));
      for (int64_t i = 0; i < n; i += 7) x[static_cast<size_t>(i)] = i % 2 ? 9.0f : -9.0f;  // levels of +-127
      const quantized_input xq(type, x);
      for (const bool biased : {false, true}) {
        const sa::cpu::q8_row xr[4] = {xq.row(biased), xq.row(biased), xq.row(biased), xq.row(biased)};
        float want[16], got[16];
        sa::cpu::dot_q8_scalar(type, w.data(), row, 4, xr, 4, n, want);
        k->dot_q8(type, w.data(), row, 4, xr, 4, n, got);
        ASSERT_EQ(std::memcmp(want, got, sizeof want), 0) << sa::traits(type).name << " rep " << rep << ", biased " << biased;
      }
      // A set's 16-row kernel (rows in its lanes) on 16 such rows (13 of them on odd reps: the
      // other lanes empty) against 21 inputs, where it takes the type: one buffer of inputs, as
      // a product's (avx512-amx takes 16 evenly spaced ones as a tile, the other 5 in lanes).
      if (k->dot_q8_rows16 == nullptr) continue;
      const int64_t rows = rep % 2 ? 13 : 16, nx = 21, block = sa::cpu::q8_block(type);
      std::vector<uint8_t> w16(static_cast<size_t>(rows) * row);
      for (size_t b = 0; b < w16.size(); ++b) w16[b] = w[b % w.size()] ^ next();
      for (size_t b = scale_at; b + 2 <= w16.size(); b += bytes)
        for (size_t s = 0; s < static_cast<size_t>(scales); ++s) w16[b + 2 * s + 1] = static_cast<uint8_t>(w16[b + 2 * s + 1] & 0x93);
      const sa_test::int8_inputs in(nx, n, block, [&](int64_t i) {
        std::vector<float> xi = awkward_input(n, 500 + static_cast<uint64_t>(rep * nx + i));
        for (int64_t e = i; e < n; e += 5) xi[static_cast<size_t>(e)] = e % 2 ? 9.0f : -9.0f;
        return xi;
      });
      const std::vector<sa::cpu::q8_row>& xr = in.rows;
      std::vector<float> got(static_cast<size_t>(nx * 16));
      // every int8 type has a tile layout, and these inputs (21, biased) are ones a tile takes
      ASSERT_TRUE(k->dot_q8_rows16(type, w16.data(), row, rows, xr.data(), nx, n, got.data()))
          << sa::traits(type).name << ": the 16-row kernel declined";
      for (int64_t r0 = 0; r0 < rows; r0 += 4) {
        const int64_t nr = std::min<int64_t>(4, rows - r0);
        std::vector<float> want(static_cast<size_t>(4 * nx));
        sa::cpu::dot_q8_scalar(type, w16.data() + static_cast<size_t>(r0) * row, row, nr, xr.data(), nx, n, want.data());
        for (int64_t i = 0; i < nx; ++i)
          for (int64_t r = 0; r < nr; ++r)
            ASSERT_EQ(std::memcmp(&want[static_cast<size_t>(i * 4 + r)], &got[static_cast<size_t>(i * 16 + r0 + r)], sizeof(float)), 0)
                << sa::traits(type).name << " rep " << rep << ", 16-row kernel, row " << r0 + r << " input " << i;
      }
    }
  }
}

// Matrix products through matmul_rows: the int8 set's rows are the oracle's on the quantized
// input rows (decode and prefill shapes, threads splitting the rows), types without integer
// products keep the reference's bits, and every result is within the input's quantization
// error of the reference: |got - want| <= 1.01 * sum over blocks of d_b / 2 * sum |w_i| (each
// input moves by at most half a step) + 1e-4 * sum |w_i x_i| (float rounding of both sides).
// 70 rows against 150 outputs: a prefill's shape, many 4-row tiles on each of three threads, and
// (10 runs of 16 outputs not splitting evenly over 3) the input rows in two chunks of 48 and 22.
TEST_P(cpu_int8_kernels, matrix_products_are_the_oracles_and_near_the_reference) {
  sa::cpu::thread_pool pool(3);
  sa::cpu::scratch_t scratch(3);
  double worst = 0;  // largest error seen / its bound
  const dtype types[] = {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0, dtype::q4_k, dtype::q6_k};
  for (dtype type : types) {
    const int64_t block = sa::cpu::q8_block(type);
    for (int64_t n_in : {256, 768})
      for (int64_t n : {1, 2, 4, 5, 9, 70}) {
        const int64_t n_out = n > 9 ? 150 : 13;
        const size_t row = static_cast<size_t>(sa::row_bytes(type, n_in));
        const size_t at = weight_offset(type);
        const std::vector<uint8_t> w = misaligned_weights(type, n_in, n_out);
        std::vector<float> x;
        for (int64_t i = 0; i < n; ++i) {
          const std::vector<float> xi = awkward_input(n_in, 40 + static_cast<uint64_t>(i));
          x.insert(x.end(), xi.begin(), xi.end());
        }
        std::vector<float> want(static_cast<size_t>(n * n_out)), got(want.size());
        with_set(kernel_set::reference, [&] {
          sa::cpu::matmul_rows(pool, scratch, type, w.data() + at, row, n_out, n_in, x.data(), n, want.data(), false);
        });
        with_set(GetParam(), [&] {
          sa::cpu::matmul_rows(pool, scratch, type, w.data() + at, row, n_out, n_in, x.data(), n, got.data(), false);
        });
        if (block == 0) {
          EXPECT_TRUE(same_bits(want, got)) << sa::traits(type).name << " n_in " << n_in << " rows " << n;
          continue;
        }
        std::vector<float> wd(static_cast<size_t>(n_in));
        for (int64_t i = 0; i < n; ++i) {
          const std::vector<float> xi(x.begin() + i * n_in, x.begin() + (i + 1) * n_in);
          const quantized_input xq(type, xi);
          for (int64_t o = 0; o < n_out; ++o) {
            const uint8_t* wr = w.data() + at + static_cast<size_t>(o) * row;
            float oracle = 0;
            const sa::cpu::q8_row xr = xq.row();
            sa::cpu::dot_q8_scalar(type, wr, row, 1, &xr, 1, n_in, &oracle);
            const float g = got[static_cast<size_t>(i * n_out + o)];
            ASSERT_EQ(std::memcmp(&oracle, &g, sizeof g), 0)
                << sa::traits(type).name << " n_in " << n_in << " rows " << n << " at " << i << ", " << o;
            sa::dequantize_row(type, wr, wd.data(), n_in);
            double bound = 0, mag = 0;
            for (int64_t b = 0; b < n_in / block; ++b) {
              double wsum = 0;
              for (int64_t e = b * block; e < (b + 1) * block; ++e) {
                wsum += std::fabs(wd[static_cast<size_t>(e)]);
                mag += std::fabs(static_cast<double>(wd[static_cast<size_t>(e)]) * xi[static_cast<size_t>(e)]);
              }
              bound += 0.5 * xq.d[static_cast<size_t>(b)] * wsum;
            }
            bound = 1.01 * bound + 1e-4 * mag;
            const double err = std::fabs(static_cast<double>(g) - want[static_cast<size_t>(i * n_out + o)]);
            worst = std::max(worst, err / bound);
            ASSERT_LE(err, bound) << sa::traits(type).name << " n_in " << n_in << " rows " << n << " at " << i
                                  << ", " << o;
          }
        }
      }
  }
  std::printf("[ info     ] %s: largest error / bound %.3f\n", sa::cpu::kernel_set_name(GetParam()), worst);
}

// Greedy decoding of the shipped models: the int8 set's token against the reference's at each of
// 16 steps, with the reference's tokens fed to both (so one early disagreement does not decide the
// rest). Models without integer-product weights (F16) must give the reference's bits.
TEST_P(cpu_int8_kernels, greedy_decodes_of_the_shipped_models_mostly_agree_with_the_reference) {
  for (const char* file : {"sa-default-q8_0.gguf", "sa-default-f16.gguf"}) {
    const auto m = sa::model::load(sa_test::models_dir() + "/" + file, true);
    // tokens: the argmax at each step; when `forced` is set, its tokens are fed instead
    auto decode = [&](const std::vector<int32_t>* forced, std::vector<int32_t>& tokens, std::vector<float>& logits) {
      sa::session_config c;
      c.n_threads = 2;
      sa::session s(m, c);
      s.prefill(sa_test::token_stream(48, 11), nullptr);
      for (size_t i = 0; i < 16; ++i) {
        const std::vector<float>& l = s.logits();
        logits.insert(logits.end(), l.begin(), l.end());
        const int32_t t = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
        tokens.push_back(t);
        s.decode(forced != nullptr ? (*forced)[i] : t);
      }
    };
    std::vector<int32_t> want_t, got_t, free_t;
    std::vector<float> want_l, got_l, free_l;
    with_set(kernel_set::reference, [&] { decode(nullptr, want_t, want_l); });
    with_set(GetParam(), [&] {
      decode(&want_t, got_t, got_l);
      decode(nullptr, free_t, free_l);
    });
    int agree = 0, same_prefix = 0;
    for (size_t i = 0; i < want_t.size(); ++i) agree += want_t[i] == got_t[i];
    while (same_prefix < 16 && want_t[static_cast<size_t>(same_prefix)] == free_t[static_cast<size_t>(same_prefix)])
      ++same_prefix;
    std::printf("[ info     ] %s, %s: %d of 16 steps pick the reference's token; free-running, the first %d agree\n",
                sa::cpu::kernel_set_name(GetParam()), file, agree, same_prefix);
    if (std::string(file).find("f16") != std::string::npos) {
      EXPECT_EQ(want_t, free_t) << file;
      EXPECT_TRUE(same_bits(want_l, free_l)) << file;
    } else {
      EXPECT_GE(agree, 12) << file;
      EXPECT_FALSE(same_bits(want_l, got_l)) << file << ": the integer products did not run";
      float worst = 0, top = 0;
      for (size_t i = 0; i < want_l.size(); ++i) {
        worst = std::max(worst, std::fabs(want_l[i] - got_l[i]));
        top = std::max(top, std::fabs(want_l[i]));
      }
      std::printf("[ info     ] largest logit difference %.4f (largest logit %.2f)\n", worst, top);
    }
  }
}

TEST(cpu_kernel_sets, the_reference_is_always_there_and_names_are_stable) {
  EXPECT_TRUE(sa::cpu::kernel_set_supported(kernel_set::reference));
  EXPECT_STREQ(sa::cpu::kernel_set_name(kernel_set::reference), "reference");
  EXPECT_STREQ(sa::cpu::kernel_set_name(kernel_set::avx2), "avx2");
  EXPECT_STREQ(sa::cpu::kernel_set_name(kernel_set::avx2_int8), "avx2-int8");
  EXPECT_STREQ(sa::cpu::kernel_set_name(kernel_set::avx512_vnni), "avx512-vnni");
  EXPECT_STREQ(sa::cpu::kernel_set_name(kernel_set::neon), "neon");
  EXPECT_STREQ(sa::cpu::kernel_set_name(kernel_set::neon_dotprod), "neon-dotprod");
  const kernel_set was = sa::cpu::active_kernel_set();
  EXPECT_TRUE(sa::cpu::use_kernel_set(kernel_set::reference));
  EXPECT_EQ(sa::cpu::active_kernel_set(), kernel_set::reference);
  EXPECT_TRUE(sa::cpu::use_kernel_set(was));
  // The int8 sets change results, so they are never the one chosen without a name.
  if (std::getenv("SA_CPU_KERNELS") == nullptr) {
    EXPECT_NE(was, kernel_set::avx2_int8);
    EXPECT_NE(was, kernel_set::avx512_vnni);
    EXPECT_NE(was, kernel_set::neon_dotprod);
  }
  // NEON is there on every AArch64 CPU (and chosen by default), and on no other.
#if defined(__aarch64__)
  EXPECT_TRUE(sa::cpu::kernel_set_supported(kernel_set::neon));
  if (std::getenv("SA_CPU_KERNELS") == nullptr) {
    EXPECT_EQ(was, kernel_set::neon);
  }
#else
  EXPECT_FALSE(sa::cpu::kernel_set_supported(kernel_set::neon));
  EXPECT_FALSE(sa::cpu::kernel_set_supported(kernel_set::neon_dotprod));
#endif
}

}  // namespace

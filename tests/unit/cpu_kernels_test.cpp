// The CPU backend's SIMD kernel sets against the reference set, bit for bit: matrix products of
// every weight type (decode rows, fused, and prefill rows, tiled; unaligned rows, lengths that are
// not a multiple of 8 or of 4 rows), dot products, attention, and whole greedy decodes of the
// shipped model. A set this CPU cannot run reports as skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/kernel_set.h"
#include "backend/cpu/ops.h"
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

std::string set_name(const ::testing::TestParamInfo<kernel_set>& p) { return sa::cpu::kernel_set_name(p.param); }

INSTANTIATE_TEST_SUITE_P(sets, cpu_kernels, ::testing::Values(kernel_set::avx2), set_name);

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
        for (int64_t nx = 1; nx <= 2; ++nx) {
          const std::vector<float> w = sa_test::random_normal(static_cast<size_t>(rows * n), static_cast<uint64_t>(n + rows));
          const std::vector<float> x = sa_test::random_normal(static_cast<size_t>(nx * n), static_cast<uint64_t>(7 * n + nx));
          float got[8];
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

TEST_P(cpu_kernels, matrix_products_of_every_type_equal_the_reference_bitwise) {
  sa::cpu::thread_pool pool(2);
  sa::cpu::scratch_t scratch(2);
  const dtype types[] = {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0, dtype::q4_k, dtype::q6_k};
  for (dtype type : types) {
    const int64_t block = sa::traits(type).block_elems;
    // n_in: a multiple of the block; plain floats also get lengths that are not a multiple of 8.
    std::vector<int64_t> lengths = {block == 1 ? 64 : 256, 512};
    if (block == 1) lengths.insert(lengths.end(), {13, 100});
    for (int64_t n_in : lengths)
      for (int64_t n : {1, 2, 4, 5, 9}) {  // <= 4: the fused decode kernels; more: tiles
        const int64_t n_out = 13;            // not a multiple of the 4-row groups
        const size_t row = static_cast<size_t>(sa::row_bytes(type, n_in));
        // One byte of offset: no row or block is aligned (f32 rows, which the reference reads in
        // place, are as aligned as a model file keeps them).
        const size_t at = type == dtype::f32 ? 0 : 1;
        std::vector<uint8_t> w(row * static_cast<size_t>(n_out) + 1);
        const std::vector<float> wf = sa_test::random_normal(static_cast<size_t>(n_out * n_in), 3, 0.5f);
        for (int64_t o = 0; o < n_out; ++o)
          sa::quantize_row(type, wf.data() + o * n_in, w.data() + at + static_cast<size_t>(o) * row, n_in);
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

TEST_P(cpu_kernels, attention_equals_the_reference_bitwise) {
  sa::cpu::thread_pool pool(2);
  sa::cpu::scratch_t scratch(2);
  const int32_t n_heads = 4, n_kv = 2, hd = 36;  // a head_dim that is not a multiple of 8
  const int64_t cap = 70, n = 3;
  const std::vector<float> q = sa_test::random_normal(static_cast<size_t>(n * n_heads * hd), 5);
  const std::vector<float> k = sa_test::random_normal(static_cast<size_t>(n_kv * cap * hd), 6);
  const std::vector<float> v = sa_test::random_normal(static_cast<size_t>(n_kv * cap * hd), 7);
  const sa::cpu::kv_rows kr{reinterpret_cast<const uint8_t*>(k.data()), dtype::f32, hd};
  const sa::cpu::kv_rows vr{reinterpret_cast<const uint8_t*>(v.data()), dtype::f32, hd};
  const std::vector<int32_t> len = {70, 41, 1};
  auto run = [&](std::vector<float>& out, std::vector<float>& lse) {
    out.assign(static_cast<size_t>(n * n_heads * hd), 0.0f);
    lse.assign(static_cast<size_t>(n * n_heads), 0.0f);
    sa::cpu::attention_rows(pool, scratch, q.data(), n, n_heads, n_kv, hd, kr, cap, vr, cap, nullptr, len,
                            0.17f, out.data(), lse.data(), nullptr, nullptr, 0);
  };
  std::vector<float> want_out, want_lse, got_out, got_lse;
  with_set(kernel_set::reference, [&] { run(want_out, want_lse); });
  with_set(GetParam(), [&] { run(got_out, got_lse); });
  EXPECT_TRUE(same_bits(want_out, got_out));
  EXPECT_TRUE(same_bits(want_lse, got_lse));
}

TEST_P(cpu_kernels, greedy_decodes_of_the_shipped_models_are_the_references_bits) {
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

TEST(cpu_kernel_sets, the_reference_is_always_there_and_names_are_stable) {
  EXPECT_TRUE(sa::cpu::kernel_set_supported(kernel_set::reference));
  EXPECT_STREQ(sa::cpu::kernel_set_name(kernel_set::reference), "reference");
  EXPECT_STREQ(sa::cpu::kernel_set_name(kernel_set::avx2), "avx2");
  const kernel_set was = sa::cpu::active_kernel_set();
  EXPECT_TRUE(sa::cpu::use_kernel_set(kernel_set::reference));
  EXPECT_EQ(sa::cpu::active_kernel_set(), kernel_set::reference);
  EXPECT_TRUE(sa::cpu::use_kernel_set(was));
}

}  // namespace

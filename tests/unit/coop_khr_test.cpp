// The rewrite of NVIDIA cooperative-matrix SPIR-V into the Khronos extension's
// (sdk/backend/vulkan/coop_khr.*): on hand-assembled modules whose rewritten words are worked out
// here, on modules it must refuse, and on every embedded shader that uses NVIDIA's matrices
// (checked against the shader's own NVIDIA form: the same products, loads and stores, each
// multiply-add's operands of the Khronos uses A, B and accumulator, shapes that chain).
// The rewritten shaders run on a GPU in the Vulkan parity suite (SA_VULKAN_COOP=khr).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#ifdef SA_WITH_VULKAN
#include "backend/vulkan/coop_khr.h"
#include "sa_shaders.h"

namespace {

using sa::vk::coop_nv_to_khr;

// SPIR-V words, built instruction by instruction.
struct module_words {
  std::vector<uint32_t> w{0x07230203u, 0x00010500u, 0u, 0u, 0u};
  void op(uint32_t opcode, std::vector<uint32_t> operands) {
    w.push_back(static_cast<uint32_t>((operands.size() + 1) << 16) | opcode);
    w.insert(w.end(), operands.begin(), operands.end());
  }
};

enum : uint32_t {
  Capability = 17, TypeVoid = 19, TypeBool = 20, TypeInt = 21, TypeFloat = 22, TypePointer = 32,
  TypeFunction = 33, ConstantFalse = 42, ConstantTrue = 41, Constant = 43, ConstantComposite = 44,
  Function = 54, FunctionEnd = 56, Variable = 59, Label = 248, Return = 253,
  TypeCoopNV = 5358, LoadNV = 5359, StoreNV = 5360, MulAddNV = 5361,
  TypeCoopKHR = 4456, LoadKHR = 4457, StoreKHR = 4458, MulAddKHR = 4459,
  CapShader = 1, CapCoopNV = 5357, CapCoopKHR = 6022, Workgroup = 4,
};

// A module with two f16 loads (row-major %a, column-major %b) multiplied into an f32 sum that is
// stored: ids 1..21. `b_is_a` feeds %a as both operands instead (two uses of one value).
module_words products_module(bool b_is_a) {
  module_words m;
  m.op(Capability, {CapShader});
  m.op(Capability, {CapCoopNV});
  m.op(TypeInt, {1, 32, 0});             // %1 uint
  m.op(Constant, {1, 2, 3});             // %2 subgroup scope
  m.op(Constant, {1, 3, 16});            // %3 16
  m.op(TypeFloat, {4, 16});              // %4 half
  m.op(TypeCoopNV, {5, 4, 2, 3, 3});     // %5 16 x 16 half
  m.op(TypeFloat, {6, 32});              // %6 float
  m.op(TypeCoopNV, {7, 6, 2, 3, 3});     // %7 16 x 16 float
  m.op(TypeBool, {8});                   // %8 bool
  m.op(ConstantFalse, {8, 9});           // %9
  m.op(ConstantTrue, {8, 10});           // %10
  m.op(TypePointer, {11, Workgroup, 4}); // %11 pointer to half
  m.op(TypePointer, {12, Workgroup, 6}); // %12 pointer to float
  m.op(Variable, {11, 13, Workgroup});   // %13 half tile
  m.op(Variable, {12, 14, Workgroup});   // %14 float tile
  m.op(Constant, {6, 15, 0});            // %15 0.0f
  m.op(ConstantComposite, {7, 16, 15});  // %16 zero sums
  m.op(TypeVoid, {17});
  m.op(TypeFunction, {18, 17});
  m.op(Function, {17, 19, 0, 18});
  m.op(Label, {20});
  m.op(LoadNV, {5, 21, 13, 3, 9});       // %21 = A, row major, stride 16
  m.op(LoadNV, {5, 22, 13, 3, 10});      // %22 = B, column major
  m.op(MulAddNV, {7, 23, 21, b_is_a ? 21u : 22u, 16});
  m.op(StoreNV, {14, 23, 3, 9});
  m.op(Return, {});
  m.op(FunctionEnd, {});
  m.w[3] = 24;
  return m;
}

TEST(coop_khr, a_small_module_becomes_its_khronos_twin_word_for_word) {
  const module_words nv = products_module(false);
  std::vector<uint32_t> out;
  std::string why;
  ASSERT_TRUE(coop_nv_to_khr(nv.w.data(), nv.w.size(), &out, &why)) << why;
  // Fresh ids from 24: the Khronos types (half A, half B, float accumulator), then the
  // constants 0, 1, 2 that name uses and layouts.
  const uint32_t halfA = 24, halfB = 25, floatC = 26, c0 = 27, c1 = 28, c2 = 29;
  module_words khr;
  khr.op(Capability, {CapShader});
  khr.op(Capability, {CapCoopKHR});
  khr.op(TypeInt, {1, 32, 0});
  khr.op(Constant, {1, c0, 0});
  khr.op(Constant, {1, c1, 1});
  khr.op(Constant, {1, c2, 2});
  khr.op(Constant, {1, 2, 3});
  khr.op(Constant, {1, 3, 16});
  khr.op(TypeFloat, {4, 16});
  khr.op(TypeCoopKHR, {halfA, 4, 2, 3, 3, c0});
  khr.op(TypeCoopKHR, {halfB, 4, 2, 3, 3, c1});
  khr.op(TypeFloat, {6, 32});
  khr.op(TypeCoopKHR, {floatC, 6, 2, 3, 3, c2});
  khr.op(TypeBool, {8});
  khr.op(ConstantFalse, {8, 9});
  khr.op(ConstantTrue, {8, 10});
  khr.op(TypePointer, {11, Workgroup, 4});
  khr.op(TypePointer, {12, Workgroup, 6});
  khr.op(Variable, {11, 13, Workgroup});
  khr.op(Variable, {12, 14, Workgroup});
  khr.op(Constant, {6, 15, 0});
  khr.op(ConstantComposite, {floatC, 16, 15});
  khr.op(TypeVoid, {17});
  khr.op(TypeFunction, {18, 17});
  khr.op(Function, {17, 19, 0, 18});
  khr.op(Label, {20});
  khr.op(LoadKHR, {halfA, 21, 13, c0, 3});
  khr.op(LoadKHR, {halfB, 22, 13, c1, 3});
  khr.op(MulAddKHR, {floatC, 23, 21, 22, 16});
  khr.op(StoreKHR, {14, 23, c0, 3});
  khr.op(Return, {});
  khr.op(FunctionEnd, {});
  khr.w[3] = 30;
  EXPECT_EQ(out, khr.w);
}

TEST(coop_khr, refuses_one_value_as_two_operands_and_malformed_modules) {
  std::vector<uint32_t> out;
  std::string why;
  const module_words both = products_module(true);
  EXPECT_FALSE(coop_nv_to_khr(both.w.data(), both.w.size(), &out, &why));
  EXPECT_NE(why.find("serves as A and as B"), std::string::npos) << why;

  module_words cut = products_module(false);
  cut.w.resize(cut.w.size() - 3);  // the store (the last but two) runs past the end
  why.clear();
  EXPECT_FALSE(coop_nv_to_khr(cut.w.data(), cut.w.size(), &out, &why));
  EXPECT_NE(why.find("malformed"), std::string::npos) << why;

  module_words short_load;  // a load without its stride and layout
  short_load.op(Capability, {CapCoopNV});
  short_load.op(LoadNV, {5, 21, 13});
  short_load.w[3] = 30;
  why.clear();
  EXPECT_FALSE(coop_nv_to_khr(short_load.w.data(), short_load.w.size(), &out, &why));
  EXPECT_NE(why.find("too short"), std::string::npos) << why;

  const uint32_t not_spirv[6] = {1, 2, 3, 4, 5, 6};
  why.clear();
  EXPECT_FALSE(coop_nv_to_khr(not_spirv, 6, &out, &why));
  EXPECT_NE(why.find("not a SPIR-V module"), std::string::npos) << why;
  EXPECT_FALSE(coop_nv_to_khr(nullptr, 0, &out, &why));
}

// What a module holds, read instruction by instruction.
struct reading {
  std::vector<std::vector<uint32_t>> ins;  // each instruction's words
  explicit reading(const std::vector<uint32_t>& w) {
    for (size_t at = 5; at < w.size();) {
      const uint32_t n = w[at] >> 16;
      EXPECT_GT(n, 0u);
      if (n == 0 || at + n > w.size()) break;
      ins.emplace_back(w.begin() + static_cast<long>(at), w.begin() + static_cast<long>(at + n));
      at += n;
    }
  }
  size_t count(uint32_t opcode) const {
    size_t c = 0;
    for (const auto& i : ins) c += (i[0] & 0xffffu) == opcode;
    return c;
  }
};

TEST(coop_khr, every_embedded_nvidia_matrix_shader_rewrites_to_matching_khronos_products) {
  size_t rewritten = 0;
  for (const sa::vk::shader_code& s : sa::vk::k_shaders) {
    SCOPED_TRACE(s.name);
    std::vector<uint32_t> out;
    std::string why;
    ASSERT_TRUE(coop_nv_to_khr(s.words, s.n_words, &out, &why)) << why;
    const std::vector<uint32_t> in(s.words, s.words + s.n_words);
    if (!sa::vk::uses_coop_nv(s.words, s.n_words)) {
      EXPECT_EQ(out, in);  // nothing to rewrite: copied as it is
      continue;
    }
    ++rewritten;
    const reading a(in), b(out);
    ASSERT_GT(out[3], in[3]);
    // The same products, loads and stores; no NVIDIA instruction left.
    EXPECT_GT(a.count(MulAddNV), 0u);
    EXPECT_EQ(b.count(MulAddKHR), a.count(MulAddNV));
    EXPECT_EQ(b.count(LoadKHR), a.count(LoadNV));
    EXPECT_EQ(b.count(StoreKHR), a.count(StoreNV));
    for (uint32_t op = 5358; op <= 5362; ++op) EXPECT_EQ(b.count(op), 0u) << op;
    // Every id defined once; each value's type and each Khronos type's shape and use known.
    std::map<uint32_t, uint32_t> type_of, constant;
    std::map<uint32_t, std::vector<uint32_t>> coop;  // id -> component, scope, rows, cols, use
    std::set<uint32_t> defined;
    bool khr_cap = false, nv_cap = false, khr_ext = false;
    for (const auto& i : b.ins) {
      const uint32_t op = i[0] & 0xffffu;
      if (op == Capability) khr_cap |= i[1] == CapCoopKHR, nv_cap |= i[1] == CapCoopNV;
      if (op == 10) khr_ext |= std::strcmp(reinterpret_cast<const char*>(&i[1]), "SPV_KHR_cooperative_matrix") == 0;
      if (op == Constant) constant[i[2]] = i[3];
      if (op == TypeCoopKHR) coop[i[1]] = {i[2], i[3], i[4], i[5], i[6]};
      if (op == TypeCoopKHR || op == TypePointer || op == 28) {
        EXPECT_TRUE(defined.insert(i[1]).second) << i[1];
      }
      if (op == Constant || op == ConstantComposite || op == Variable || op == LoadKHR || op == MulAddKHR ||
          op == 61 /* OpLoad */) {
        EXPECT_TRUE(defined.insert(i[2]).second) << i[2];
        type_of[i[2]] = i[1];
      }
    }
    EXPECT_TRUE(khr_cap);
    EXPECT_FALSE(nv_cap);
    EXPECT_TRUE(khr_ext);
    auto use_of = [&](uint32_t value) -> uint32_t {
      const auto t = coop.find(type_of[value]);
      return t == coop.end() ? 99u : constant[t->second[4]];
    };
    auto dim = [&](uint32_t value, int k) { return constant[coop[type_of[value]][static_cast<size_t>(2 + k)]]; };
    for (const auto& i : b.ins) {
      if ((i[0] & 0xffffu) != MulAddKHR) continue;
      EXPECT_EQ(use_of(i[3]), 0u);  // A
      EXPECT_EQ(use_of(i[4]), 1u);  // B
      EXPECT_EQ(use_of(i[5]), 2u);  // C
      EXPECT_EQ(constant[coop[i[1]][4]], 2u);  // the result
      EXPECT_EQ(dim(i[3], 0), dim(i[5], 0));   // A rows = C rows
      EXPECT_EQ(dim(i[4], 1), dim(i[5], 1));   // B cols = C cols
      EXPECT_EQ(dim(i[3], 1), dim(i[4], 0));   // A cols = B rows
    }
    // Loads and stores in order: the same pointers and strides, the layout of the bool.
    std::map<uint32_t, bool> bools;
    for (const auto& i : a.ins)
      if ((i[0] & 0xffffu) == ConstantTrue || (i[0] & 0xffffu) == ConstantFalse)
        bools[i[2]] = (i[0] & 0xffffu) == ConstantTrue;
    std::vector<std::vector<uint32_t>> nv_ls, khr_ls;
    for (const auto& i : a.ins)
      if ((i[0] & 0xffffu) == LoadNV) nv_ls.push_back({i[3], i[4], bools.at(i[5])});
      else if ((i[0] & 0xffffu) == StoreNV) nv_ls.push_back({i[1], i[3], bools.at(i[4])});
    for (const auto& i : b.ins)
      if ((i[0] & 0xffffu) == LoadKHR) khr_ls.push_back({i[3], i[5], constant.at(i[4])});
      else if ((i[0] & 0xffffu) == StoreKHR) khr_ls.push_back({i[1], i[4], constant.at(i[3])});
    EXPECT_EQ(khr_ls, nv_ls);
  }
  EXPECT_GE(rewritten, 6u);  // gemm_coop.comp's variants, one per weight type
}

}  // namespace

#else
TEST(coop_khr, needs_the_vulkan_backend) { GTEST_SKIP() << "built without the Vulkan backend"; }
#endif

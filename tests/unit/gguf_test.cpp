// GGUF reader and writer: round trips, files built byte by byte, and hostile inputs.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "quant/quants.h"
#include "test_util.h"

namespace {

using sa::dtype;
using sa::gguf::file;
using sa::gguf::value_type;
using sa::gguf::writer;

// ---- an encoder independent of the writer ---------------------------------------------------

struct enc {
  std::vector<uint8_t> b;
  enc& u8(uint8_t v) {
    b.push_back(v);
    return *this;
  }
  enc& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  enc& u16(uint16_t v) { return le(v, 2); }
  enc& u32(uint32_t v) { return le(v, 4); }
  enc& u64(uint64_t v) { return le(v, 8); }
  enc& f32(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    return u32(x);
  }
  enc& f64(double d) {
    uint64_t x;
    std::memcpy(&x, &d, 8);
    return u64(x);
  }
  enc& str(std::string_view s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  enc& raw(const std::vector<uint8_t>& v) {
    b.insert(b.end(), v.begin(), v.end());
    return *this;
  }
  enc& pad_to(size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
};

// GGUF value type ids, spelled out here rather than taken from the reader.
enum : uint32_t {
  T_U8 = 0, T_I8 = 1, T_U16 = 2, T_I16 = 3, T_U32 = 4, T_I32 = 5, T_F32 = 6, T_BOOL = 7,
  T_STR = 8, T_ARR = 9, T_U64 = 10, T_I64 = 11, T_F64 = 12,
};

enc kv(std::string_view key, uint32_t type) {
  enc e;
  e.str(key).u32(type);
  return e;
}
enc kv_u32(std::string_view key, uint32_t v) { return kv(key, T_U32).u32(v); }
enc kv_str(std::string_view key, std::string_view v) { return kv(key, T_STR).str(v); }

struct tinfo {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;
};

// A file described field by field; build() lays it out exactly as the spec says.
struct fake {
  uint32_t version = 3;
  std::vector<enc> kvs;
  std::vector<tinfo> tensors;
  size_t align = 32;  // used for the padding only; the key must be added to kvs separately
  uint64_t data_bytes = 0;
  std::optional<uint64_t> n_kv, n_tensors;  // overrides of the counts in the header

  std::vector<uint8_t> build() const {
    enc e;
    e.raw({'G', 'G', 'U', 'F'}).u32(version);
    e.u64(n_tensors.value_or(tensors.size())).u64(n_kv.value_or(kvs.size()));
    for (const enc& k : kvs) e.raw(k.b);
    for (const tinfo& t : tensors) {
      e.str(t.name).u32(static_cast<uint32_t>(t.ne.size()));
      for (uint64_t n : t.ne) e.u64(n);
      e.u32(t.type).u64(t.offset);
    }
    e.pad_to(align);
    for (uint64_t k = 0; k < data_bytes; ++k) e.u8(static_cast<uint8_t>(k * 7 + 3));
    return e.b;
  }
};

std::unique_ptr<file> parse(const std::vector<uint8_t>& b) {
  return file::from_memory(b.data(), b.size());
}

// Parses `b`, expecting sa::error with `status` whose message contains every needle.
void expect_error(const std::vector<uint8_t>& b, sa_status status,
                  std::initializer_list<const char*> needles = {}) {
  try {
    parse(b);
    ADD_FAILURE() << "parsed without error; expected status " << status;
  } catch (const sa::error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    for (const char* n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message lacks '" << n << "': " << e.what();
    }
  }
}

template <class F>
void expect_throw(F&& f, sa_status status, std::initializer_list<const char*> needles = {}) {
  try {
    f();
    ADD_FAILURE() << "no error; expected status " << status;
  } catch (const sa::error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    for (const char* n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message lacks '" << n << "': " << e.what();
    }
  }
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  enc e;
  for (float f : v) e.f32(f);
  return e.b;
}

// A valid file with one f32 tensor of 4 elements at offset 0.
fake one_tensor(std::vector<uint64_t> ne = {4}, uint32_t type = 0, uint64_t offset = 0,
                uint64_t data_bytes = 16) {
  fake f;
  f.kvs.push_back(kv_str("general.architecture", "llama"));
  f.tensors.push_back({"w", std::move(ne), type, offset});
  f.data_bytes = data_bytes;
  return f;
}

// ---- round trip -----------------------------------------------------------------------------

struct round_trip_data {
  std::vector<uint8_t> f32_raw, f16_raw, bf16_raw, q8_expected;
  std::vector<float> f32_src, q8_src, q4k_src;
  std::vector<uint8_t> q4k_expected;
};

round_trip_data make_round_trip_data() {
  round_trip_data d;
  d.f32_raw = f32_bytes({1.0f, -2.5f, 0.0f, 3.25f, 1e-30f, -0.0f});
  // f16: 1.0, -2.0, 0.5, 65504 (max finite)
  d.f16_raw = enc().u16(0x3c00).u16(0xc000).u16(0x3800).u16(0x7bff).b;
  // bf16 [2,2,1,2]: 8 values, arbitrary bit patterns
  for (uint16_t k = 0; k < 8; ++k) {
    d.bf16_raw.push_back(static_cast<uint8_t>(k * 37));
    d.bf16_raw.push_back(static_cast<uint8_t>(0x3f + k));
  }
  d.f32_src = {0.125f, -7.0f, 1e20f, -1e-20f, 42.0f};
  // q8_0 [64, 2]: integers in [-127, 127] with max |x| = 127 in every block, so d = 1 exactly
  // and q = x: the expected bytes are known without running any quantizer.
  for (int r = 0; r < 2; ++r) {
    for (int blk = 0; blk < 2; ++blk) {
      d.q8_expected.push_back(0x00);  // fp16 1.0 = 0x3c00, little-endian
      d.q8_expected.push_back(0x3c);
      for (int j = 0; j < 32; ++j) {
        int v = (j * 11 + r * 5 + blk * 3) % 255 - 127;
        if (j == 7) v = (r + blk) % 2 ? 127 : -127;
        d.q8_src.push_back(static_cast<float>(v));
        d.q8_expected.push_back(static_cast<uint8_t>(static_cast<int8_t>(v)));
      }
    }
  }
  // q4_k [256, 3]: the writer must quantize row by row, so the expected bytes are three
  // separate quantize_row calls.
  for (int k = 0; k < 256 * 3; ++k) d.q4k_src.push_back(std::sin(static_cast<float>(k) * 0.37f));
  d.q4k_expected.resize(3 * 144);
  for (int r = 0; r < 3; ++r) {
    sa::quantize_row(dtype::q4_k, d.q4k_src.data() + r * 256, d.q4k_expected.data() + r * 144,
                     256);
  }
  return d;
}

writer make_round_trip_writer(const round_trip_data& d) {
  writer w(64);
  w.set_u8("t.u8", 255);
  w.set_i8("t.i8", -128);
  w.set_u16("t.u16", 65535);
  w.set_i16("t.i16", -32768);
  w.set_u32("t.u32", 0xffffffffu);
  w.set_i32("t.i32", std::numeric_limits<int32_t>::min());
  w.set_u64("t.u64", std::numeric_limits<uint64_t>::max());
  w.set_i64("t.i64", std::numeric_limits<int64_t>::min());
  w.set_f32("t.f32", 3.5f);
  w.set_f64("t.f64", -1e300);
  w.set_bool("t.true", true);
  w.set_bool("t.false", false);
  w.set_u32("t.replaced", 1);
  w.set_string("t.str", "llama");
  w.set_string("t.empty", "");
  w.set_string("t.utf8", std::string("h\xc3\xa9llo\0x", 8));
  w.set_string_array("t.strs", {"<s>", "", "\xe2\x96\x81the"});
  w.set_i32_array("t.ints", {-1, 0, 7, std::numeric_limits<int32_t>::max()});
  w.set_f32_array("t.floats", {0.5f, -2.0f, 1e-7f});
  w.set_string_array("t.no_strs", {});
  w.set_u32("t.replaced", 2);  // replaces in place
  w.add_tensor_raw("a.f32", {3, 2}, dtype::f32, d.f32_raw.data(), d.f32_raw.size());
  w.add_tensor_raw("b.f16", {4}, dtype::f16, d.f16_raw.data(), d.f16_raw.size());
  w.add_tensor_raw("c.bf16", {2, 2, 1, 2}, dtype::bf16, d.bf16_raw.data(), d.bf16_raw.size());
  w.add_tensor("d.f32", {5}, dtype::f32, d.f32_src.data());
  w.add_tensor("e.q8_0", {64, 2}, dtype::q8_0, d.q8_src.data());
  w.add_tensor("f.q4_k", {256, 3}, dtype::q4_k, d.q4k_src.data());
  return w;
}

void check_round_trip(const file& f, const round_trip_data& d) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);

  const std::vector<std::string> order = {
      "general.alignment", "t.u8", "t.i8", "t.u16", "t.i16", "t.u32", "t.i32", "t.u64",
      "t.i64", "t.f32", "t.f64", "t.true", "t.false", "t.replaced", "t.str", "t.empty",
      "t.utf8", "t.strs", "t.ints", "t.floats", "t.no_strs"};
  ASSERT_EQ(f.kvs().size(), order.size());
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(f.kvs()[k].key, order[k]);

  EXPECT_EQ(f.find("general.alignment")->type, value_type::u32);
  EXPECT_EQ(f.get_uint("general.alignment"), 64u);
  EXPECT_EQ(f.find("t.u8")->type, value_type::u8);
  EXPECT_EQ(f.get_uint("t.u8"), 255u);
  EXPECT_EQ(f.find("t.i8")->type, value_type::i8);
  EXPECT_EQ(f.get_int_or("t.i8", 0), -128);
  EXPECT_EQ(f.find("t.u16")->type, value_type::u16);
  EXPECT_EQ(f.get_uint("t.u16"), 65535u);
  EXPECT_EQ(f.find("t.i16")->type, value_type::i16);
  EXPECT_EQ(f.get_int_or("t.i16", 0), -32768);
  EXPECT_EQ(f.find("t.u32")->type, value_type::u32);
  EXPECT_EQ(f.get_uint("t.u32"), 0xffffffffu);
  EXPECT_EQ(f.get_int_or("t.u32", 0), 0xffffffffll);
  EXPECT_EQ(f.find("t.i32")->type, value_type::i32);
  EXPECT_EQ(f.get_int_or("t.i32", 0), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f.find("t.u64")->type, value_type::u64);
  EXPECT_EQ(f.get_uint("t.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.find("t.i64")->type, value_type::i64);
  EXPECT_EQ(f.get_int_or("t.i64", 0), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.find("t.f32")->type, value_type::f32);
  EXPECT_EQ(f.get_float("t.f32"), 3.5);
  EXPECT_EQ(f.find("t.f64")->type, value_type::f64);
  EXPECT_EQ(f.get_float("t.f64"), -1e300);
  EXPECT_EQ(f.find("t.true")->type, value_type::boolean);
  EXPECT_TRUE(f.get_bool_or("t.true", false));
  EXPECT_FALSE(f.get_bool_or("t.false", true));
  EXPECT_EQ(f.get_uint("t.replaced"), 2u);
  EXPECT_EQ(f.get_string("t.str"), "llama");
  EXPECT_EQ(f.get_string("t.empty"), "");
  EXPECT_EQ(f.get_string("t.utf8"), std::string_view("h\xc3\xa9llo\0x", 8));

  const auto strs = f.get_string_array("t.strs");
  ASSERT_EQ(strs.size(), 3u);
  EXPECT_EQ(strs[0], "<s>");
  EXPECT_EQ(strs[1], "");
  EXPECT_EQ(strs[2], "\xe2\x96\x81the");
  EXPECT_EQ(f.find("t.strs")->elem_type, value_type::string);
  EXPECT_EQ(f.find("t.strs")->n_elems, 3u);
  EXPECT_EQ(f.get_int_array("t.ints"),
            (std::vector<int64_t>{-1, 0, 7, std::numeric_limits<int32_t>::max()}));
  EXPECT_EQ(f.find("t.ints")->elem_type, value_type::i32);
  EXPECT_EQ(f.get_float_array("t.floats"), (std::vector<float>{0.5f, -2.0f, 1e-7f}));
  EXPECT_TRUE(f.get_string_array("t.no_strs").empty());

  struct want {
    const char* name;
    uint32_t n_dims;
    std::vector<int64_t> ne;
    dtype type;
    std::vector<uint8_t> bytes;
  };
  const std::vector<want> wants = {
      {"a.f32", 2, {3, 2, 1, 1}, dtype::f32, d.f32_raw},
      {"b.f16", 1, {4, 1, 1, 1}, dtype::f16, d.f16_raw},
      {"c.bf16", 4, {2, 2, 1, 2}, dtype::bf16, d.bf16_raw},
      {"d.f32", 1, {5, 1, 1, 1}, dtype::f32, f32_bytes(d.f32_src)},
      {"e.q8_0", 2, {64, 2, 1, 1}, dtype::q8_0, d.q8_expected},
      {"f.q4_k", 2, {256, 3, 1, 1}, dtype::q4_k, d.q4k_expected},
  };
  ASSERT_EQ(f.tensors().size(), wants.size());
  uint64_t prev_end = 0;
  for (size_t k = 0; k < wants.size(); ++k) {
    const want& w = wants[k];
    const sa::gguf::tensor_info& t = f.tensors()[k];
    SCOPED_TRACE(w.name);
    EXPECT_EQ(t.name, w.name);
    EXPECT_EQ(f.find_tensor(w.name), &t);
    EXPECT_EQ(t.n_dims, w.n_dims);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(t.ne[j], w.ne[j]);
    EXPECT_EQ(t.type, w.type);
    EXPECT_EQ(t.n_bytes, w.bytes.size());
    EXPECT_EQ(t.offset % 64, 0u);
    EXPECT_GE(t.offset, prev_end);
    prev_end = t.offset + t.n_bytes;
    const uint8_t* p = f.tensor_data(t);
    ASSERT_GE(p, f.bytes());
    ASSERT_LE(p + t.n_bytes, f.bytes() + f.size());
    EXPECT_EQ(std::vector<uint8_t>(p, p + t.n_bytes), w.bytes);
  }
  EXPECT_EQ(f.find_tensor("missing"), nullptr);
  EXPECT_EQ(f.find("missing"), nullptr);

  // The quantized tensors also decode to what went in (q8_0 exactly).
  const sa::gguf::tensor_info* q8 = f.find_tensor("e.q8_0");
  std::vector<float> back(128);
  sa::dequantize_row(dtype::q8_0, f.tensor_data(*q8), back.data(), 128);
  EXPECT_EQ(back, d.q8_src);
}

TEST(GgufRoundTrip, EveryValueTypeAndTensorTypeFromMemoryAndDisk) {
  const round_trip_data d = make_round_trip_data();
  const writer w = make_round_trip_writer(d);
  const std::vector<uint8_t> bytes = w.to_bytes();

  // Header as the spec lays it out: magic, v3, 6 tensors, 21 keys; first key is the alignment.
  const std::vector<uint8_t> head = enc()
                                        .raw({'G', 'G', 'U', 'F'})
                                        .u32(3)
                                        .u64(6)
                                        .u64(21)
                                        .str("general.alignment")
                                        .u32(T_U32)
                                        .u32(64)
                                        .b;
  ASSERT_GE(bytes.size(), head.size());
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.begin() + head.size()), head);
  EXPECT_EQ(bytes.size() % 64, 0u);

  {
    SCOPED_TRACE("from_memory");
    check_round_trip(*parse(bytes), d);
  }
  const std::string path = sa_test::temp_path("roundtrip.gguf");
  w.write_file(path);
  for (bool use_mmap : {true, false}) {
    SCOPED_TRACE(use_mmap ? "open with mmap" : "open with read");
    auto f = file::open(path, use_mmap);
    ASSERT_EQ(f->size(), bytes.size());
    EXPECT_EQ(std::memcmp(f->bytes(), bytes.data(), bytes.size()), 0);
    check_round_trip(*f, d);
  }
  std::remove(path.c_str());
}

TEST(GgufRoundTrip, DefaultAlignmentWritesNoAlignmentKey) {
  writer w;
  w.set_string("general.architecture", "llama");
  const std::vector<float> x = {1, 2, 3};
  w.add_tensor("x", {3}, dtype::f32, x.data());
  w.add_tensor("y", {3}, dtype::f32, x.data());
  auto f = parse(w.to_bytes());
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->find("general.alignment"), nullptr);
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->tensors()[0].offset, 0u);
  EXPECT_EQ(f->tensors()[1].offset, 32u);  // 12 bytes padded to 32
  EXPECT_EQ(std::memcmp(f->tensor_data(f->tensors()[1]), x.data(), 12), 0);
}

TEST(GgufRoundTrip, EmptyFile) {
  auto f = parse(writer().to_bytes());
  EXPECT_TRUE(f->kvs().empty());
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufWriter, RejectsMisuse) {
  expect_throw([] { writer w(3); }, SA_ERR_INVALID_ARG);
  expect_throw([] { writer w(0); }, SA_ERR_INVALID_ARG);
  writer w;
  const std::vector<float> x(64, 1.0f);
  expect_throw([&] { w.set_u32("", 1); }, SA_ERR_INVALID_ARG);
  expect_throw([&] { w.set_u32(std::string(65536, 'k'), 1); }, SA_ERR_INVALID_ARG);
  expect_throw([&] { w.add_tensor("", {4}, dtype::f32, x.data()); }, SA_ERR_INVALID_ARG);
  expect_throw([&] { w.add_tensor("t", {}, dtype::f32, x.data()); }, SA_ERR_INVALID_ARG);
  expect_throw([&] { w.add_tensor("t", {1, 1, 1, 1, 1}, dtype::f32, x.data()); },
               SA_ERR_INVALID_ARG);
  expect_throw([&] { w.add_tensor("t", {0}, dtype::f32, x.data()); }, SA_ERR_INVALID_ARG);
  expect_throw([&] { w.add_tensor("t", {16}, dtype::q8_0, x.data()); }, SA_ERR_INVALID_ARG,
               {"block"});
  expect_throw([&] { w.add_tensor_raw("t", {4}, dtype::f32, x.data(), 15); },
               SA_ERR_INVALID_ARG);
  w.add_tensor("t", {4}, dtype::f32, x.data());
  expect_throw([&] { w.add_tensor("t", {4}, dtype::f32, x.data()); }, SA_ERR_INVALID_ARG,
               {"'t'"});
  const std::string bad_path = sa_test::temp_path("no_such_dir") + "/x.gguf";
  expect_throw([&] { writer().write_file(bad_path); }, SA_ERR_IO, {bad_path.c_str()});
}

// ---- byte-by-byte ---------------------------------------------------------------------------

TEST(GgufReader, ParsesHandBuiltFile) {
  enc e;
  e.raw({0x47, 0x47, 0x55, 0x46}).u32(3).u64(2).u64(5);
  e.str("general.alignment").u32(T_U32).u32(16);
  e.str("b").u32(T_BOOL).u8(1);
  e.str("u8s").u32(T_ARR).u32(T_U8).u64(3).u8(1).u8(2).u8(255);
  e.str("i16s").u32(T_ARR).u32(T_I16).u64(2).u16(0xffff).u16(300);
  e.str("u64s").u32(T_ARR).u32(T_U64).u64(1).u64(1ull << 40);
  // tensor "w": f32 [4]; tensor "h": f16 [2, 3] at offset 16 (after w's 16 bytes)
  e.str("w").u32(1).u64(4).u32(0).u64(0);
  e.str("h").u32(2).u64(2).u64(3).u32(1).u64(16);
  const size_t infos_end = e.b.size();
  e.pad_to(16);
  const size_t data_start = e.b.size();
  ASSERT_EQ(data_start, (infos_end + 15) / 16 * 16);
  for (int k = 0; k < 16 + 12; ++k) e.u8(static_cast<uint8_t>(100 + k));

  auto f = parse(e.b);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 16u);
  ASSERT_EQ(f->kvs().size(), 5u);
  EXPECT_TRUE(f->get_bool_or("b", false));
  EXPECT_EQ(f->get_int_array("u8s"), (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(f->get_int_array("i16s"), (std::vector<int64_t>{-1, 300}));
  EXPECT_EQ(f->get_int_array("u64s"), (std::vector<int64_t>{1ll << 40}));
  const sa::gguf::value* u8s = f->find("u8s");
  ASSERT_NE(u8s, nullptr);
  EXPECT_EQ(u8s->type, value_type::array);
  EXPECT_EQ(u8s->elem_type, value_type::u8);
  EXPECT_EQ(u8s->n_elems, 3u);
  EXPECT_EQ(u8s->elems[2], 255);

  ASSERT_EQ(f->tensors().size(), 2u);
  const auto& w = f->tensors()[0];
  const auto& h = f->tensors()[1];
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.n_dims, 1u);
  EXPECT_EQ(w.n_elements(), 4);
  EXPECT_EQ(w.n_bytes, 16u);
  EXPECT_EQ(f->tensor_data(w), f->bytes() + data_start);
  EXPECT_EQ(h.name, "h");
  EXPECT_EQ(h.type, dtype::f16);
  EXPECT_EQ(h.ne[0], 2);
  EXPECT_EQ(h.ne[1], 3);
  EXPECT_EQ(h.ne[2], 1);
  EXPECT_EQ(h.n_bytes, 12u);
  EXPECT_EQ(f->tensor_data(h), f->bytes() + data_start + 16);
  EXPECT_EQ(f->tensor_data(h)[0], 116);
}

TEST(GgufReader, AcceptsVersion2AndOutOfOrderTensorsAndLongNames) {
  fake f;
  f.version = 2;
  const std::string long_name(200, 'n');
  f.tensors.push_back({"second", {4}, 0, 32});
  f.tensors.push_back({long_name, {4}, 0, 0});
  f.data_bytes = 48;
  auto g = parse(f.build());
  EXPECT_EQ(g->version(), 2u);
  ASSERT_NE(g->find_tensor(long_name), nullptr);
  EXPECT_EQ(g->find_tensor("second")->offset, 32u);
}

TEST(GgufReader, OpenFailuresAreIoErrors) {
  const std::string missing = sa_test::temp_path("missing.gguf");
  expect_throw([&] { file::open(missing); }, SA_ERR_IO, {missing.c_str()});
  expect_throw([&] { file::open(missing, false); }, SA_ERR_IO, {missing.c_str()});
  const std::string dir = sa_test::temp_path("dir");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  expect_throw([&] { file::open(dir); }, SA_ERR_IO, {dir.c_str()});
  ::rmdir(dir.c_str());
  // An empty file opens (no mapping of 0 bytes) and fails as a format error.
  const std::string empty = sa_test::temp_path("empty.gguf");
  std::fclose(std::fopen(empty.c_str(), "wb"));
  expect_throw([&] { file::open(empty); }, SA_ERR_FORMAT);
  std::remove(empty.c_str());
}

// ---- typed getters --------------------------------------------------------------------------

TEST(GgufReader, TypedGetters) {
  writer w;
  w.set_u8("u8", 7);
  w.set_i32("i32", 123456);
  w.set_i32("neg", -5);
  w.set_u64("u64", 1ull << 40);
  w.set_u64("huge", 1ull << 63);
  w.set_i8("i8neg", -1);
  w.set_f32("f32", 0.25f);
  w.set_string("name", "x");
  w.set_bool("flag", true);
  w.set_i32_array("ints", {1, 2});
  w.set_f32_array("floats", {1.5f});
  auto f = parse(w.to_bytes());

  EXPECT_EQ(f->get_uint("u8"), 7u);
  EXPECT_EQ(f->get_uint("i32"), 123456u);
  EXPECT_EQ(f->get_uint("u64"), 1ull << 40);
  EXPECT_EQ(f->get_uint("huge"), 1ull << 63);
  EXPECT_EQ(f->get_uint_or("u8", 99), 7u);
  EXPECT_EQ(f->get_uint_or("absent", 99), 99u);
  EXPECT_EQ(f->get_int_or("neg", 0), -5);
  EXPECT_EQ(f->get_int_or("u8", 0), 7);
  EXPECT_EQ(f->get_int_or("absent", -9), -9);
  EXPECT_EQ(f->get_float("f32"), 0.25);
  EXPECT_EQ(f->get_float_or("absent", 2.5), 2.5);
  EXPECT_TRUE(f->get_bool_or("absent", true));
  EXPECT_FALSE(f->get_bool_or("absent", false));
  EXPECT_EQ(f->get_string_or("absent", "fb"), "fb");
  EXPECT_EQ(f->get_string_or("name", "fb"), "x");

  expect_throw([&] { f->get_uint("neg"); }, SA_ERR_FORMAT, {"'neg'", "-5"});
  expect_throw([&] { f->get_uint("i8neg"); }, SA_ERR_FORMAT, {"'i8neg'"});
  expect_throw([&] { f->get_uint_or("neg", 1); }, SA_ERR_FORMAT, {"'neg'"});
  expect_throw([&] { f->get_int_or("huge", 0); }, SA_ERR_FORMAT, {"'huge'"});
  expect_throw([&] { f->get_uint("absent.key"); }, SA_ERR_FORMAT, {"'absent.key'"});
  expect_throw([&] { f->get_float("absent.key"); }, SA_ERR_FORMAT, {"'absent.key'"});
  expect_throw([&] { f->get_string("absent.key"); }, SA_ERR_FORMAT, {"'absent.key'"});
  expect_throw([&] { f->get_string_array("absent.key"); }, SA_ERR_FORMAT, {"'absent.key'"});
  // Wrong types name the key, the actual and the expected type.
  expect_throw([&] { f->get_uint("name"); }, SA_ERR_FORMAT, {"'name'", "string"});
  expect_throw([&] { f->get_uint("f32"); }, SA_ERR_FORMAT, {"'f32'", "f32"});
  expect_throw([&] { f->get_uint("flag"); }, SA_ERR_FORMAT, {"'flag'", "bool"});
  expect_throw([&] { f->get_float("u8"); }, SA_ERR_FORMAT, {"'u8'", "u8"});
  expect_throw([&] { f->get_string("u8"); }, SA_ERR_FORMAT, {"'u8'", "u8", "string"});
  expect_throw([&] { f->get_string_or("u8", "x"); }, SA_ERR_FORMAT, {"'u8'"});
  expect_throw([&] { f->get_bool_or("u8", false); }, SA_ERR_FORMAT, {"'u8'", "bool"});
  expect_throw([&] { f->get_string_array("ints"); }, SA_ERR_FORMAT, {"'ints'", "array of i32"});
  expect_throw([&] { f->get_int_array("floats"); }, SA_ERR_FORMAT, {"'floats'"});
  expect_throw([&] { f->get_float_array("ints"); }, SA_ERR_FORMAT, {"'ints'"});
  expect_throw([&] { f->get_int_array("u8"); }, SA_ERR_FORMAT, {"'u8'"});
  EXPECT_EQ(f->get_int_array("ints"), (std::vector<int64_t>{1, 2}));

  // u64 array elements above int64 do not fit get_int_array.
  enc e;
  e.raw({'G', 'G', 'U', 'F'}).u32(3).u64(0).u64(1);
  e.str("big").u32(T_ARR).u32(T_U64).u64(2).u64(1).u64(1ull << 63);
  auto g = parse(e.b);
  expect_throw([&] { g->get_int_array("big"); }, SA_ERR_FORMAT, {"'big'"});
}

// ---- hostile input --------------------------------------------------------------------------

// A small valid file with no trailing padding, so every proper prefix is invalid.
std::vector<uint8_t> small_valid_file() {
  writer w(16);
  w.set_string("general.architecture", "llama");
  w.set_string_array("tokens", {"a", "bc", ""});
  w.set_f32_array("scores", {1.0f, 2.0f});
  w.set_bool("flag", true);
  const std::vector<float> x(8, 0.5f);
  w.add_tensor("x", {4}, dtype::f32, x.data());     // 16 bytes
  w.add_tensor("y", {2, 4}, dtype::f32, x.data());  // 32 bytes, ends the file
  return w.to_bytes();
}

TEST(GgufHostile, TruncationAtEveryByte) {
  const std::vector<uint8_t> full = small_valid_file();
  auto f = parse(full);
  const auto& y = *f->find_tensor("y");
  ASSERT_EQ(f->tensor_data(y) + y.n_bytes, f->bytes() + full.size()) << "trailing bytes";
  for (size_t cut = 0; cut < full.size(); ++cut) {
    SCOPED_TRACE(cut);
    // A fresh exact-size heap block so ASan catches any read past the cut.
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut));
    expect_error(prefix, SA_ERR_FORMAT);
  }
}

TEST(GgufHostile, AbsurdCountsFailFast) {
  const uint64_t huge = 1ull << 60;
  fake f;
  f.n_kv = huge;
  expect_error(f.build(), SA_ERR_FORMAT, {"1152921504606846976"});
  f = fake();
  f.n_tensors = huge;
  expect_error(f.build(), SA_ERR_FORMAT, {"1152921504606846976"});
  f = fake();
  f.n_kv = std::numeric_limits<uint64_t>::max();
  f.n_tensors = std::numeric_limits<uint64_t>::max();
  expect_error(f.build(), SA_ERR_FORMAT);

  // key length
  f = fake();
  f.kvs.push_back(enc().u64(huge).u32(T_U8).u8(0));
  expect_error(f.build(), SA_ERR_FORMAT);
  f = fake();
  f.kvs.push_back(enc().u64(std::numeric_limits<uint64_t>::max()).u32(T_U8).u8(0));
  expect_error(f.build(), SA_ERR_FORMAT);
  // string value length
  f = fake();
  f.kvs.push_back(kv("s", T_STR).u64(huge));
  expect_error(f.build(), SA_ERR_FORMAT, {"'s'"});
  // array counts, including ones whose byte size overflows 64 bits
  for (uint32_t elem : {T_U8, T_U64, T_STR, T_BOOL}) {
    for (uint64_t n : {huge, uint64_t{1} << 62, std::numeric_limits<uint64_t>::max()}) {
      SCOPED_TRACE(std::to_string(elem) + " " + std::to_string(n));
      f = fake();
      f.kvs.push_back(kv("arr", T_ARR).u32(elem).u64(n).u64(0));
      expect_error(f.build(), SA_ERR_FORMAT, {"'arr'"});
    }
  }
  // tensor name length
  f = fake();
  f.tensors.push_back({"x", {4}, 0, 0});
  std::vector<uint8_t> b = f.build();
  const size_t name_len_at = 24;  // header is 4 + 4 + 8 + 8 bytes, no keys
  for (int k = 0; k < 8; ++k) b[name_len_at + k] = k == 7 ? 0x10 : 0;
  expect_error(b, SA_ERR_FORMAT);
}

TEST(GgufHostile, Alignment) {
  for (uint32_t a : {0u, 3u, 24u, 0x80000001u}) {
    SCOPED_TRACE(a);
    fake f = one_tensor();
    f.kvs.push_back(kv_u32("general.alignment", a));
    expect_error(f.build(), SA_ERR_FORMAT, {"general.alignment"});
  }
  fake f = one_tensor();
  f.kvs.push_back(kv("general.alignment", T_U64).u64(32));
  expect_error(f.build(), SA_ERR_FORMAT, {"general.alignment", "u64", "u32"});
  f = one_tensor();
  f.kvs.push_back(kv_str("general.alignment", "32"));
  expect_error(f.build(), SA_ERR_FORMAT, {"general.alignment"});
  // A valid but enormous alignment puts the data section past the end of the file.
  f = one_tensor();
  f.kvs.push_back(kv_u32("general.alignment", 1u << 31));
  expect_error(f.build(), SA_ERR_FORMAT);
  // Through the writer: the key says 3, which the reader refuses.
  writer w(64);
  w.set_u32("general.alignment", 3);
  expect_error(w.to_bytes(), SA_ERR_FORMAT, {"general.alignment"});
  // Alignment 1 and 16 are fine.
  for (uint32_t a : {1u, 16u}) {
    f = one_tensor();
    f.align = a;
    f.kvs.push_back(kv_u32("general.alignment", a));
    EXPECT_EQ(parse(f.build())->alignment(), a);
  }
}

TEST(GgufHostile, DuplicatesAreErrors) {
  fake f = one_tensor();
  f.kvs.push_back(kv_u32("dup.key", 1));
  f.kvs.push_back(kv_str("other", "x"));
  f.kvs.push_back(kv_u32("dup.key", 2));
  expect_error(f.build(), SA_ERR_FORMAT, {"dup.key"});

  f = one_tensor({4}, 0, 0, 64);
  f.tensors.push_back({"w", {4}, 0, 32});
  expect_error(f.build(), SA_ERR_FORMAT, {"'w'"});
}

TEST(GgufHostile, BadShapes) {
  expect_error(one_tensor({}).build(), SA_ERR_FORMAT, {"'w'", "n_dims"});
  expect_error(one_tensor({1, 1, 4, 1, 1}).build(), SA_ERR_FORMAT, {"'w'", "n_dims"});
  expect_error(one_tensor({4, 0}).build(), SA_ERR_FORMAT, {"'w'"});
  expect_error(one_tensor({1ull << 63}).build(), SA_ERR_FORMAT, {"'w'"});
  // q8_0 rows must be whole 32-element blocks
  expect_error(one_tensor({16}, 8, 0, 64).build(), SA_ERR_FORMAT, {"'w'", "block"});
  expect_error(one_tensor({16, 2}, 12, 0, 64).build(), SA_ERR_FORMAT, {"'w'", "256"});
  // element count overflows int64
  expect_error(one_tensor({1ull << 32, 1ull << 32}).build(), SA_ERR_FORMAT, {"'w'", "overflow"});
  expect_error(one_tensor({3, 1ull << 62, 1, 1}).build(), SA_ERR_FORMAT, {"'w'", "overflow"});
  // element count fits, byte size does not
  expect_error(one_tensor({1ull << 62}).build(), SA_ERR_FORMAT, {"'w'", "overflow"});
  // Fits 64 bits but not the file.
  expect_error(one_tensor({1ull << 40}).build(), SA_ERR_FORMAT, {"'w'"});
}

TEST(GgufHostile, UnsupportedTensorTypes) {
  expect_error(one_tensor({256}, 13, 0, 256).build(), SA_ERR_UNSUPPORTED, {"'w'", "q5_k"});
  expect_error(one_tensor({32}, 3, 0, 64).build(), SA_ERR_UNSUPPORTED, {"'w'", "q4_1"});
  expect_error(one_tensor({4}, 1000).build(), SA_ERR_UNSUPPORTED, {"'w'", "1000"});
  expect_error(one_tensor({4}, 0xffffffffu).build(), SA_ERR_UNSUPPORTED, {"'w'"});
  // Every supported type parses at a valid size.
  for (uint32_t id : {0u, 1u, 2u, 8u, 12u, 14u, 30u}) {
    SCOPED_TRACE(id);
    sa::dtype t;
    ASSERT_TRUE(sa::dtype_from_id(id, &t));
    const auto& tr = sa::traits(t);
    auto g = parse(one_tensor({static_cast<uint64_t>(tr.block_elems) * 2, 3}, id, 0,
                              static_cast<uint64_t>(tr.block_bytes) * 6)
                       .build());
    EXPECT_EQ(g->tensors()[0].n_bytes, static_cast<uint64_t>(tr.block_bytes) * 6);
  }
}

TEST(GgufHostile, BadOffsets) {
  expect_error(one_tensor({4}, 0, 4, 64).build(), SA_ERR_FORMAT, {"'w'", "alignment"});
  expect_error(one_tensor({4}, 0, 0, 15).build(), SA_ERR_FORMAT, {"'w'", "end"});
  expect_error(one_tensor({4}, 0, 32, 47).build(), SA_ERR_FORMAT, {"'w'"});
  expect_error(one_tensor({4}, 0, 1ull << 63, 16).build(), SA_ERR_FORMAT, {"'w'"});
  expect_error(one_tensor({4}, 0, ~31ull, 16).build(), SA_ERR_FORMAT, {"'w'"});
  EXPECT_NO_THROW(parse(one_tensor({4}, 0, 32, 48).build()));

  // Overlap: 16 floats at 0 and at 32 share bytes 32..64.
  fake f = one_tensor({16}, 0, 0, 128);
  f.tensors.push_back({"v", {16}, 0, 32});
  expect_error(f.build(), SA_ERR_FORMAT, {"'w'", "'v'", "overlap"});
  // Same with the tensor infos in the other order.
  f = one_tensor({16}, 0, 32, 128);
  f.tensors.push_back({"v", {16}, 0, 0});
  expect_error(f.build(), SA_ERR_FORMAT, {"overlap"});
  // Adjacent is fine.
  f = one_tensor({16}, 0, 0, 128);
  f.tensors.push_back({"v", {16}, 0, 64});
  EXPECT_NO_THROW(parse(f.build()));
}

TEST(GgufHostile, BadValues) {
  fake f;
  f.kvs.push_back(kv("flag", T_BOOL).u8(2));
  expect_error(f.build(), SA_ERR_FORMAT, {"'flag'", "bool"});
  f = fake();
  f.kvs.push_back(kv("flags", T_ARR).u32(T_BOOL).u64(3).u8(1).u8(0).u8(7));
  expect_error(f.build(), SA_ERR_FORMAT, {"'flags'", "bool"});
  f = fake();
  f.kvs.push_back(kv("k", 13).u32(0));
  expect_error(f.build(), SA_ERR_FORMAT, {"'k'", "13"});
  f = fake();
  f.kvs.push_back(kv("a", T_ARR).u32(13).u64(0));
  expect_error(f.build(), SA_ERR_FORMAT, {"'a'"});
  f = fake();
  f.kvs.push_back(kv("nested", T_ARR).u32(T_ARR).u64(1).u32(T_U8).u64(0));
  expect_error(f.build(), SA_ERR_FORMAT, {"'nested'", "nested"});
  f = fake();
  f.kvs.push_back(kv("", T_U8).u8(0));
  expect_error(f.build(), SA_ERR_FORMAT, {"empty key"});
  f = fake();
  f.kvs.push_back(kv(std::string(65536, 'k'), T_U8).u8(0));
  expect_error(f.build(), SA_ERR_FORMAT, {"65536"});
  f = fake();
  f.kvs.push_back(kv(std::string(65535, 'k'), T_U8).u8(0));
  EXPECT_NO_THROW(parse(f.build()));
  // tensor names
  f = one_tensor();
  f.tensors[0].name = "";
  expect_error(f.build(), SA_ERR_FORMAT, {"empty name"});
  f = one_tensor();
  f.tensors[0].name = std::string(257, 't');
  expect_error(f.build(), SA_ERR_FORMAT, {"257"});
  // A control byte in a key is escaped in the message.
  f = fake();
  f.kvs.push_back(kv(std::string("bad\x01key", 7), T_BOOL).u8(9));
  expect_error(f.build(), SA_ERR_FORMAT, {"bad\\x01key"});
}

TEST(GgufHostile, Headers) {
  const std::vector<uint8_t> good = one_tensor().build();
  std::vector<uint8_t> b = good;
  b[0] = 'g';
  expect_error(b, SA_ERR_FORMAT, {"magic"});
  b = good;
  b[4] = 1;  // version 1
  expect_error(b, SA_ERR_UNSUPPORTED, {"GGUF v1 is not supported"});
  b = good;
  b[4] = 0;
  b[7] = 3;  // version 3 written big-endian
  expect_error(b, SA_ERR_UNSUPPORTED, {"big-endian"});
  b = good;
  b[4] = 4;
  expect_error(b, SA_ERR_UNSUPPORTED, {"4"});
  b = good;
  b[4] = 0;  // version 0
  expect_error(b, SA_ERR_UNSUPPORTED);
  expect_error({}, SA_ERR_FORMAT);
  expect_error({'G', 'G', 'U'}, SA_ERR_FORMAT);
  expect_error({'G', 'G', 'U', 'F', 3, 0, 0, 0}, SA_ERR_FORMAT);
  EXPECT_NO_THROW(parse(good));
}

// Touches everything a successfully parsed file exposes, so the sanitizers see any bad pointer.
uint64_t touch_all(const file& f) {
  uint64_t sum = 0;
  for (const auto& k : f.kvs()) {
    const auto& v = k.val;
    sum += k.key.size() + v.str.size();
    for (std::string_view s : v.strs) {
      for (char c : s) sum += static_cast<uint8_t>(c);
    }
    if (v.type == value_type::array && v.elem_type != value_type::string) {
      try {
        sum += f.get_int_array(k.key).size();
      } catch (const sa::error&) {
      }
      try {
        sum += f.get_float_array(k.key).size();
      } catch (const sa::error&) {
      }
    }
  }
  for (const auto& t : f.tensors()) {
    const uint8_t* p = f.tensor_data(t);
    for (uint64_t k = 0; k < t.n_bytes; ++k) sum += p[k];
  }
  return sum;
}

TEST(GgufHostile, RandomMutationsNeverCrash) {
  const std::vector<uint8_t> base = small_valid_file();
  std::mt19937_64 rng(12345);
  int parsed = 0, rejected = 0;
  const uint64_t extremes[] = {0, 1, 0x7f, 0xff, 0xffff, 0x7fffffff, 0xffffffff,
                               1ull << 32, 1ull << 60, 1ull << 63, ~0ull};
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = base;
    const int n_mut = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < n_mut && !b.empty(); ++m) {
      const size_t at = rng() % b.size();
      switch (rng() % 6) {
        case 0: b[at] = static_cast<uint8_t>(rng()); break;
        case 1: b[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 2: {  // an extreme little-endian value over 1..8 bytes
          const uint64_t v = extremes[rng() % std::size(extremes)];
          const size_t n = 1 + rng() % 8;
          for (size_t k = 0; k < n && at + k < b.size(); ++k) {
            b[at + k] = static_cast<uint8_t>(v >> (8 * k));
          }
          break;
        }
        case 3: b.resize(at); break;
        case 4:
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), static_cast<uint8_t>(rng()));
          break;
        default: b.erase(b.begin() + static_cast<std::ptrdiff_t>(at)); break;
      }
    }
    try {
      auto f = parse(b);
      touch_all(*f);
      ++parsed;
    } catch (const sa::error& e) {
      EXPECT_TRUE(e.status() == SA_ERR_FORMAT || e.status() == SA_ERR_UNSUPPORTED)
          << e.status() << ": " << e.what();
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << iter << ": unexpected exception " << e.what();
    }
  }
  EXPECT_EQ(parsed + rejected, 3000);
  // Both outcomes occur, so the loop exercises the parser rather than the magic check only.
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace

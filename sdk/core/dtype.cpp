#include "core/dtype.h"

namespace sa {

namespace {
constexpr dtype_traits k_f32{"f32", 1, 4};
constexpr dtype_traits k_f16{"f16", 1, 2};
constexpr dtype_traits k_bf16{"bf16", 1, 2};
constexpr dtype_traits k_q4_0{"q4_0", 32, 18};
constexpr dtype_traits k_q8_0{"q8_0", 32, 34};
constexpr dtype_traits k_q4_k{"q4_k", 256, 144};
constexpr dtype_traits k_q6_k{"q6_k", 256, 210};
constexpr dtype_traits k_i32{"i32", 1, 4};
}  // namespace

const dtype_traits& traits(dtype t) {
  switch (t) {
    case dtype::f32: return k_f32;
    case dtype::f16: return k_f16;
    case dtype::bf16: return k_bf16;
    case dtype::q4_0: return k_q4_0;
    case dtype::q8_0: return k_q8_0;
    case dtype::q4_k: return k_q4_k;
    case dtype::q6_k: return k_q6_k;
    case dtype::i32: return k_i32;
  }
  return k_f32;  // unreachable for valid enum values
}

bool dtype_from_id(uint32_t id, dtype* out) {
  switch (id) {
    case 0: case 1: case 2: case 8: case 12: case 14: case 30:
      *out = static_cast<dtype>(id);
      return true;
    default:
      return false;
  }
}

const char* ggml_type_name(uint32_t id) {
  static const char* const names[] = {
      "f32",     "f16",    "q4_0",    "q4_1",  "(removed 4)", "(removed 5)", "q5_0",
      "q5_1",    "q8_0",   "q8_1",    "q2_k",  "q3_k",        "q4_k",        "q5_k",
      "q6_k",    "q8_k",   "iq2_xxs", "iq2_xs", "iq3_xxs",    "iq1_s",       "iq4_nl",
      "iq3_s",   "iq2_s",  "iq4_xs",  "i8",    "i16",         "i32",         "i64",
      "f64",     "iq1_m",  "bf16",    "(removed 31)", "(removed 32)", "(removed 33)",
      "tq1_0",   "tq2_0",  "(removed 36)", "(removed 37)", "(removed 38)", "mxfp4",
      "nvfp4",   "q1_0",   "q2_0"};
  return id < sizeof names / sizeof names[0] ? names[id] : "unknown";
}

}  // namespace sa

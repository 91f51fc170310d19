#include "backend/vulkan/coop_khr.h"

#include <bit>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <utility>

namespace sa::vk {

namespace {

// SPIR-V opcodes, capabilities and operand values this rewrite reads or writes.
enum : uint32_t {
  op_undef = 1,
  op_name = 5,
  op_member_name = 6,
  op_line = 8,
  op_extension = 10,
  op_capability = 17,
  op_type_int = 21,
  op_type_array = 28,
  op_type_runtime_array = 29,
  op_type_struct = 30,
  op_type_pointer = 32,
  op_type_function = 33,
  op_type_forward_pointer = 39,
  op_constant_true = 41,
  op_constant_false = 42,
  op_constant = 43,
  op_spec_constant_op = 52,
  op_function = 54,
  op_function_parameter = 55,
  op_function_end = 56,
  op_function_call = 57,
  op_variable = 59,
  op_load = 61,
  op_store = 62,
  op_copy_memory = 63,
  op_copy_memory_sized = 64,
  op_access_chain = 65,
  op_in_bounds_access_chain = 66,
  op_ptr_access_chain = 67,
  op_decorate = 71,
  op_member_decorate = 72,
  op_composite_insert = 82,
  op_image_write = 99,
  op_control_barrier = 224,
  op_memory_barrier = 225,
  op_atomic_store = 228,
  op_loop_merge = 246,
  op_selection_merge = 247,
  op_label = 248,
  op_branch = 249,
  op_branch_conditional = 250,
  op_switch = 251,
  op_kill = 252,
  op_return = 253,
  op_return_value = 254,
  op_unreachable = 255,
  op_lifetime_start = 256,
  op_lifetime_stop = 257,
  op_no_line = 317,
  op_terminate_invocation = 4416,
  op_type_coop_khr = 4456,
  op_coop_load_khr = 4457,
  op_coop_store_khr = 4458,
  op_coop_muladd_khr = 4459,
  op_coop_length_khr = 4460,
  op_type_coop_nv = 5358,
  op_coop_load_nv = 5359,
  op_coop_store_nv = 5360,
  op_coop_muladd_nv = 5361,
  op_coop_length_nv = 5362,
  cap_coop_nv = 5357,
  cap_coop_khr = 6022,
};

constexpr uint32_t k_magic = 0x07230203u;
constexpr const char* k_ext_nv = "SPV_NV_cooperative_matrix";
constexpr const char* k_ext_khr = "SPV_KHR_cooperative_matrix";

// The uses of a Khronos matrix (its Use operand's values), as bits of a set.
enum use : uint32_t { use_a = 0, use_b = 1, use_acc = 2 };
constexpr const char* k_use_names[3] = {"A", "B", "accumulator"};

// Instructions of a function body that have no result type (so word 1 is no type).
bool without_result_type(uint32_t op) {
  switch (op) {
    case op_line: case op_no_line: case op_store: case op_copy_memory: case op_copy_memory_sized:
    case op_image_write: case op_control_barrier: case op_memory_barrier: case op_atomic_store:
    case op_loop_merge: case op_selection_merge: case op_label: case op_branch:
    case op_branch_conditional: case op_switch: case op_kill: case op_return: case op_return_value:
    case op_unreachable: case op_lifetime_start: case op_lifetime_stop: case op_function_end:
    case op_terminate_invocation: case op_coop_store_nv: case op_coop_store_khr:
      return true;
    default:
      return false;
  }
}

// Declarations outside functions that have a result type: constants, variables, undef.
bool global_with_result_type(uint32_t op) {
  return op == op_undef || (op >= op_constant_true && op <= op_spec_constant_op) || op == op_variable;
}

bool is_type_declaration(uint32_t op) {
  return (op >= 19 && op <= 39 && op != op_type_forward_pointer) || op == 322 || op == op_type_coop_nv ||
         op == op_type_coop_khr || op == 4472 || op == 5341;
}

// A literal string operand as words (nul-terminated, zero-padded).
std::vector<uint32_t> string_words(const char* s) {
  const size_t len = std::strlen(s) + 1;
  std::vector<uint32_t> w((len + 3) / 4, 0u);
  std::memcpy(w.data(), s, len);
  return w;
}

struct instruction {
  uint32_t op;
  size_t at;   // index of its first word
  uint32_t n;  // words, the first included
};

class rewriter {
 public:
  rewriter(const uint32_t* w, size_t n) : w_(w), n_(n) {}

  bool run(std::vector<uint32_t>* out, std::string* why) {
    if (!parse()) return fail(why);
    if (!uses_nv_) {
      out->assign(w_, w_ + n_);
      return true;
    }
    if (!classify() || !relate() || !assign_uses()) return fail(why);
    emit(out);
    if (!error_.empty()) return fail(why);
    return true;
  }

 private:
  const uint32_t* w_;
  size_t n_;
  uint32_t ids_ = 0;    // the module's id bound
  uint32_t bound_ = 0;  // the rewritten module's (fresh ids past ids_)
  std::vector<instruction> ins_;
  bool uses_nv_ = false;
  std::string error_;

  // Types: what each pointer or array holds; which are NVIDIA matrices or lead to one.
  std::map<uint32_t, uint32_t> inner_;     // pointer / array type -> pointee / element type
  std::vector<uint8_t> carrying_type_;     // by id: an NVIDIA matrix type, or a pointer / array to one
  std::vector<uint32_t> type_of_;          // by id: the result type of a value (0: none)
  std::map<uint32_t, bool> bool_constant_; // OpConstantTrue / OpConstantFalse
  uint32_t uint_type_ = 0;                 // OpTypeInt 32 0, declared before the first matrix type

  // Values that meet: a union-find over ids, and the uses each set meets in multiply-adds.
  std::vector<uint32_t> parent_;
  std::vector<uint32_t> uses_;  // by root: bits of `use`
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> variant_;  // (NVIDIA type, use) -> Khronos type id
  uint32_t use_constant_[3] = {0, 0, 0};                      // OpConstant %uint 0 / 1 / 2

  bool fail(std::string* why) {
    if (why) *why = error_.empty() ? std::string("the module could not be rewritten") : error_;
    return false;
  }
  bool error(const char* fmt, uint32_t a = 0, uint32_t b = 0) {
    char buf[256];
    std::snprintf(buf, sizeof buf, fmt, a, b);
    error_ = buf;
    return false;
  }
  uint32_t word(const instruction& i, uint32_t k) const { return k < i.n ? w_[i.at + k] : 0u; }
  bool id_ok(uint32_t id) const { return id != 0 && id < ids_; }
  bool carrying_value(uint32_t id) const {
    return id_ok(id) && type_of_[id] != 0 && carrying_type_[type_of_[id]];
  }
  bool carrying(uint32_t type) const { return id_ok(type) && carrying_type_[type]; }

  uint32_t find(uint32_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void unite(uint32_t a, uint32_t b) {
    if (!id_ok(a) || !id_ok(b)) return;
    a = find(a), b = find(b);
    if (a != b) parent_[b] = a;
  }
  // Whether instruction i (in a function body or not) has a result type at word 1.
  bool has_result_type(const instruction& i, bool in_function) const {
    if (i.op == op_function || i.op == op_function_parameter) return true;
    if (in_function) return !without_result_type(i.op) && i.n >= 3;
    return global_with_result_type(i.op) && i.n >= 3;
  }

  bool parse() {
    if (n_ < 5 || w_[0] != k_magic) return error("not a SPIR-V module (no magic number)");
    ids_ = bound_ = w_[3];
    if (ids_ == 0 || ids_ > (1u << 22)) return error("a SPIR-V id bound of %u", ids_);
    for (size_t at = 5; at < n_;) {
      const uint32_t count = w_[at] >> 16, op = w_[at] & 0xffffu;
      if (count == 0 || at + count > n_) return error("a malformed instruction (opcode %u) at word %u", op,
                                                      static_cast<uint32_t>(at));
      // The operands this rewrite reads must be there.
      const uint32_t least = op == op_type_coop_nv || op == op_coop_load_nv || op == op_coop_muladd_nv ? 6
                             : op == op_coop_store_nv                                                 ? 5
                             : op == op_coop_length_nv || op == op_type_pointer || op == op_type_array ? 4
                             : op == op_type_runtime_array                                            ? 3
                                                                                                      : 1;
      if (count < least) return error("an instruction (opcode %u) of %u words, too short", op, count);
      ins_.push_back({op, at, count});
      if (op == op_capability && count == 2 && w_[at + 1] == cap_coop_nv) uses_nv_ = true;
      at += count;
    }
    return true;
  }

  // Types, constants and the type of every value.
  bool classify() {
    carrying_type_.assign(ids_, 0);
    type_of_.assign(ids_, 0);
    bool in_function = false, seen_matrix_type = false;
    for (const instruction& i : ins_) {
      if (i.op == op_function) in_function = true;
      if (!in_function && is_type_declaration(i.op)) {
        const uint32_t id = word(i, 1);
        if (!id_ok(id)) return error("a type id %u out of the bound", id);
        if (i.op == op_type_coop_nv) {
          if (i.n != 6) return error("an OpTypeCooperativeMatrixNV of %u words", i.n);
          if (!uint_type_) return error("no 32-bit unsigned integer type before the first matrix type");
          carrying_type_[id] = 1;
          seen_matrix_type = true;
        } else if (i.op == op_type_pointer || i.op == op_type_array || i.op == op_type_runtime_array) {
          const uint32_t in = word(i, i.op == op_type_pointer ? 3 : 2);
          inner_[id] = in;
          carrying_type_[id] = carrying(in);
        } else if (i.op == op_type_struct || i.op == op_type_function) {
          for (uint32_t k = 2; k < i.n; ++k)
            if (carrying(word(i, k))) return error("a struct or function type (id %u) holds a cooperative matrix", id);
        } else if (i.op == op_type_int && i.n == 4 && word(i, 2) == 32 && word(i, 3) == 0 && !uint_type_ &&
                   !seen_matrix_type) {
          uint_type_ = id;
        }
      }
      if (!in_function && i.op == op_type_forward_pointer && carrying(word(i, 1)))
        return error("a forward pointer (id %u) to a cooperative matrix", word(i, 1));
      if (i.op == op_constant_true || i.op == op_constant_false) bool_constant_[word(i, 2)] = i.op == op_constant_true;
      if (has_result_type(i, in_function)) {
        const uint32_t type = word(i, 1), id = word(i, 2);
        if (!id_ok(id)) return error("a result id %u out of the bound (opcode %u)", id, i.op);
        type_of_[id] = type;
      }
      if (i.op == op_function_end) in_function = false;
    }
    return true;
  }

  // Which values, variables and pointers meet, and the uses multiply-adds give them.
  bool relate() {
    parent_.resize(ids_);
    std::iota(parent_.begin(), parent_.end(), 0u);
    std::vector<std::pair<uint32_t, uint32_t>> met;  // (id, use)
    bool in_function = false;
    for (const instruction& i : ins_) {
      if (i.op == op_function) in_function = true;
      if (i.op == op_function_end) in_function = false;
      switch (i.op) {
        case op_store:
        case op_copy_memory:
          if (carrying_value(word(i, 1)) || carrying_value(word(i, 2))) unite(word(i, 1), word(i, 2));
          continue;
        case op_coop_muladd_nv:
          if (i.n < 6) return error("an OpCooperativeMatrixMulAddNV of %u words", i.n);
          met.push_back({word(i, 3), use_a});
          met.push_back({word(i, 4), use_b});
          met.push_back({word(i, 5), use_acc});
          unite(word(i, 2), word(i, 5));
          continue;
        case op_function:
        case op_function_parameter:
        case op_function_call:
          if (carrying(word(i, 1))) return error("a function (id %u) takes or returns a cooperative matrix", word(i, 2));
          for (uint32_t k = 3; i.op == op_function_call && k < i.n; ++k)
            if (carrying_value(word(i, k))) return error("a cooperative matrix (id %u) passed to a function", word(i, k));
          continue;
        case op_coop_load_nv:
        case op_coop_length_nv:
          continue;
        default:
          break;
      }
      if (!has_result_type(i, in_function) || !carrying(word(i, 1))) continue;
      const uint32_t id = word(i, 2);
      switch (i.op) {
        case op_variable: unite(id, word(i, 4)); break;  // the initializer, if any
        case op_load:
        case op_access_chain:
        case op_in_bounds_access_chain:
        case op_ptr_access_chain: unite(id, word(i, 3)); break;
        case op_composite_insert: unite(id, word(i, 4)); break;
        default:
          for (uint32_t k = 3; k < i.n; ++k)
            if (carrying_value(word(i, k))) unite(id, word(i, k));
      }
    }
    uses_.assign(ids_, 0);
    for (const auto& [id, u] : met) {
      if (!carrying_value(id)) return error("a multiply-add operand (id %u) that is no cooperative matrix", id);
      uses_[find(id)] |= 1u << u;
    }
    for (uint32_t r = 0; r < ids_; ++r) {
      const uint32_t u = uses_[r];
      if (u & (u - 1)) {
        const int first = std::countr_zero(u), second = 31 - std::countl_zero(u);  // two of the uses
        char buf[200];
        std::snprintf(buf, sizeof buf, "one cooperative matrix (id %u) serves as %s and as %s of multiply-adds", r,
                      k_use_names[first], k_use_names[second]);
        error_ = buf;
        return false;
      }
    }
    return true;
  }

  // The use of a value (variable, pointer): what its set meets, the accumulator where nothing.
  uint32_t use_of(uint32_t id) {
    const uint32_t u = uses_[find(id)];
    return u == 0 ? use_acc : u == 1 ? use_a : u == 2 ? use_b : use_acc;
  }
  void need(uint32_t type, uint32_t u) {
    while (carrying(type)) {
      if (!variant_.emplace(std::make_pair(type, u), 0u).second) return;
      const auto it = inner_.find(type);
      if (it == inner_.end()) return;
      type = it->second;
    }
  }

  // The Khronos types each value needs, and fresh ids for them and for the use constants.
  bool assign_uses() {
    bool in_function = false;
    for (const instruction& i : ins_) {
      if (i.op == op_function) in_function = true;
      if (i.op == op_function_end) in_function = false;
      if (has_result_type(i, in_function) && carrying(word(i, 1))) need(word(i, 1), use_of(word(i, 2)));
      if (i.op == op_coop_length_nv && !carrying(word(i, 3)))
        return error("an OpCooperativeMatrixLengthNV of a non-matrix type %u", word(i, 3));
    }
    for (const instruction& i : ins_) {
      if (i.op != op_coop_length_nv) continue;
      uint32_t found = 0;
      for (uint32_t u = 0; u < 3; ++u) found += variant_.count({word(i, 3), u}) ? 1u : 0u;
      if (found > 1) return error("the length of matrix type %u, which serves more than one use", word(i, 3));
      if (found == 0) need(word(i, 3), use_acc);
    }
    uint32_t next = ids_;
    for (auto& [key, id] : variant_) id = next++;
    for (uint32_t& c : use_constant_) c = next++;
    bound_ = next;
    return true;
  }

  uint32_t variant(uint32_t type, uint32_t u) const {
    const auto it = variant_.find({type, u});
    return it == variant_.end() ? 0u : it->second;
  }
  uint32_t length_variant(uint32_t type) const {
    for (uint32_t u = 0; u < 3; ++u)
      if (uint32_t v = variant(type, u)) return v;
    return 0;
  }
  uint32_t layout(uint32_t column_major_id) {
    const auto it = bool_constant_.find(column_major_id);
    if (it == bool_constant_.end()) {
      error("a matrix load or store whose layout (id %u) is not a constant bool", column_major_id);
      return 0;
    }
    return use_constant_[it->second ? 1 : 0];  // ColumnMajorKHR = 1, RowMajorKHR = 0
  }

  static void put(std::vector<uint32_t>* out, uint32_t op, std::initializer_list<uint32_t> operands) {
    out->push_back(static_cast<uint32_t>((operands.size() + 1) << 16) | op);
    out->insert(out->end(), operands);
  }

  void emit(std::vector<uint32_t>* out) {
    out->assign(w_, w_ + 5);
    (*out)[3] = bound_;
    bool in_function = false;
    for (const instruction& i : ins_) {
      if (i.op == op_function) in_function = true;
      const uint32_t* iw = w_ + i.at;
      if (i.op == op_capability && i.n == 2 && iw[1] == cap_coop_nv) {
        put(out, op_capability, {cap_coop_khr});
      } else if (i.op == op_extension && i.n >= 2 &&
                 std::strncmp(reinterpret_cast<const char*>(iw + 1), k_ext_nv, (i.n - 1) * 4) == 0) {
        const std::vector<uint32_t> s = string_words(k_ext_khr);
        out->push_back(static_cast<uint32_t>((s.size() + 1) << 16) | op_extension);
        out->insert(out->end(), s.begin(), s.end());
      } else if (!in_function && is_type_declaration(i.op) && carrying(iw[1])) {
        for (uint32_t u = 0; u < 3; ++u) {  // the needed Khronos types, in place of the original
          const uint32_t v = variant(iw[1], u);
          if (!v) continue;
          if (i.op == op_type_coop_nv)
            put(out, op_type_coop_khr, {v, iw[2], iw[3], iw[4], iw[5], use_constant_[u]});
          else if (i.op == op_type_pointer)
            put(out, op_type_pointer, {v, iw[2], variant(iw[3], u)});
          else if (i.op == op_type_array)
            put(out, op_type_array, {v, variant(iw[2], u), iw[3]});
          else
            put(out, op_type_runtime_array, {v, variant(iw[2], u)});
        }
      } else if ((i.op == op_name || i.op == op_member_name || i.op == op_decorate || i.op == op_member_decorate) &&
                 i.n >= 2 && carrying(iw[1]) && type_of_[iw[1]] == 0) {
        // Names and decorations of the NVIDIA types go with them.
      } else if (i.op == op_coop_load_nv) {  // type result pointer stride column-major [memory]
        out->push_back((i.n << 16) | op_coop_load_khr);
        out->insert(out->end(), {variant(iw[1], use_of(iw[2])), iw[2], iw[3], layout(iw[5]), iw[4]});
        out->insert(out->end(), iw + 6, iw + i.n);
      } else if (i.op == op_coop_store_nv) {  // pointer object stride column-major [memory]
        out->push_back((i.n << 16) | op_coop_store_khr);
        out->insert(out->end(), {iw[1], iw[2], layout(iw[4]), iw[3]});
        out->insert(out->end(), iw + 5, iw + i.n);
      } else if (i.op == op_coop_muladd_nv) {
        put(out, op_coop_muladd_khr, {variant(iw[1], use_of(iw[2])), iw[2], iw[3], iw[4], iw[5]});
      } else if (i.op == op_coop_length_nv) {
        put(out, op_coop_length_khr, {iw[1], iw[2], length_variant(iw[3])});
      } else if (has_result_type(i, in_function) && carrying(iw[1])) {
        out->insert(out->end(), iw, iw + i.n);
        (*out)[out->size() - i.n + 1] = variant(iw[1], use_of(iw[2]));
      } else {
        out->insert(out->end(), iw, iw + i.n);
      }
      if (!in_function && i.op == op_type_int && iw[1] == uint_type_) {
        for (uint32_t u = 0; u < 3; ++u) put(out, op_constant, {uint_type_, use_constant_[u], u});
      }
      if (i.op == op_function_end) in_function = false;
    }
  }
};

}  // namespace

bool uses_coop_nv(const uint32_t* words, size_t n_words) {
  if (!words || n_words < 5 || words[0] != k_magic) return false;
  for (size_t at = 5; at < n_words;) {
    const uint32_t count = words[at] >> 16, op = words[at] & 0xffffu;
    if (count == 0) return false;
    if (op == op_capability && count == 2 && at + 1 < n_words && words[at + 1] == cap_coop_nv) return true;
    if (op == op_function) return false;  // capabilities come first
    at += count;
  }
  return false;
}

bool coop_nv_to_khr(const uint32_t* words, size_t n_words, std::vector<uint32_t>* out, std::string* why) {
  if (!words || !out) {
    if (why) *why = "no module or no output";
    return false;
  }
  return rewriter(words, n_words).run(out, why);
}

}  // namespace sa::vk

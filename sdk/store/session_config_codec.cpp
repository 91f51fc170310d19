#include "store/session_config_codec.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"

namespace sa::store {

namespace {

template <typename E>
struct choice {
  E value;
  const char* name;
};

constexpr choice<memory_kind> k_memories[] = {
    {memory_kind::dense, "dense"}, {memory_kind::streaming, "streaming"},
    {memory_kind::cascade, "cascade"}};
constexpr choice<cascade_reduction> k_reductions[] = {
    {cascade_reduction::max, "max"}, {cascade_reduction::mean, "mean"},
    {cascade_reduction::median, "median"}, {cascade_reduction::none, "none"}};
constexpr choice<sparse_method> k_methods[] = {{sparse_method::none, "none"},
                                               {sparse_method::quest, "quest"},
                                               {sparse_method::vattention, "vattention"},
                                               {sparse_method::oracle, "oracle"}};
constexpr choice<speculation> k_speculations[] = {
    {speculation::none, "none"}, {speculation::superset, "prr_superset"}, {speculation::strict, "prr_strict"}};
constexpr choice<select_granularity> k_granularities[] = {
    {select_granularity::per_head, "per_head"}, {select_granularity::per_group, "per_group"}};
constexpr choice<topk_source> k_topks[] = {{topk_source::quest, "quest"},
                                           {topk_source::oracle, "oracle"}};
constexpr choice<dtype> k_kv_types[] = {
    {dtype::f32, "f32"}, {dtype::f16, "f16"}, {dtype::bf16, "bf16"}};

template <typename E, size_t N>
const char* name_of(const choice<E> (&table)[N], E v) {
  for (const auto& c : table)
    if (c.value == v) return c.name;
  fail(SA_ERR_INTERNAL, "session config: a choice without a name");
}

// One setting: how to print it and how to parse it back into a config.
struct field {
  std::function<std::string(const session_config&)> print;
  std::function<bool(session_config&, const std::string&)> parse;  // false: bad value
};

std::string int_text(int64_t x) { return std::to_string(x); }
std::string float_text(float x) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08" PRIx32, std::bit_cast<uint32_t>(x));
  return buf;
}

bool parse_int(const std::string& s, int64_t lo, int64_t hi, int64_t& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end || x < lo || x > hi) return false;
  out = x;
  return true;
}

bool parse_float(const std::string& s, float& out) {
  if (s.size() != 10 || s.compare(0, 2, "0x") != 0) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long bits = std::strtoull(s.c_str() + 2, &end, 16);
  if (errno || *end) return false;
  out = std::bit_cast<float>(static_cast<uint32_t>(bits));
  return true;
}

template <typename E, size_t N>
bool parse_choice(const choice<E> (&table)[N], const std::string& s, E& out) {
  for (const auto& c : table)
    if (s == c.name) {
      out = c.value;
      return true;
    }
  return false;
}

// Accessors by lambda keep every setting on one line of the table below.
#define SA_INT(path) \
  field{[](const session_config& c) { return int_text(static_cast<int64_t>(c.path)); }, \
        [](session_config& c, const std::string& s) { \
          int64_t x; \
          if (!parse_int(s, INT32_MIN, INT32_MAX, x)) return false; \
          c.path = static_cast<decltype(c.path)>(x); \
          return true; \
        }}
#define SA_U64(path) \
  field{[](const session_config& c) { return std::to_string(c.path); }, \
        [](session_config& c, const std::string& s) { \
          if (s.empty() || s[0] == '-') return false; \
          errno = 0; \
          char* end = nullptr; \
          const unsigned long long x = std::strtoull(s.c_str(), &end, 10); \
          if (errno || *end) return false; \
          c.path = x; \
          return true; \
        }}
#define SA_FLOAT(path) \
  field{[](const session_config& c) { return float_text(c.path); }, \
        [](session_config& c, const std::string& s) { return parse_float(s, c.path); }}
#define SA_BOOL(path) \
  field{[](const session_config& c) { return std::string(c.path ? "1" : "0"); }, \
        [](session_config& c, const std::string& s) { \
          if (s != "0" && s != "1") return false; \
          c.path = s == "1"; \
          return true; \
        }}
// The KV type: a session always records the one it resolved; a store written before sessions
// had a choice lacks the key, and its K/V are f32 (decode_config's default).
#define SA_KV_TYPE(path, table) \
  field{[](const session_config& c) { return std::string(name_of(table, c.path.value_or(dtype::f32))); }, \
        [](session_config& c, const std::string& s) { \
          dtype t; \
          if (!parse_choice(table, s, t)) return false; \
          c.path = t; \
          return true; \
        }}
#define SA_CHOICE(path, table) \
  field{[](const session_config& c) { return std::string(name_of(table, c.path)); }, \
        [](session_config& c, const std::string& s) { return parse_choice(table, s, c.path); }}

const std::vector<std::pair<const char*, field>>& fields() {
  static const std::vector<std::pair<const char*, field>> f = {
      {"n_ctx", SA_INT(n_ctx)},
      {"n_batch", SA_INT(n_batch)},
      {"memory", SA_CHOICE(memory, k_memories)},
      {"n_sinks", SA_INT(n_sinks)},
      {"cache_tokens", SA_INT(cache_tokens)},
      {"n_cascades", SA_INT(n_cascades)},
      {"cascade_beta", SA_FLOAT(beta)},
      {"cascade_reduction", SA_CHOICE(reduction, k_reductions)},
      {"cascade_homogeneous", SA_BOOL(homogeneous)},
      {"sparse", SA_CHOICE(sparse.method, k_methods)},
      {"page_size", SA_INT(sparse.page_size)},
      {"budget_tokens", SA_INT(sparse.budget_tokens)},
      {"budget_ratio", SA_FLOAT(sparse.budget_ratio)},
      {"sink_pages", SA_INT(sparse.sink_pages)},
      {"local_pages", SA_INT(sparse.local_pages)},
      {"min_pages", SA_INT(sparse.min_pages)},
      {"dense_layers", SA_INT(sparse.dense_layers)},
      {"select_granularity", SA_CHOICE(sparse.granularity, k_granularities)},
      {"rectify_every", SA_INT(sparse.rectify_every)},
      {"vatt_epsilon", SA_FLOAT(sparse.epsilon)},
      {"vatt_delta", SA_FLOAT(sparse.delta)},
      {"vatt_pilot_ratio", SA_FLOAT(sparse.pilot_ratio)},
      {"vatt_topk", SA_CHOICE(sparse.topk, k_topks)},
      {"check_error", SA_BOOL(sparse.check_error)},
      {"retro_window", SA_INT(sparse.retro_window)},
      {"prr", SA_CHOICE(sparse.prr, k_speculations)},
      {"prr_ratio", SA_FLOAT(sparse.prr_ratio)},
      {"prr_calib_rows", SA_INT(sparse.prr_calib_rows)},
      {"sparse_seed", SA_U64(sparse.seed)},
      {"temperature", SA_FLOAT(sampling.temperature)},
      {"top_k", SA_INT(sampling.top_k)},
      {"top_p", SA_FLOAT(sampling.top_p)},
      {"seed", SA_U64(sampling.seed)},
      {"kv_type", SA_KV_TYPE(kv_type, k_kv_types)},
  };
  return f;
}

#undef SA_INT
#undef SA_U64
#undef SA_FLOAT
#undef SA_BOOL
#undef SA_CHOICE
#undef SA_KV_TYPE

}  // namespace

const char* memory_name(memory_kind k) { return name_of(k_memories, k); }

std::string encode_config(const session_config& c) {
  std::string out;
  for (const auto& [key, f] : fields()) out += std::string(key) + "=" + f.print(c) + "\n";
  return out;
}

session_config decode_config(const std::string& text, const std::string& what) {
  session_config c;
  c.kv_type = dtype::f32;  // stores written before the setting existed held f32 K/V
  std::set<std::string> seen;
  std::istringstream in(text);
  // An exception inside getline (no memory for the line) would otherwise only set badbit and
  // end the loop early: the settings not read yet would silently keep their defaults.
  in.exceptions(std::ios::badbit);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    const std::string key = line.substr(0, eq), value = eq == std::string::npos ? "" : line.substr(eq + 1);
    const auto& all = fields();
    const auto it = std::find_if(all.begin(), all.end(), [&](const auto& f) { return key == f.first; });
    if (eq == std::string::npos || it == all.end())
      fail(SA_ERR_STORE, "%s: setting '%s' is not known to this version of sa", what.c_str(),
           line.c_str());
    if (!seen.insert(key).second)
      fail(SA_ERR_STORE, "%s: setting '%s' appears twice", what.c_str(), key.c_str());
    if (!it->second.parse(c, value))
      fail(SA_ERR_STORE, "%s: setting '%s' has the bad value '%s'", what.c_str(), key.c_str(),
           value.c_str());
  }
  return c;
}

}  // namespace sa::store

#include "policy/prr_profile.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <locale>
#include <sstream>

#include "core/error.h"

namespace sa {

namespace {
constexpr const char* k_magic = "sa-prr-profile";
constexpr int k_version = 1;

// A model's fingerprint as the file writes it: 16 lower-case hex digits.
std::string hex16(uint64_t v) {
  char fp[17];
  std::snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(v));
  return fp;
}

const char* granularity_word(select_granularity g) { return g == select_granularity::per_group ? "group" : "head"; }

// Streams in the C locale, whatever locale the host program set.
std::ostringstream c_out() {
  std::ostringstream s;
  s.imbue(std::locale::classic());
  s << std::setprecision(9);
  return s;
}

// Value of the line through points (x0, y0), (x1, y1) at x (x0 != x1).
double through(double x0, double y0, double x1, double y1, double x) { return y0 + (y1 - y0) * (x - x0) / (x1 - x0); }

// Reads the tokens of one line, failing with the file's name and the line's number.
class line_reader {
 public:
  line_reader(const std::string& path, int number, const std::string& text)
      : path_(path), number_(number), in_(text) {
    in_.imbue(std::locale::classic());
  }
  [[noreturn]] void bad(const char* what) const {
    fail(SA_ERR_FORMAT, "PRR profile %s, line %d: %s", path_.c_str(), number_, what);
  }
  std::string word(const char* what) {
    std::string w;
    if (!(in_ >> w)) bad(what);
    return w;
  }
  void expect(const char* w) {
    if (word(w) != w) bad((std::string("expected '") + w + "'").c_str());
  }
  template <typename T>
  T number(const char* what) {
    // Whole tokens only: "12abc" is not 12.
    const std::string w = word(what);
    std::istringstream s(w);
    s.imbue(std::locale::classic());
    T v{};
    if (!(s >> v) || s.peek() != std::char_traits<char>::eof()) bad(what);
    return v;
  }
  template <typename T>
  T in_range(const char* what, T lo, T hi) {
    const T v = number<T>(what);
    if (!(v >= lo && v <= hi)) bad(what);
    return v;
  }
  // The next ratio in (0, 16], or 0 at the end of the line.
  float ratio() {
    std::string w;
    if (!(in_ >> w)) return 0.0f;
    std::istringstream s(w);
    s.imbue(std::locale::classic());
    float v = 0;
    if (!(s >> v) || s.peek() != std::char_traits<char>::eof() || !(v > 0.0f && v <= 16.0f))
      bad("a ratio is not a number in (0, 16]");
    return v;
  }
  std::string rest() {
    std::string r;
    std::getline(in_ >> std::ws, r);
    return r;
  }
  bool done() {
    std::string w;
    return !(in_ >> w);
  }

 private:
  std::string path_;
  int number_;
  std::istringstream in_;
};
}  // namespace

std::string prr_profile_key::settings() const {
  std::ostringstream s = c_out();
  s << "select " << granularity_word(granularity) << " page " << page_size << " budget_tokens " << budget_tokens
    << " budget_ratio " << budget_ratio << " sink " << sink_pages << " local " << local_pages << " min "
    << min_pages << " kv " << traits(kv_type).name;
  return s.str();
}

prr_profile_key prr_key(uint64_t model, const std::string& backend, const std::string& device,
                        const sparse_config& c, dtype kv_type) {
  prr_profile_key k;
  k.model = model;
  k.backend = backend;
  k.device = device;
  k.granularity = c.granularity;
  k.page_size = c.page_size;
  k.budget_tokens = c.budget_tokens;
  // A fixed token budget makes the ratio irrelevant: keys compare equal whatever it was.
  k.budget_ratio = c.budget_tokens > 0 ? 0.0f : c.budget_ratio;
  k.sink_pages = c.sink_pages;
  k.local_pages = c.local_pages;
  k.min_pages = c.min_pages;
  k.kv_type = kv_type;
  return k;
}

float prr_profile::ratio_at(int64_t n_keys) const {
  if (rows.empty() || ratios.empty()) fail(SA_ERR_INTERNAL, "prr_profile::ratio_at: an empty profile");
  // The two rows whose line gives the times at n_keys: those around it, or the nearest two.
  size_t hi = 1;
  while (hi + 1 < rows.size() && rows[hi].keys < n_keys) ++hi;
  const size_t lo = hi - 1;
  auto at = [&](double y_lo, double y_hi) {
    if (rows.size() == 1) return y_lo;
    return std::max(0.0, through(static_cast<double>(rows[lo].keys), y_lo, static_cast<double>(rows[hi].keys),
                                 y_hi, static_cast<double>(n_keys)));
  };
  const row& a = rows[lo];
  const row& b = rows.size() == 1 ? rows[lo] : rows[hi];
  const double sel = at(a.select_us, b.select_us);
  std::vector<double> spec(ratios.size());
  for (size_t j = 0; j < ratios.size(); ++j) spec[j] = at(a.speculate_us[j], b.speculate_us[j]);
  // The largest grid point that fits, then toward the next one while the line stays under sel.
  size_t fit = ratios.size();
  for (size_t j = ratios.size(); j-- > 0;)
    if (spec[j] <= sel) {
      fit = j;
      break;
    }
  if (fit == ratios.size()) return ratios.front();
  if (fit + 1 == ratios.size()) return ratios.back();
  const double r = through(spec[fit], ratios[fit], spec[fit + 1], ratios[fit + 1], sel);
  return static_cast<float>(std::clamp(r, static_cast<double>(ratios[fit]), static_cast<double>(ratios[fit + 1])));
}

std::vector<prr_profile> read_prr_profiles(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(SA_ERR_IO, "cannot open the PRR profile %s: %s", path.c_str(), std::strerror(errno));
  std::vector<prr_profile> out;
  std::string text;
  int number = 0;
  // The next line that is not blank or a comment; false at the end of the file.
  auto next = [&]() {
    while (std::getline(in, text)) {
      ++number;
      const size_t at = text.find_first_not_of(" \t\r");
      if (at != std::string::npos && text[at] != '#') return true;
    }
    return false;
  };
  auto at_end = [&](const char* what) {
    fail(SA_ERR_FORMAT, "PRR profile %s ends before %s", path.c_str(), what);
  };
  if (!next()) at_end("its first line");
  {
    line_reader r(path, number, text);
    r.expect(k_magic);
    if (r.number<int>("the version") != k_version) r.bad("a version this library does not read");
    if (!r.done()) r.bad("more than the magic and the version");
  }
  while (next()) {
    prr_profile p;
    {
      line_reader r(path, number, text);
      r.expect("profile");
      if (!r.done()) r.bad("more after 'profile'");
    }
    if (!next()) at_end("a profile's model line");
    {
      line_reader r(path, number, text);
      r.expect("model");
      const std::string fp = r.word("the model's fingerprint");
      if (fp.size() != 16 || fp.find_first_not_of("0123456789abcdef") != std::string::npos)
        r.bad("the model's fingerprint is not 16 lower-case hex digits");
      p.key.model = std::stoull(fp, nullptr, 16);
      r.expect("heads");
      p.n_heads = r.in_range<int32_t>("heads", 1, 1 << 16);
      r.expect("kv_heads");
      p.n_kv_heads = r.in_range<int32_t>("kv_heads", 1, p.n_heads);
      r.expect("head_dim");
      p.head_dim = r.in_range<int32_t>("head_dim", 1, 1 << 16);
      if (!r.done()) r.bad("more after head_dim");
    }
    if (!next()) at_end("a profile's device line");
    {
      line_reader r(path, number, text);
      r.expect("device");
      p.key.backend = r.word("the backend");
      if (p.key.backend != "cuda" && p.key.backend != "vulkan" && p.key.backend != "cpu")
        r.bad("the backend is not cuda, vulkan or cpu");
      p.key.device = r.rest();
      while (!p.key.device.empty() && (p.key.device.back() == '\r' || p.key.device.back() == ' '))
        p.key.device.pop_back();
      if (p.key.device.empty()) r.bad("no device name");
    }
    if (!next()) at_end("a profile's select line");
    {
      line_reader r(path, number, text);
      r.expect("select");
      const std::string g = r.word("head or group");
      if (g != "head" && g != "group") r.bad("select is not head or group");
      p.key.granularity = g == "group" ? select_granularity::per_group : select_granularity::per_head;
      r.expect("page");
      p.key.page_size = r.in_range<int32_t>("page", 1, 1024);
      r.expect("budget_tokens");
      p.key.budget_tokens = r.in_range<int32_t>("budget_tokens", 0, 1 << 30);
      r.expect("budget_ratio");
      p.key.budget_ratio = r.in_range<float>("budget_ratio", 0.0f, 1.0f);
      r.expect("sink");
      p.key.sink_pages = r.in_range<int32_t>("sink", 0, 1 << 20);
      r.expect("local");
      p.key.local_pages = r.in_range<int32_t>("local", 1, 1 << 20);
      r.expect("min");
      p.key.min_pages = r.in_range<int32_t>("min", 1, 1 << 20);
      r.expect("kv");
      const std::string kv = r.word("the KV type");
      if (kv == "f32") p.key.kv_type = dtype::f32;
      else if (kv == "f16") p.key.kv_type = dtype::f16;
      else if (kv == "bf16") p.key.kv_type = dtype::bf16;
      else r.bad("kv is not f32, f16 or bf16");
      if (!r.done()) r.bad("more after kv");
    }
    if (!next()) at_end("a profile's ratios line");
    {
      line_reader r(path, number, text);
      r.expect("ratios");
      while (const float ratio = r.ratio()) {
        if (!p.ratios.empty() && ratio <= p.ratios.back()) r.bad("ratios must ascend");
        p.ratios.push_back(ratio);
      }
      if (p.ratios.empty()) r.bad("no ratios");
    }
    for (;;) {
      if (!next()) at_end("a profile's 'end'");
      line_reader r(path, number, text);
      const std::string w = r.word("keys or end");
      if (w == "end") {
        if (!r.done()) r.bad("more after 'end'");
        break;
      }
      if (w != "keys") r.bad("expected 'keys' or 'end'");
      prr_profile::row row;
      row.keys = r.in_range<int64_t>("keys", 1, int64_t{1} << 40);
      if (!p.rows.empty() && row.keys <= p.rows.back().keys) r.bad("keys must ascend");
      r.expect("select");
      row.select_us = r.in_range<double>("select's time", 0.0, 1e12);
      r.expect("speculate");
      for (size_t j = 0; j < p.ratios.size(); ++j) row.speculate_us.push_back(r.in_range<double>("a time", 0.0, 1e12));
      if (!r.done()) r.bad("more times than ratios");
      p.rows.push_back(std::move(row));
    }
    if (p.rows.empty()) fail(SA_ERR_FORMAT, "PRR profile %s, line %d: a profile without keys lines", path.c_str(), number);
    out.push_back(std::move(p));
  }
  if (in.bad()) fail(SA_ERR_IO, "cannot read the PRR profile %s", path.c_str());
  return out;
}

void write_prr_profiles(const std::string& path, const std::vector<prr_profile>& profiles) {
  std::ostringstream s = c_out();
  s << k_magic << ' ' << k_version << '\n'
    << "# PRR's speculation budget: microseconds per sparse layer of the selection and of the attention\n"
    << "# over the predicted pages for each ratio r, by context length (sa-bench gpu prr-profile)\n";
  for (const prr_profile& p : profiles) {
    s << "profile\nmodel " << hex16(p.key.model) << " heads " << p.n_heads << " kv_heads " << p.n_kv_heads << " head_dim "
      << p.head_dim << "\ndevice " << p.key.backend << ' ' << p.key.device << '\n'
      << p.key.settings() << "\nratios";
    for (float r : p.ratios) s << ' ' << r;
    s << '\n';
    for (const prr_profile::row& row : p.rows) {
      // Times to the nanosecond (they round-trip as written, which is all a reader needs).
      s << "keys " << row.keys << std::fixed << std::setprecision(3) << " select " << row.select_us << " speculate";
      for (double t : row.speculate_us) s << ' ' << t;
      s << std::defaultfloat << std::setprecision(9) << '\n';
    }
    s << "end\n";
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) fail(SA_ERR_IO, "cannot create %s: %s", tmp.c_str(), std::strerror(errno));
    out << s.str();
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      fail(SA_ERR_IO, "cannot write %s", tmp.c_str());
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    fail(SA_ERR_IO, "cannot replace %s: %s", path.c_str(), std::strerror(e));
  }
}

prr_profile load_prr_profile(const std::string& path, const prr_profile_key& key) {
  const std::vector<prr_profile> all = read_prr_profiles(path);
  std::string held;
  for (const prr_profile& p : all) {
    if (p.key == key) return p;
    held += "\n  model " + hex16(p.key.model) + " on " + p.key.backend + " " + p.key.device + ": " + p.key.settings();
  }
  fail(SA_ERR_INVALID_ARG, "PRR profile %s has no profile for model %s on %s %s with %s; it holds:%s", path.c_str(),
       hex16(key.model).c_str(), key.backend.c_str(), key.device.c_str(), key.settings().c_str(), held.empty() ? " none" : held.c_str());
}

}  // namespace sa

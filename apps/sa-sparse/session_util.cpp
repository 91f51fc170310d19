#include "session_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace sparse_app {

abi_error::abi_error(const std::string& what, sa_status status, const std::string& message)
    : std::runtime_error(what + ": " + sa_errstr(status) +
                         (message.empty() ? "" : ": " + message)) {}

void check(sa_status status, const sa_session* s, const std::string& what) {
  if (status == SA_OK || status == SA_DONE) return;
  throw abi_error(what, status, s ? sa_session_errmsg(s) : sa_last_error());
}

// ---- methods --------------------------------------------------------------------------------

method_spec parse_method(const std::string& text, int32_t default_rectify) {
  std::string name = text;
  int32_t f = default_rectify;
  bool has_f = false;
  if (const size_t colon = text.find(':'); colon != std::string::npos) {
    name = text.substr(0, colon);
    try {
      size_t used = 0;
      f = std::stoi(text.substr(colon + 1), &used);
      if (used != text.size() - colon - 1 || f < 1) throw std::invalid_argument("f");
    } catch (const std::exception&) {
      throw usage_error("method '" + text +
                        "': the rectification period after ':' must be a positive integer");
    }
    has_f = true;
  }
  method_spec m;
  if (name == "dense") {
  } else if (name == "quest") {
    m.sparse = SA_SPARSE_QUEST;
  } else if (name == "quest-group") {
    m.sparse = SA_SPARSE_QUEST;
    m.granularity = SA_SELECT_PER_GROUP;
  } else if (name == "quest+resa") {
    m.sparse = SA_SPARSE_QUEST;
    m.rectify_every = f;
  } else if (name == "quest-group+resa") {
    m.sparse = SA_SPARSE_QUEST;
    m.granularity = SA_SELECT_PER_GROUP;
    m.rectify_every = f;
  } else if (name == "quest+retro" || name == "quest-group+retro") {
    m.sparse = SA_SPARSE_QUEST;
    if (name == "quest-group+retro") m.granularity = SA_SELECT_PER_GROUP;
    m.retro_window = has_f ? f : 2;
    if (m.retro_window < 2) throw usage_error("method '" + text + "': the window after ':' must be >= 2");
  } else if (name == "quest+prr" || name == "quest+prr-strict" || name == "quest-group+prr") {
    m.sparse = SA_SPARSE_QUEST;
    m.speculation = SA_SPECULATION_PRR;
    if (name == "quest-group+prr") m.granularity = SA_SELECT_PER_GROUP;
    if (name == "quest+prr-strict") m.prr_mode = SA_PRR_STRICT;
  } else if (name == "vattention") {
    m.sparse = SA_SPARSE_VATTENTION;
  } else if (name == "vattention-oracle") {
    m.sparse = SA_SPARSE_VATTENTION;
    m.vatt_topk = SA_TOPK_ORACLE;
  } else if (name == "oracle") {
    m.sparse = SA_SPARSE_ORACLE;
  } else {
    throw usage_error("unknown method '" + text +
                      "' (dense, quest, quest-group, quest+resa[:F], quest-group+resa[:F], "
                      "quest+retro[:W], quest-group+retro[:W], quest+prr, quest+prr-strict, quest-group+prr, "
                      "vattention, vattention-oracle, oracle)");
  }
  if (has_f && m.rectify_every == 0 && m.retro_window == 0)
    throw usage_error("method '" + text + "': only the +resa and +retro methods take ':N'");
  m.label = m.rectify_every > 0 ? name + ":" + std::to_string(m.rectify_every)
            : m.retro_window > 0 ? name + ":" + std::to_string(m.retro_window)
                                 : name;
  return m;
}

std::vector<method_spec> parse_methods(const std::string& csv, int32_t default_rectify) {
  std::vector<method_spec> out;
  for (const std::string& item : split_csv(csv)) out.push_back(parse_method(item, default_rectify));
  if (out.empty()) throw usage_error("an empty list of methods");
  return out;
}

// ---- handles --------------------------------------------------------------------------------

model::model(const std::string& path) : path_(path) {
  check(sa_model_load(path.c_str(), nullptr, &m_), nullptr, "loading " + path);
  desc_.struct_size = sizeof desc_;
  const sa_status st = sa_model_info(m_, &desc_);
  if (st != SA_OK) {
    sa_model_destroy(m_);
    check(st, nullptr, "sa_model_info");
  }
}

model::~model() { sa_model_destroy(m_); }

std::vector<int32_t> model::tokenize(const std::string& text, bool add_special) const {
  const uint32_t flags = add_special ? SA_TOKENIZE_ADD_SPECIAL : 0u;
  size_t n = 0;
  sa_status st = sa_tokenize(m_, text.data(), text.size(), flags, nullptr, 0, &n);
  if (st != SA_OK && st != SA_ERR_BUFFER_TOO_SMALL) check(st, nullptr, "sa_tokenize");
  std::vector<int32_t> tokens(n);
  check(sa_tokenize(m_, text.data(), text.size(), flags, tokens.data(), tokens.size(), &n), nullptr,
        "sa_tokenize");
  tokens.resize(n);
  return tokens;
}

std::string model::detokenize(std::span<const int32_t> tokens) const {
  sa_detokenizer* d = nullptr;
  check(sa_detokenizer_create(m_, 0, &d), nullptr, "sa_detokenizer_create");
  std::string text;
  std::vector<char> buf(4096);
  size_t n = 0;
  for (int32_t t : tokens)
    if (sa_detokenizer_push(d, t, buf.data(), buf.size(), &n) == SA_OK) text.append(buf.data(), n);
  if (sa_detokenizer_flush(d, buf.data(), buf.size(), &n) == SA_OK) text.append(buf.data(), n);
  sa_detokenizer_destroy(d);
  return text;
}

session::session(const model& m, const method_spec& method, const session_knobs& k)
    : method_(method) {
  sa_session_params p;
  sa_session_params_init(&p);
  p.backend = k.backend;
  p.n_threads = k.n_threads;
  p.n_ctx = k.n_ctx;
  p.memory = SA_MEMORY_FULL;
  p.temperature = 0.0f;  // greedy
  p.seed = k.seed;
  p.sparse = method.sparse;
  p.select_granularity = method.granularity;
  p.rectify_every = method.rectify_every;
  p.vatt_topk = method.vatt_topk;
  p.budget_ratio = static_cast<float>(k.budget_ratio);
  p.dense_layers = k.dense_layers;
  p.vatt_epsilon = k.vatt_epsilon;
  p.vatt_delta = k.vatt_delta;
  p.vatt_pilot_ratio = k.vatt_pilot_ratio;
  p.check_error = k.check_error;
  if (method.retro_window > 0) {
    p.correction = SA_CORRECTION_RETRO;
    p.retro_window = method.retro_window;
  }
  p.speculation = method.speculation;
  p.prr_mode = method.prr_mode;
  p.prr_ratio = k.prr_ratio;
  check(sa_session_create(m.get(), &p, &s_), nullptr, "creating a session for " + method.label);
}

session::~session() { sa_session_destroy(s_); }

void session::reset() { check(sa_session_reset(s_), s_, method_.label + ": sa_session_reset"); }

void session::prefill(std::span<const int32_t> tokens) {
  check(sa_prefill(s_, tokens.data(), tokens.size(), nullptr, nullptr), s_,
        method_.label + ": sa_prefill of " + std::to_string(tokens.size()) + " tokens");
}

int32_t session::step(int32_t token_in) {
  int32_t out = -1;
  check(sa_decode_step(s_, token_in, &out), s_, method_.label + ": sa_decode_step");
  return out;
}

int32_t session::sample() {
  int32_t out = -1;
  check(sa_sample(s_, &out), s_, method_.label + ": sa_sample");
  return out;
}

std::span<const float> session::logits() const {
  int32_t n = 0;
  const float* l = sa_session_logits(s_, &n);
  if (!l) throw abi_error(method_.label + ": sa_session_logits", SA_ERR_MISUSE, "no logits");
  return {l, static_cast<size_t>(n)};
}

sa_stats session::stats() const {
  sa_stats st{};
  st.struct_size = sizeof st;
  check(sa_session_stats(s_, &st), s_, method_.label + ": sa_session_stats");
  return st;
}

const std::vector<sa_head_stat>& session::head_stats() {
  size_t n = 0;
  check(sa_session_head_stats(s_, nullptr, 0, &n), s_, method_.label + ": sa_session_head_stats");
  heads_.resize(n);
  check(sa_session_head_stats(s_, heads_.data(), heads_.size(), &n), s_,
        method_.label + ": sa_session_head_stats");
  heads_.resize(std::min(n, heads_.size()));
  return heads_;
}

void density_meter::add(const session& s) {
  const sa_stats st = s.stats();
  attended += st.sparse_keys_attended;
  total += st.sparse_keys_total;
  ++steps;
  if (st.sparse_keys_total > 0) ++sparse_steps;
}

double density_meter::density() const {
  return total ? static_cast<double>(attended) / static_cast<double>(total) : 1.0;
}

// ---- distributions ------------------------------------------------------------------------------

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

namespace {
double log_sum_exp(std::span<const float> x) {
  double m = -INFINITY;
  for (float v : x) m = std::max(m, double{v});
  double s = 0;
  for (float v : x) s += std::exp(double{v} - m);
  return m + std::log(s);
}
}  // namespace

double log_softmax_at(std::span<const float> logits, int32_t token) {
  return double{logits[static_cast<size_t>(token)]} - log_sum_exp(logits);
}

double kl_divergence(std::span<const float> p, std::span<const float> q) {
  const double lp = log_sum_exp(p), lq = log_sum_exp(q);
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double a = double{p[i]} - lp, b = double{q[i]} - lq;
    kl += std::exp(a) * (a - b);
  }
  return std::max(0.0, kl);  // rounding can leave a tiny negative for identical inputs
}

// ---- helpers ------------------------------------------------------------------------------------

std::vector<std::string> split_csv(const std::string& csv) {
  std::vector<std::string> out;
  std::stringstream ss(csv);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

double parse_fraction(const std::string& text) {
  try {
    size_t used = 0;
    double v = 0;
    if (const size_t slash = text.find('/'); slash != std::string::npos) {
      const double a = std::stod(text.substr(0, slash), &used);
      if (used != slash) throw std::invalid_argument("num");
      const double b = std::stod(text.substr(slash + 1), &used);
      if (used != text.size() - slash - 1 || b == 0) throw std::invalid_argument("den");
      v = a / b;
    } else {
      v = std::stod(text, &used);
      if (used != text.size()) throw std::invalid_argument("tail");
    }
    return v;
  } catch (const std::exception&) {
    throw usage_error("'" + text + "' is not a number or a fraction like 1/16");
  }
}

std::vector<double> parse_fractions(const std::string& csv) {
  std::vector<double> out;
  for (const std::string& s : split_csv(csv)) out.push_back(parse_fraction(s));
  return out;
}

std::vector<int64_t> parse_ints(const std::string& csv) {
  std::vector<int64_t> out;
  for (const std::string& s : split_csv(csv)) {
    try {
      size_t used = 0;
      out.push_back(std::stoll(s, &used));
      if (used != s.size()) throw std::invalid_argument("tail");
    } catch (const std::exception&) {
      throw usage_error("'" + s + "' is not an integer");
    }
  }
  return out;
}

std::string fraction_label(double r) {
  char buf[32];
  if (r > 0 && r <= 1) {
    const double inv = 1.0 / r;
    if (std::fabs(inv - std::round(inv)) < 1e-6) {
      std::snprintf(buf, sizeof buf, "1/%.0f", std::round(inv));
      return r == 1 ? "1" : buf;
    }
  }
  std::snprintf(buf, sizeof buf, "%.4g", r);
  return buf;
}

progress::progress(std::string label, uint64_t total)
    : label_(std::move(label)), total_(total), start_(std::chrono::steady_clock::now()) {}

void progress::update(uint64_t done, const std::string& detail) {
  const double s = seconds_since(start_);
  const double eta = done > 0 ? s * static_cast<double>(total_ - std::min(done, total_)) /
                                    static_cast<double>(done)
                              : 0.0;
  std::fprintf(stderr, "\r%s %llu/%llu  %6.1fs  ETA %5.0fs  %-40s", label_.c_str(),
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_), s,
               eta, detail.c_str());
  std::fflush(stderr);
}

void progress::finish() {
  std::fprintf(stderr, "\r%s done in %.1fs%-60s\n", label_.c_str(), seconds_since(start_), "");
  std::fflush(stderr);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace sparse_app

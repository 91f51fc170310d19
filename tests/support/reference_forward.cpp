#include "reference_forward.h"

#include <algorithm>
#include <cmath>

#include "quant/quants.h"

namespace sa_test {

reference_forward::reference_forward(const sa::model& m)
    : m_(m), hp_(m.hp()), k_(static_cast<size_t>(m.hp().n_layers)), v_(k_.size()) {}

reference_forward::vec reference_forward::load(const sa::weight& w) const {
  const sa::gguf::tensor_info& info = *w.info;
  std::vector<float> f(static_cast<size_t>(info.n_elements()));
  const int64_t cols = info.ne[0], rows = info.n_elements() / cols;
  for (int64_t r = 0; r < rows; ++r)
    sa::dequantize_row(info.type, m_.file().bytes() + w.offset + r * sa::row_bytes(info.type, cols),
                       f.data() + r * cols, cols);
  return vec(f.begin(), f.end());
}

reference_forward::vec reference_forward::matvec(const sa::weight& w, const vec& x) const {
  const vec a = load(w);
  const int64_t cols = w.info->ne[0], rows = w.info->ne[1];
  vec y(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[r] += a[r * cols + c] * x[c];
  return y;
}

reference_forward::vec reference_forward::rmsnorm(const vec& x, const vec& w) const {
  double ss = 0;
  for (double e : x) ss += e * e;
  const double inv = 1 / std::sqrt(ss / static_cast<double>(x.size()) + hp_.rms_eps);
  vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

void reference_forward::per_head_norm(vec& x, const vec& w, int64_t heads) const {
  const int64_t hd = hp_.head_dim;
  for (int64_t h = 0; h < heads; ++h) {
    const vec y = rmsnorm(vec(x.begin() + h * hd, x.begin() + (h + 1) * hd), w);
    std::copy(y.begin(), y.end(), x.begin() + h * hd);
  }
}

// llama: adjacent pairs (2i, 2i+1); qwen2/qwen3: halves (i, i + d/2).
void reference_forward::rope(vec& x, int64_t heads, int64_t pos) const {
  const int64_t hd = hp_.head_dim, half = hd / 2;
  const bool adjacent = hp_.architecture == sa::arch::llama;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i) {
      const double th = pos * std::pow(double{hp_.rope.freq_base}, -2.0 * i / hd);
      const int64_t a = h * hd + (adjacent ? 2 * i : i), b = h * hd + (adjacent ? 2 * i + 1 : i + half);
      const double x0 = x[a], x1 = x[b];
      x[a] = x0 * std::cos(th) - x1 * std::sin(th);
      x[b] = x0 * std::sin(th) + x1 * std::cos(th);
    }
}

std::vector<std::vector<double>> reference_forward::process(const std::vector<int32_t>& chunk,
                                                            const std::vector<int64_t>& held) {
  const int64_t d = hp_.n_embd, hd = hp_.head_dim, H = hp_.n_heads, KV = hp_.n_kv_heads;
  const int64_t n = static_cast<int64_t>(chunk.size()), S = static_cast<int64_t>(held.size());
  const vec embd = load(m_.weights().token_embd);
  std::vector<vec> x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t)
    x[t] = vec(embd.begin() + chunk[t] * d, embd.begin() + (chunk[t] + 1) * d);
  probs_.assign(m_.weights().layers.size(),
                std::vector<std::vector<vec>>(static_cast<size_t>(H), std::vector<vec>(n)));
  for (size_t l = 0; l < m_.weights().layers.size(); ++l) {
    const sa::layer_weights& L = m_.weights().layers[l];
    std::vector<vec> q(n);
    for (int64_t t = 0; t < n; ++t) {
      const vec xn = rmsnorm(x[t], load(L.attn_norm));
      q[t] = matvec(L.wq, xn);
      vec k = matvec(L.wk, xn), v = matvec(L.wv, xn);
      if (L.bq.info) {
        const vec bq = load(L.bq), bk = load(L.bk), bv = load(L.bv);
        for (size_t i = 0; i < q[t].size(); ++i) q[t][i] += bq[i];
        for (size_t i = 0; i < k.size(); ++i) k[i] += bk[i], v[i] += bv[i];
      }
      if (L.q_norm.info) {
        per_head_norm(q[t], load(L.q_norm), H);
        per_head_norm(k, load(L.k_norm), KV);
      }
      rope(q[t], H, S + t);
      k_[l][next_ + t] = k;
      v_[l][next_ + t] = v;
    }
    // Keys in position order: held tokens, then the chunk.
    std::vector<vec> keys, values;
    for (int64_t i = 0; i < S + n; ++i) {
      const int64_t token = i < S ? held[i] : next_ + (i - S);
      vec k = k_[l].at(token);
      rope(k, KV, i);
      keys.push_back(k);
      values.push_back(v_[l].at(token));
    }
    for (int64_t t = 0; t < n; ++t) {
      vec att(static_cast<size_t>(H * hd), 0.0);
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / KV);
        const int64_t len = S + t + 1;
        std::vector<double> s(static_cast<size_t>(len));
        double mx = -INFINITY;
        for (int64_t u = 0; u < len; ++u) {
          double dot = 0;
          for (int64_t e = 0; e < hd; ++e) dot += q[t][h * hd + e] * keys[u][g * hd + e];
          s[u] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[u]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t u = 0; u < len; ++u)
          for (int64_t e = 0; e < hd; ++e) att[h * hd + e] += s[u] / sum * values[u][g * hd + e];
        vec& p = probs_[l][h][t];
        p.resize(s.size());
        for (size_t u = 0; u < s.size(); ++u) p[u] = s[u] / sum;
      }
      const vec o = matvec(L.wo, att);
      for (size_t i = 0; i < o.size(); ++i) x[t][i] += o[i];
      const vec xn = rmsnorm(x[t], load(L.ffn_norm));
      vec gate = matvec(L.gate, xn);
      const vec up = matvec(L.up, xn);
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
      const vec dn = matvec(L.down, gate);
      for (size_t i = 0; i < dn.size(); ++i) x[t][i] += dn[i];
    }
  }
  next_ += n;
  std::vector<std::vector<double>> logits;
  for (int64_t t = 0; t < n; ++t)
    logits.push_back(matvec(m_.weights().output, rmsnorm(x[t], load(m_.weights().output_norm))));
  return logits;
}

std::vector<std::vector<double>> reference_forward::run(const std::vector<int32_t>& tokens) {
  return process(tokens, {});
}

}  // namespace sa_test

// A naive double-precision forward pass written from the architecture's definition, the
// independent reference for the SDK's forward and memories.
//
// process() runs one chunk: row r attends to the keys of the `held` tokens (earlier tokens,
// listed in position order: held[i] sits at RoPE position i) and to chunk rows 0..r (at
// positions held.size() + r). A token's raw keys and values are kept from the pass that
// processed it, as a KV cache does. Dense decoding is held = every earlier token.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "model/model.h"

namespace sa_test {

class reference_forward {
 public:
  explicit reference_forward(const sa::model& m);

  // Logits [n_vocab] of every chunk row. Chunk tokens get indices next_index() ...
  std::vector<std::vector<double>> process(const std::vector<int32_t>& chunk,
                                           const std::vector<int64_t>& held);
  int64_t next_index() const { return next_; }

  // Attention probabilities of the last process() call: [layer][query head][row][key], keys
  // in position order (held tokens, then the chunk's rows up to the row itself).
  const std::vector<std::vector<std::vector<std::vector<double>>>>& last_probs() const {
    return probs_;
  }

  // Convenience: dense processing of a whole sequence in one chunk.
  std::vector<std::vector<double>> run(const std::vector<int32_t>& tokens);

 private:
  using vec = std::vector<double>;
  vec load(const sa::weight& w) const;
  vec matvec(const sa::weight& w, const vec& x) const;
  vec rmsnorm(const vec& x, const vec& w) const;
  void per_head_norm(vec& x, const vec& w, int64_t heads) const;
  void rope(vec& x, int64_t heads, int64_t pos) const;

  const sa::model& m_;
  const sa::hparams& hp_;
  int64_t next_ = 0;
  // [layer] -> token index -> raw (pre-RoPE) key / value [n_kv_heads * head_dim]
  std::vector<std::map<int64_t, vec>> k_, v_;
  std::vector<std::vector<std::vector<std::vector<double>>>> probs_;
};

}  // namespace sa_test

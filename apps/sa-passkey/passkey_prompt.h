// The passkey-retrieval prompt of the Cascading KV Cache paper, in the exact wording the
// shipped model was trained on (models/README.md, "Passkey prompt"):
//
//   <s>There is an important pass key hidden inside a lot of irrelevant text. Find it and
//   memorize it. I will quiz you about the pass key later.  w w w ... The pass key is 12345.
//   Remember it. 12345 is the pass key. w w w ...
//   What is the pass key? The pass key is            -> answer " 12345"
//
// Filler words are random lowercase dictionary words, each " word" tokenized on its own (a
// space followed by letters is always one pre-token, so this equals tokenizing the whole text).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sa/sa.h"

struct passkey_case {
  std::vector<int32_t> tokens;  // the prompt, ending with "... The pass key is"
  std::string key;              // five digits
  double depth = 0;             // where the needle sits, as a fraction of the filler
};

class passkey_builder {
 public:
  // Loads the word list (one word per line; keeps lowercase alphabetic words) and tokenizes
  // the fixed pieces. Throws std::runtime_error with a message on failure.
  passkey_builder(const sa_model* model, const std::string& words_path);

  // A prompt of at most `length` tokens (the answer excluded) with the needle at `depth`.
  passkey_case make(std::mt19937_64& rng, int64_t length, double depth) const;

 private:
  std::vector<int32_t> tokenize(const std::string& text, bool add_special) const;
  const sa_model* model_;
  std::vector<std::vector<int32_t>> words_;  // " word" tokenized
  std::vector<int32_t> prefix_, question_;
};

#include "passkey_prompt.h"

#include <cctype>
#include <fstream>
#include <stdexcept>

namespace {
const char* const k_prefix =
    "There is an important pass key hidden inside a lot of irrelevant text. "
    "Find it and memorize it. I will quiz you about the pass key later.";
const char* const k_question = "\nWhat is the pass key? The pass key is";
std::string needle(const std::string& key) {
  return " The pass key is " + key + ". Remember it. " + key + " is the pass key.";
}
}  // namespace

passkey_builder::passkey_builder(const sa_model* model, const std::string& words_path)
    : model_(model) {
  std::ifstream in(words_path);
  if (!in) throw std::runtime_error("cannot read the word list " + words_path);
  std::string w;
  while (std::getline(in, w)) {
    bool ok = !w.empty();
    for (char c : w) ok = ok && std::islower(static_cast<unsigned char>(c));
    if (ok) words_.push_back(tokenize(" " + w, false));
  }
  if (words_.size() < 100) throw std::runtime_error("too few usable words in " + words_path);
  prefix_ = tokenize(k_prefix, true);
  question_ = tokenize(k_question, false);
}

std::vector<int32_t> passkey_builder::tokenize(const std::string& text, bool add_special) const {
  size_t n = 0;
  const uint32_t flags = add_special ? SA_TOKENIZE_ADD_SPECIAL : 0;
  sa_tokenize(model_, text.data(), text.size(), flags, nullptr, 0, &n);
  std::vector<int32_t> t(n);
  if (sa_tokenize(model_, text.data(), text.size(), flags, t.data(), n, &n) != SA_OK)
    throw std::runtime_error(std::string("tokenize: ") + sa_last_error());
  return t;
}

passkey_case passkey_builder::make(std::mt19937_64& rng, int64_t length, double depth) const {
  passkey_case c;
  std::uniform_int_distribution<int> digit(0, 9);
  for (int i = 0; i < 5; ++i) c.key += static_cast<char>('0' + digit(rng));
  const std::vector<int32_t> nd = tokenize(needle(c.key), false);
  const int64_t fixed = static_cast<int64_t>(prefix_.size() + nd.size() + question_.size());
  if (fixed > length)
    throw std::runtime_error("a length of " + std::to_string(length) +
                             " tokens is too short: the prompt without filler needs " +
                             std::to_string(fixed));
  std::uniform_int_distribution<size_t> pick(0, words_.size() - 1);
  std::vector<const std::vector<int32_t>*> filler;
  int64_t used = 0;
  for (;;) {
    const std::vector<int32_t>& w = words_[pick(rng)];
    if (fixed + used + static_cast<int64_t>(w.size()) > length) break;
    filler.push_back(&w);
    used += static_cast<int64_t>(w.size());
  }
  const size_t cut = static_cast<size_t>(depth * static_cast<double>(filler.size()) + 0.5);
  c.depth = depth;
  c.tokens = prefix_;
  for (size_t i = 0; i < filler.size(); ++i) {
    if (i == cut) c.tokens.insert(c.tokens.end(), nd.begin(), nd.end());
    c.tokens.insert(c.tokens.end(), filler[i]->begin(), filler[i]->end());
  }
  if (cut >= filler.size()) c.tokens.insert(c.tokens.end(), nd.begin(), nd.end());
  c.tokens.insert(c.tokens.end(), question_.begin(), question_.end());
  return c;
}

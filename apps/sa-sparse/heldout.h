// Held-out text for perplexity, agreement and calibration: apps/sa-sparse/heldout-kjv.txt by
// default (King James Bible chapters from the held-out split of the model's training corpus).
//
// File format: '#' lines before the first document are comments. A line "=== TITLE" starts a
// document; its text is its non-blank lines joined with single spaces (the chapters are one
// paragraph each, wrapped at spaces for readability, so this restores the corpus text exactly).
//
// A document's sequence is BOS + its tokens (how every training document starts). The token
// stream is the one the model's own held-out perplexity uses (models/train: valid.u16): for
// each document in file order, BOS, its tokens, EOS.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "session_util.h"

namespace sparse_app {

struct heldout_doc {
  std::string title;
  std::string text;
};

// Throws std::runtime_error when the file cannot be read or holds no document.
std::vector<heldout_doc> load_heldout(const std::string& path);

// BOS doc (BOS omitted when the model has none).
std::vector<int32_t> heldout_sequence(const model& m, const heldout_doc& doc);

// BOS doc_0 EOS BOS doc_1 EOS ... (BOS/EOS omitted when the model has none).
std::vector<int32_t> heldout_stream(const model& m, const std::vector<heldout_doc>& docs);

}  // namespace sparse_app

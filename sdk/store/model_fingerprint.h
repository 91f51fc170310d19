// A model's identity for the session store: checksum64 of the GGUF file's bytes before the
// tensor data — header, every metadata key and value, and the tensor table (names, types,
// shapes, offsets). The weights themselves are not read, so this is cheap; two files that
// differ only in weight values (same metadata and layout) share a fingerprint.
#pragma once

#include <cstdint>

#include "model/model.h"

namespace sa::store {

uint64_t model_fingerprint(const model& m);

}  // namespace sa::store

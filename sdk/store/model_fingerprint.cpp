#include "store/model_fingerprint.h"

#include "core/error.h"
#include "store/checksum.h"

namespace sa::store {

uint64_t model_fingerprint(const model& m) {
  const gguf::file& f = m.file();
  if (f.tensors().empty()) fail(SA_ERR_INTERNAL, "model_fingerprint: a model without tensors");
  // Any tensor's data address minus its offset is the start of the data section.
  const gguf::tensor_info& t = f.tensors().front();
  const auto data_start = static_cast<size_t>(f.tensor_data(t) - f.bytes()) - t.offset;
  return checksum64(f.bytes(), data_start, 0x6767756600000000ull /* "gguf" */);
}

}  // namespace sa::store

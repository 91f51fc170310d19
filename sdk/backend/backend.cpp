#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace sa {

tensor new_f32_tensor(backend& be, std::vector<buffer_ptr>& owned, int64_t cols, int64_t rows) {
  owned.push_back(be.alloc(static_cast<size_t>(cols * rows) * sizeof(float)));
  tensor t;
  t.buf = owned.back().get();
  t.ne[0] = cols;
  t.ne[1] = rows;
  return t;
}

std::unique_ptr<backend> make_backend(backend_kind kind, int32_t n_threads) {
  switch (kind) {
    case backend_kind::cpu: return std::make_unique<cpu::cpu_backend>(n_threads);
  }
  fail(SA_ERR_UNSUPPORTED, "backend not compiled into this build");
}

}  // namespace sa

#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace sa {

std::unique_ptr<backend> make_backend(backend_kind kind, int32_t n_threads) {
  switch (kind) {
    case backend_kind::cpu: return std::make_unique<cpu::cpu_backend>(n_threads);
  }
  fail(SA_ERR_UNSUPPORTED, "backend not compiled into this build");
}

}  // namespace sa

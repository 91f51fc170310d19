// What the rest of the SDK sees of the CUDA backend (no CUDA headers): its devices and a
// constructor. Built only with SA_WITH_CUDA.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace sa::cuda {

// The CUDA devices this build can run on (compute capability matching the compiled kernels).
// Never throws for a missing driver: returns nothing and says why in *why_none.
std::vector<device_info> list_devices(std::string* why_none);
// A backend on device `device`; throws SA_ERR_UNSUPPORTED when it is absent or unusable.
std::unique_ptr<backend> make_backend(int device);

}  // namespace sa::cuda

// What the rest of the SDK sees of the Vulkan backend (no Vulkan headers): its devices and a
// constructor. Built only with SA_WITH_VULKAN.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace sa::vk {

// The Vulkan devices that qualify (Vulkan 1.2, buffer device addresses), in the loader's
// order. Never throws for a missing loader or driver: returns nothing and says why.
std::vector<device_info> list_devices(std::string* why_none);
// A backend on device `device`; throws SA_ERR_UNSUPPORTED when it is absent or unusable.
std::unique_ptr<backend> make_backend(int32_t device);

}  // namespace sa::vk

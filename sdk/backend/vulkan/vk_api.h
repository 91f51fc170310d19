// The Vulkan API as this backend uses it: the loader (libvulkan) is opened at run time, never
// linked, so libsa loads and runs on the CPU where no Vulkan loader is installed. Entry points
// are fetched into one table, `vk`: the global ones before an instance, then every other one
// through the process's single instance, whose device-level entry points are the loader's
// dispatching trampolines, so one table serves every device (even of different drivers).
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace sa::vk {

#define SA_VK_GLOBAL_FUNCTIONS(X)        \
  X(vkCreateInstance)                    \
  X(vkEnumerateInstanceVersion)          \
  X(vkEnumerateInstanceLayerProperties)  \
  X(vkEnumerateInstanceExtensionProperties)

#define SA_VK_INSTANCE_FUNCTIONS(X)            \
  X(vkDestroyInstance)                         \
  X(vkEnumeratePhysicalDevices)                \
  X(vkGetPhysicalDeviceProperties)             \
  X(vkGetPhysicalDeviceProperties2)            \
  X(vkGetPhysicalDeviceFeatures2)              \
  X(vkGetPhysicalDeviceMemoryProperties)       \
  X(vkGetPhysicalDeviceQueueFamilyProperties)  \
  X(vkEnumerateDeviceExtensionProperties)      \
  X(vkCreateDevice)                            \
  X(vkGetDeviceProcAddr)

#define SA_VK_DEBUG_FUNCTIONS(X)        \
  X(vkCreateDebugUtilsMessengerEXT)     \
  X(vkDestroyDebugUtilsMessengerEXT)

// Entry points of optional device extensions: null where the driver lacks them.
#define SA_VK_OPTIONAL_FUNCTIONS(X)                \
  X(vkGetPipelineExecutablePropertiesKHR)          \
  X(vkGetPipelineExecutableStatisticsKHR)          \
  X(vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)

#define SA_VK_DEVICE_FUNCTIONS(X)      \
  X(vkDestroyDevice)                   \
  X(vkGetDeviceQueue)                  \
  X(vkDeviceWaitIdle)                  \
  X(vkCreateBuffer)                    \
  X(vkDestroyBuffer)                   \
  X(vkGetBufferMemoryRequirements)     \
  X(vkGetBufferDeviceAddress)          \
  X(vkAllocateMemory)                  \
  X(vkFreeMemory)                      \
  X(vkBindBufferMemory)                \
  X(vkMapMemory)                       \
  X(vkUnmapMemory)                     \
  X(vkCreateShaderModule)              \
  X(vkDestroyShaderModule)             \
  X(vkCreatePipelineLayout)            \
  X(vkDestroyPipelineLayout)           \
  X(vkCreateComputePipelines)          \
  X(vkDestroyPipeline)                 \
  X(vkCreateCommandPool)               \
  X(vkDestroyCommandPool)              \
  X(vkAllocateCommandBuffers)          \
  X(vkFreeCommandBuffers)              \
  X(vkBeginCommandBuffer)              \
  X(vkEndCommandBuffer)                \
  X(vkResetCommandBuffer)              \
  X(vkCmdBindPipeline)                 \
  X(vkCmdPushConstants)                \
  X(vkCmdDispatch)                     \
  X(vkCmdPipelineBarrier)              \
  X(vkCreateQueryPool)                 \
  X(vkDestroyQueryPool)                \
  X(vkCmdResetQueryPool)               \
  X(vkCmdWriteTimestamp)               \
  X(vkGetQueryPoolResults)             \
  X(vkCmdCopyBuffer)                   \
  X(vkCmdFillBuffer)                   \
  X(vkCmdUpdateBuffer)                 \
  X(vkQueueSubmit)                     \
  X(vkQueueWaitIdle)                   \
  X(vkCreateFence)                     \
  X(vkDestroyFence)                    \
  X(vkWaitForFences)                   \
  X(vkResetFences)                     \
  X(vkGetFenceStatus)

struct api_table {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define SA_VK_MEMBER(name) PFN_##name name = nullptr;
  SA_VK_GLOBAL_FUNCTIONS(SA_VK_MEMBER)
  SA_VK_INSTANCE_FUNCTIONS(SA_VK_MEMBER)
  SA_VK_DEBUG_FUNCTIONS(SA_VK_MEMBER)
  SA_VK_OPTIONAL_FUNCTIONS(SA_VK_MEMBER)
  SA_VK_DEVICE_FUNCTIONS(SA_VK_MEMBER)
#undef SA_VK_MEMBER
};

// The entry points (filled by open_loader, load_instance and load_device).
extern api_table vk;

// Opens libvulkan and fetches the global entry points; false (with why) when there is no
// loader. Safe to call again: the library is opened once per process.
bool open_loader(std::string* why);
// Fetches the instance- and device-level entry points through `instance` (the debug and
// optional ones may stay null).
void load_instance(VkInstance instance);

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" and so on.
const char* result_name(VkResult r);
// Throws sa::error for a failed call: SA_ERR_NOMEM for out-of-memory results, otherwise
// SA_ERR_BACKEND naming the call and the result.
void check(VkResult r, const char* what);

}  // namespace sa::vk

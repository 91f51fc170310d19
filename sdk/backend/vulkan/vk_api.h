// The Vulkan API as this backend uses it: the loader (libvulkan) is opened at run time, never
// linked, so libsa loads and runs on the CPU where no Vulkan loader is installed. Entry points
// are fetched into one table, `vk`: the global ones before an instance, then every other one
// through the process's single instance, whose device-level entry points are the loader's
// dispatching trampolines, so one table serves every device (even of different drivers).
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

// VK_KHR_cooperative_matrix as the registry defines it (headers 1.3.255 and later), for the older
// headers some distributions ship: the values and layouts this backend reads.
#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR static_cast<VkStructureType>(1000506000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR static_cast<VkStructureType>(1000506001)
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR static_cast<VkStructureType>(1000506002)
typedef enum VkComponentTypeKHR { VK_COMPONENT_TYPE_FLOAT16_KHR = 0, VK_COMPONENT_TYPE_FLOAT32_KHR = 1 } VkComponentTypeKHR;
typedef enum VkScopeKHR { VK_SCOPE_SUBGROUP_KHR = 3 } VkScopeKHR;
typedef struct VkCooperativeMatrixPropertiesKHR {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize, NSize, KSize;
  VkComponentTypeKHR AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixPropertiesKHR {
  VkStructureType sType;
  void* pNext;
  VkShaderStageFlags cooperativeMatrixSupportedStages;
} VkPhysicalDeviceCooperativeMatrixPropertiesKHR;
typedef VkResult(VKAPI_PTR* PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice physicalDevice, uint32_t* pPropertyCount, VkCooperativeMatrixPropertiesKHR* pProperties);
#endif

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
  X(vkGetPhysicalDeviceCooperativeMatrixPropertiesNV) \
  X(vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)

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

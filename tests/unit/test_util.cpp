#include "test_util.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <random>

namespace sa_test {

std::string temp_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TMPDIR");
  std::filesystem::path base = dir && *dir ? dir : "/tmp";
  return (base / ("sa_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" +
                  stem))
      .string();
}

std::string models_dir() { return SA_MODELS_DIR; }
std::string test_data_dir() { return SA_TEST_DATA_DIR; }

std::vector<float> random_normal(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace sa_test

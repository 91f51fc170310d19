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

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

std::string to_hex(std::string_view s) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

}  // namespace sa_test

// Small helpers shared by the unit tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sa_test {

// A fresh path under the system temp directory, unique per call; the file is not created.
std::string temp_path(const std::string& stem);

// Folder holding the shipped models (models/ in the source tree).
std::string models_dir();

// Folder holding test data (tests/ in the source tree).
std::string test_data_dir();

// n draws of a normal distribution N(0, scale^2), the same for a given seed.
std::vector<float> random_normal(size_t n, uint64_t seed, float scale = 1.0f);

// Bytes from hex digits ("c3a9" -> "\xc3\xa9") and back, for test data and messages.
std::string from_hex(const std::string& hex);
std::string to_hex(std::string_view s);

}  // namespace sa_test

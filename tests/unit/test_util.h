// Small helpers shared by the unit tests.
#pragma once

#include <cstdint>
#include <string>
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

}  // namespace sa_test

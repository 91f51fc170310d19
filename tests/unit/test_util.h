// Small helpers shared by the unit tests.
#pragma once

#include <string>

namespace sa_test {

// A fresh path under the system temp directory, unique per call; the file is not created.
std::string temp_path(const std::string& stem);

// Folder holding the shipped models (models/ in the source tree).
std::string models_dir();

// Folder holding test data (tests/ in the source tree).
std::string test_data_dir();

}  // namespace sa_test

// Accuracy heatmaps as PNG (stb_image_write): one panel per method, context length across,
// depth bin down, each cell coloured from red (0%) to green (100%) and labelled.
#pragma once

#include <string>
#include <vector>

struct heatmap_panel {
  std::string title;                       // e.g. "cascade"
  std::vector<long long> lengths;          // columns
  std::vector<std::vector<double>> value;  // [depth bin][length] in [0, 1], or < 0 for "n/a"
};

// Writes the panels side by side; returns false (and sets *error) when the file cannot be written.
bool write_heatmap(const std::string& path, const std::vector<heatmap_panel>& panels,
                   const std::string& caption, std::string* error);

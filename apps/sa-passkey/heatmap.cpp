#include "heatmap.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include <stb/stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace {

// A 5x7 pixel font: each glyph is 7 rows of 5 bits (most significant bit = leftmost pixel).
struct glyph {
  char c;
  uint8_t rows[7];
};
const glyph k_font[] = {
    {'0', {14, 17, 19, 21, 25, 17, 14}}, {'1', {4, 12, 4, 4, 4, 4, 14}},
    {'2', {14, 17, 1, 2, 4, 8, 31}},     {'3', {30, 1, 1, 14, 1, 1, 30}},
    {'4', {2, 6, 10, 18, 31, 2, 2}},     {'5', {31, 16, 30, 1, 1, 17, 14}},
    {'6', {6, 8, 16, 30, 17, 17, 14}},   {'7', {31, 1, 2, 4, 8, 8, 8}},
    {'8', {14, 17, 17, 14, 17, 17, 14}}, {'9', {14, 17, 17, 15, 1, 2, 12}},
    {'a', {0, 0, 14, 1, 15, 17, 15}},    {'b', {16, 16, 30, 17, 17, 17, 30}},
    {'c', {0, 0, 14, 16, 16, 17, 14}},   {'d', {1, 1, 15, 17, 17, 17, 15}},
    {'e', {0, 0, 14, 17, 31, 16, 14}},   {'f', {6, 9, 8, 28, 8, 8, 8}},
    {'g', {0, 15, 17, 17, 15, 1, 14}},   {'h', {16, 16, 22, 25, 17, 17, 17}},
    {'i', {4, 0, 12, 4, 4, 4, 14}},      {'j', {2, 0, 6, 2, 2, 18, 12}},
    {'k', {16, 16, 18, 20, 24, 20, 18}}, {'l', {12, 4, 4, 4, 4, 4, 14}},
    {'m', {0, 0, 26, 21, 21, 17, 17}},   {'n', {0, 0, 22, 25, 17, 17, 17}},
    {'o', {0, 0, 14, 17, 17, 17, 14}},   {'p', {0, 0, 30, 17, 30, 16, 16}},
    {'q', {0, 0, 13, 19, 15, 1, 1}},     {'r', {0, 0, 22, 25, 16, 16, 16}},
    {'s', {0, 0, 14, 16, 14, 1, 30}},    {'t', {8, 8, 28, 8, 8, 9, 6}},
    {'u', {0, 0, 17, 17, 17, 19, 13}},   {'v', {0, 0, 17, 17, 17, 10, 4}},
    {'w', {0, 0, 17, 17, 21, 21, 10}},   {'x', {0, 0, 17, 10, 4, 10, 17}},
    {'y', {0, 0, 17, 17, 15, 1, 14}},    {'z', {0, 0, 31, 2, 4, 8, 31}},
    {'%', {24, 25, 2, 4, 8, 19, 3}},     {'-', {0, 0, 0, 31, 0, 0, 0}},
    {'.', {0, 0, 0, 0, 0, 12, 12}},      {'/', {0, 1, 2, 4, 8, 16, 0}},
    {':', {0, 12, 12, 0, 12, 12, 0}},    {'(', {2, 4, 8, 8, 8, 4, 2}},
    {')', {8, 4, 2, 2, 2, 4, 8}},        {'=', {0, 0, 31, 0, 31, 0, 0}},
};

struct canvas {
  int w, h;
  std::vector<uint8_t> px;  // RGB
  canvas(int width, int height) : w(width), h(height), px(static_cast<size_t>(width * height * 3), 255) {}
  void fill(int x0, int y0, int x1, int y1, const uint8_t rgb[3]) {
    for (int y = std::max(0, y0); y < std::min(h, y1); ++y)
      for (int x = std::max(0, x0); x < std::min(w, x1); ++x)
        std::memcpy(&px[static_cast<size_t>((y * w + x) * 3)], rgb, 3);
  }
  // Text at (x, y), scale s; characters without a glyph are left blank.
  void text(int x, int y, const std::string& s, int scale, const uint8_t rgb[3]) {
    for (char ch : s) {
      const char c = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
      for (const glyph& g : k_font) {
        if (g.c != c) continue;
        for (int r = 0; r < 7; ++r)
          for (int col = 0; col < 5; ++col)
            if (g.rows[r] & (16 >> col))
              fill(x + col * scale, y + r * scale, x + (col + 1) * scale, y + (r + 1) * scale, rgb);
        break;
      }
      x += 6 * scale;
    }
  }
};

std::string short_length(long long n) {
  if (n >= 1048576 && n % 1048576 == 0) return std::to_string(n / 1048576) + "m";
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n / 1024) + "k";
  return std::to_string(n);
}

}  // namespace

bool write_heatmap(const std::string& path, const std::vector<heatmap_panel>& panels,
                   const std::string& caption, std::string* error) {
  const int cell = 44, margin = 40, gap = 30, top = 60, scale = 2;
  size_t max_cols = 0, rows = 0, title = 0;
  for (const heatmap_panel& p : panels) {
    max_cols = std::max(max_cols, p.lengths.size());
    rows = std::max(rows, p.value.size());
    title = std::max(title, p.title.size());
  }
  const int panel_w = std::max(static_cast<int>(max_cols) * cell, static_cast<int>(title) * 6 * scale);
  const int width = margin + static_cast<int>(panels.size()) * (panel_w + gap) + margin;
  const int height = top + static_cast<int>(rows) * cell + 50;
  canvas c(width, height);
  const uint8_t black[3] = {0, 0, 0}, grey[3] = {200, 200, 200};
  c.text(margin, 8, caption, scale, black);
  for (size_t p = 0; p < panels.size(); ++p) {
    const heatmap_panel& pn = panels[p];
    const int x0 = margin + static_cast<int>(p) * (panel_w + gap);
    c.text(x0, 34, pn.title, scale, black);
    for (size_t r = 0; r < pn.value.size(); ++r) {
      for (size_t col = 0; col < pn.value[r].size(); ++col) {
        const double v = pn.value[r][col];
        const int x = x0 + static_cast<int>(col) * cell, y = top + static_cast<int>(r) * cell;
        if (v < 0) {
          c.fill(x + 1, y + 1, x + cell - 1, y + cell - 1, grey);
          c.text(x + 10, y + 15, "n/a", 1, black);
          continue;
        }
        const uint8_t rgb[3] = {static_cast<uint8_t>(220 * (1 - v) + 20),
                                static_cast<uint8_t>(60 + 150 * v), 60};
        c.fill(x + 1, y + 1, x + cell - 1, y + cell - 1, rgb);
        const std::string label = std::to_string(static_cast<int>(v * 100 + 0.5));
        c.text(x + (cell - static_cast<int>(label.size()) * 6 * scale) / 2 + 1, y + 15, label,
               scale, black);
      }
    }
    for (size_t col = 0; col < pn.lengths.size(); ++col)
      c.text(x0 + static_cast<int>(col) * cell + 4, top + static_cast<int>(rows) * cell + 6,
             short_length(pn.lengths[col]), scale, black);
  }
  c.text(margin, height - 18, "columns: context length   rows: needle depth, shallow at top", 1,
         black);
  if (!stbi_write_png(path.c_str(), width, height, 3, c.px.data(), width * 3)) {
    *error = "cannot write " + path;
    return false;
  }
  return true;
}

// make_tiny_model OUT.gguf [ARCH] [TYPE]: writes a random tiny model (tests and demos).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "tiny_model.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.gguf [llama|qwen2|qwen3] [f32|f16|q8_0|q4_0|q4_k|q6_k]\n",
                 argv[0]);
    return 2;
  }
  sa_test::tiny_model_options o;
  if (argc > 2) o.arch = argv[2];
  if (argc > 3) {
    const std::string t = argv[3];
    const struct { const char* name; sa::dtype type; } types[] = {
        {"f32", sa::dtype::f32},   {"f16", sa::dtype::f16},   {"q8_0", sa::dtype::q8_0},
        {"q4_0", sa::dtype::q4_0}, {"q4_k", sa::dtype::q4_k}, {"q6_k", sa::dtype::q6_k}};
    bool found = false;
    for (const auto& x : types)
      if (t == x.name) o.matrix_type = x.type, found = true;
    if (!found) {
      std::fprintf(stderr, "unknown type %s\n", t.c_str());
      return 2;
    }
  }
  try {
    sa_test::write_tiny_model(argv[1], o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_tiny_model: %s\n", e.what());
    return 1;
  }
  return 0;
}

// The push constants of the prefill products, gemm.comp and gemm_coop.comp (120 bytes;
// sdk/backend/vulkan/products.cpp products_pc, whose norm fields only gemv.comp reads).
layout(push_constant) uniform params {
  floats x;         // [n][cols]
  uvec2 w[3];       // weight bases (device addresses)
  uvec2 y[3];       // outputs
  uint planes[9];   // word offsets of planes 1..3 of weight j at 3j .. 3j+2
  uint rows[3];     // rows of weight j (= width of y_j)
  uint n;           // rows of x
  uint cols;        // width of x and of every weight
  uint mode;        // bits 0-1: 0 store, 1 accumulate; bits 4-5: weights
  float eps;        // unused here (gemv.comp's norm)
  uvec2 g;          // unused here
};

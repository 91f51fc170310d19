// sa-bench gpu: speed on a GPU through the CUDA or the Vulkan backend (--backend), every
// memory-bound figure against the card's streaming bandwidth measured in the same run (by a
// CUDA kernel, gpu_kernels.cu: on NVIDIA GPUs; elsewhere the fractions are left out).
//
//   bandwidth   the streaming-read and device-copy bandwidth
//   attention   decode attention alone, 32 query / 8 KV heads x 128, f16 cache, by context length
//   attention-prefill  prefill attention alone: a causal chunk of --batch rows at the end of
//               each context length, in TFLOP/s
//   gemv        decode matrix-vector products on Llama-3.1-8B shapes, by weight type
//   gemm        prefill products (--batch rows) on the same shapes, in TFLOP/s
//   decode      end to end on a model file: decode tokens/s at context depths, against the
//               bytes floor (weights + KV read once per token / bandwidth), and prefill tokens/s
//   sparse      Quest per layer (scores, top pages, attention against the bytes floor) at
//               --keys lengths (default 32K, 128K), and with --model the sparse methods end to
//               end at --depths (default 32K, 128K) beside dense decoding (gpu_sparse.cpp)
//   prr-profile the profile PRR chooses its r from by context length, for --model on this device
//               (--profile: the file written; gpu_prr_profile.cpp)
//   all         all of the above but sparse and prr-profile (decode when --model is given)
// Memory-bound kernels are timed over buffers rotated past the L2 cache, replayed as one
// recorded step per measurement (medians over repetitions).
#pragma once

#include <string>
#include <vector>

#include "backend/backend.h"

struct gpu_bench_options {
  sa::backend_kind backend = sa::backend_kind::cuda;
  int device = 0;
  std::vector<int> lengths = {4096, 8192, 16384, 32768, 65536, 131072};
  std::vector<std::string> types = {"f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"};
  std::string model;                            // decode: a GGUF file
  std::vector<int> rows = {1};                  // gemv: input rows
  std::vector<int> depths = {0, 8192, 32768, 131072};
  int steps = 64;
  int batch = 2048;                             // prefill chunk
  std::string json;                             // append JSON lines here
  std::vector<std::string> methods = {"dense", "quest", "resa", "vattention", "cascade"};  // sparse
  std::string prr_profile;  // prr-profile: the file written; sparse: PRR rows with r from it
  // prr-profile: the selection settings profiled (the defaults of sa_session_params)
  std::vector<std::string> select = {"head", "group"};
  int page_size = 16, budget_tokens = 0, sink_pages = 1, local_pages = 1, min_pages = 3;
  float budget_ratio = 0.125f;
};

int gpu_bench(const std::string& what, const gpu_bench_options& o);

// Device-side helpers of the GPU benchmarks (gpu_kernels.cu).
#pragma once

struct bandwidth_figures {
  bool ok = false;
  double read_tbps = 0;  // best streaming read over a 2 GiB buffer, TB/s
  double copy_tbps = 0;  // device-to-device copy, read + written bytes, TB/s
};

bandwidth_figures measure_bandwidth(int device);

#include "int8_inputs.h"

namespace sa_test {

int8_inputs::int8_inputs(int64_t nx, int64_t n, int64_t block,
                         const std::function<std::vector<float>(int64_t)>& row_of)
    : q(static_cast<size_t>(nx * n)),
      d(static_cast<size_t>(nx * n / block)),
      sums(static_cast<size_t>(nx * n / 16)),
      u(q.size()) {
  for (int64_t i = 0; i < nx; ++i) {
    const std::vector<float> x = row_of(i);
    int8_t* qi = q.data() + i * n;
    sa::cpu::quantize_q8_row(x.data(), n, block, qi, d.data() + i * (n / block), sums.data() + i * (n / 16));
    sa::cpu::bias_q8_row(qi, n, u.data() + i * n);
    rows.push_back({qi, d.data() + i * (n / block), sums.data() + i * (n / 16), u.data() + i * n});
  }
}

}  // namespace sa_test

#include "store/checksum.h"

#include <cstring>

namespace sa::store {

namespace {

constexpr uint64_t k_mul_a = 0x9FB21C651E98DF25ull;  // odd constants with mixed bit patterns
constexpr uint64_t k_mul_b = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t k_mul_c = 0xD6E8FEB86659FD93ull;

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t load64(const uint8_t* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;  // little-endian hosts only (checked by the store)
}

uint64_t lane_step(uint64_t lane, uint64_t word) {
  return rotl(lane + word * k_mul_a, 29) * k_mul_b;
}

uint64_t finalise(uint64_t h) {
  h ^= h >> 32;
  h *= k_mul_c;
  h ^= h >> 29;
  h *= k_mul_b;
  h ^= h >> 32;
  return h;
}

}  // namespace

uint64_t checksum64(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t lane[4] = {seed + k_mul_a, seed ^ k_mul_b, seed - k_mul_c, ~seed};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 4; ++j) lane[j] = lane_step(lane[j], load64(p + i + 8 * j));
  uint64_t h = rotl(lane[0], 1) + rotl(lane[1], 7) + rotl(lane[2], 13) + rotl(lane[3], 19);
  h = (h ^ static_cast<uint64_t>(n)) * k_mul_a;
  for (; i + 8 <= n; i += 8) h = lane_step(h, load64(p + i));
  uint64_t tail = 0;
  for (size_t k = 0; i < n; ++i, ++k) tail |= static_cast<uint64_t>(p[i]) << (8 * k);
  h = lane_step(h, tail ^ 0x5Aull);
  return finalise(h);
}

}  // namespace sa::store

// A 64-bit checksum for stored chunks and model fingerprints.
//
// Not cryptographic: it detects corruption (flipped bits, truncation, zeroed or swapped
// blocks), not tampering. The bytes are read as little-endian 64-bit words in four independent
// lanes (so the loop runs at memory speed); each lane multiplies by an odd constant, rotates
// and adds; the lanes, the length and the tail bytes are folded at the end and the result is
// passed through a 64-bit finaliser so every input bit reaches every output bit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sa::store {

uint64_t checksum64(const void* data, size_t n, uint64_t seed = 0);

}  // namespace sa::store

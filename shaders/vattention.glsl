// vAttention's draws (sdk/policy/vattention.h), bit for bit as the CPU computes them, in 32-bit
// integers only (no shaderInt64, no shaderFloat64): hash32, the Feistel permutation with cycle
// walking, the residual's t-th key and the pilot's size. The including file includes
// common.glsl first (the `ints` buffer reference).

// Wellons' lowbias32 (vattention::hash32).
uint hash32(uint x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// vattention::permutation of [0, n): a four-round Feistel network on 2 * half bits, its round
// keys chained over the seed's halves (low word first), position, layer, head and purpose.
struct permutation {
  uint n, half_, mask;
  uvec4 keys;
};

permutation permutation_of(uint seed_lo, uint seed_hi, uint position, uint layer, uint head, uint purpose,
                           uint n) {
  permutation p;
  p.n = n;
  uint bits = 2u;
  while (bits < 32u && (1u << bits) < n) bits += 2u;
  p.half_ = bits / 2u;
  p.mask = (1u << p.half_) - 1u;
  uint h = hash32(seed_lo ^ 0x9e3779b9u);
  h = hash32(h ^ seed_hi);
  h = hash32(h ^ position);
  h = hash32(h ^ layer);
  h = hash32(h ^ head);
  h = hash32(h ^ purpose);
  p.keys = uvec4(hash32(h + 1u * 0x9e3779b9u), hash32(h + 2u * 0x9e3779b9u), hash32(h + 3u * 0x9e3779b9u),
                 hash32(h + 4u * 0x9e3779b9u));
  return p;
}

uint permutation_encrypt(permutation p, uint x) {
  uint l = x >> p.half_, r = x & p.mask;
  for (uint i = 0u; i < 4u; ++i) {
    const uint t = l ^ (hash32(r ^ p.keys[i]) & p.mask);
    l = r;
    r = t;
  }
  return (l << p.half_) | r;
}

uint permutation_decrypt(permutation p, uint x) {
  uint l = x >> p.half_, r = x & p.mask;
  for (int i = 3; i >= 0; --i) {
    const uint t = r ^ (hash32(l ^ p.keys[i]) & p.mask);
    r = l;
    l = t;
  }
  return (l << p.half_) | r;
}

// The i-th draw (i < n) and its inverse (cycle walking: the domain is under 4n).
uint permutation_at(permutation p, uint i) {
  uint x = permutation_encrypt(p, i);
  while (x >= p.n) x = permutation_encrypt(p, x);
  return x;
}

uint permutation_index_of(permutation p, uint x) {
  uint i = permutation_decrypt(p, x);
  while (i >= p.n) i = permutation_decrypt(p, i);
  return i;
}

// vattention::residual_key: the t-th key of the pages not among the n_sel ascending ids
// pages.v[list ..]: key t % page_size of unselected page q = t / page_size, which is page q + j
// for j the first index with ids[j] - j > q.
uint residual_key(ints pages, uint list, uint n_sel, uint page_size, uint t) {
  const uint q = t / page_size;
  uint lo = 0u, hi = n_sel;
  while (lo < hi) {
    const uint mid = (lo + hi) / 2u;
    if (pages.v[list + mid] - int(mid) > int(q)) hi = mid;
    else lo = mid + 1u;
  }
  return (q + lo) * page_size + t % page_size;
}

// floor(double(ratio) * double(n)) for 0 < ratio < 1 and n < 2^31, exactly as the CPU's double
// arithmetic gives it, in 32-bit words. ratio is M 2^-s exactly (M its significand, under 2^24;
// s >= 24 below 1), so M n (under 2^55) is exact in two words (umulExtended). The double
// product is M n rounded to 53 significant bits, ties to even: with L > 53 bits, drop the low
// d = L - 53 (at most 2) bits with that rounding into m, the product being m 2^d. Its floor is
// then m 2^d >> s = m >> (s - d) (s > d, the dropped bits being zero).
uint floor_ratio_times(float ratio, uint n) {
  const uint bits = floatBitsToUint(ratio);
  const uint e = (bits >> 23) & 0xFFu;
  const uint frac = bits & 0x7FFFFFu;
  const uint m_ratio = e == 0u ? frac : frac | 0x800000u;
  const uint s = e == 0u ? 149u : 150u - e;
  uint hi, lo;
  umulExtended(m_ratio, n, hi, lo);
  const uint len = hi != 0u ? 33u + uint(findMSB(hi)) : (lo != 0u ? 1u + uint(findMSB(lo)) : 0u);
  uint d = 0u;
  if (len > 53u) {
    d = len - 53u;
    const uint rem = lo & ((1u << d) - 1u), half_ulp = 1u << (d - 1u);
    lo = (lo >> d) | (hi << (32u - d));
    hi >>= d;
    if (rem > half_ulp || (rem == half_ulp && (lo & 1u) != 0u)) {
      uint carry;
      lo = uaddCarry(lo, 1u, carry);
      hi += carry;
    }
  }
  const uint k = s - d;  // >= 22
  if (k >= 64u) return 0u;
  if (k >= 32u) return hi >> (k - 32u);
  return (lo >> k) | (hi << (32u - k));
}

// vattention::pilot_size: 0 for n_s <= 64, else max(64, floor(ratio n_s)) capped at n_s (a
// ratio that is not above 0, NaN included, gives 64; one of at least 1 gives n_s).
uint pilot_size(uint n_s, float ratio) {
  if (n_s <= 64u) return 0u;
  uint want = 0u;
  if (ratio >= 1.0) want = n_s;
  else if (ratio > 0.0) want = floor_ratio_times(ratio, n_s);
  return min(n_s, max(64u, want));
}

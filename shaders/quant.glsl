// Weights in the GPU layout (sdk/backend/weight_layout.h), read as 32-bit words and turned into
// f32 values. Define WTYPE before including this file (after common.glsl):
//   0 f32   [rows][cols] f32
//   1 f16   [rows][cols] f16           (any width; rows of odd width start mid-word)
//   2 bf16  [rows][cols] bf16
//   3 q8_0  qs [rows][cols] i8 | d [rows][cols/32] f16                          x = d * q
//   4 q4_0  qs [rows][cols/2] u8 (per block: byte j = element j | element j+16 << 4)
//           | d [rows][cols/32] f16                                             x = d * (q - 8)
//   5 q4_k  the file's 144-byte blocks (36 words): f16 d, f16 dmin | 12 scale bytes | 128 quant
//           bytes; x = (d * sc) * q - dmin * m
//   6 q6_k  ql [rows][cols/2] | qh [rows][cols/4] | sc [rows][cols/16] i8 | d [rows][cols/256] f16
//           x = (d * sc) * (q - 32)
// A weight is (w, pl, cols): w its base (plane 0), pl the word offsets of planes 1, 2, 3 from the
// base (0 where the type has none). Block types have cols a multiple of their block (32 or 256),
// so every index below is a whole word; float types take any width.
//
//   w_one(w, pl, cols, r, c)      element (r, c) with the CPU reference's exact arithmetic
//                                 (quants.cpp dequantize_row: embedding rows equal it bitwise)
//   w_quad(w, pl, cols, r, k)     elements k .. k+3 of row r (k a multiple of 4, k + 3 < cols)
//   w_chunk(w, pl, cols, r, c, lo, hi)   chunk c of row r for matrix-vector products: 8 elements,
//                                 lo = [k, k+4), hi = [k + W_HI, k + W_HI + 4), k = chunk_k(c);
//                                 a row has cols / 8 chunks (float types: a tail of cols % 8
//                                 elements is left to w_one). Consecutive chunks read consecutive
//                                 quant words (plus their scales), so a row's bytes are read once.

// ---- bytes within words -------------------------------------------------------------------------
uint byte_of(uint word, uint i) { return (word >> (8u * i)) & 0xFFu; }
int sbyte_of(uint word, uint i) { return int(word << (24u - 8u * i)) >> 24; }
vec4 bytes4(uint word) { return vec4(uvec4(word, word >> 8, word >> 16, word >> 24) & 0xFFu); }
vec4 sbytes4(uint word) { return vec4(ivec4(word << 24, word << 16, word << 8, word) >> 24); }
// Half i of a packed f16 array that starts at word `base`.
float half_of(words w, uint base, uint i) {
  const vec2 h = unpackHalf2x16(w.v[base + (i >> 1)]);
  return (i & 1u) == 0u ? h.x : h.y;
}
// Q4_K's six-bit scale and min of sub-block i (0..7) from the scale bytes in words s.x (bytes
// 0..3), s.y (4..7), s.z (8..11): i < 4: sc = s[i] & 63, m = s[i+4] & 63; i >= 4:
// sc = (s[i+4] & 15) | (s[i-4] >> 6) << 4, m = (s[i+4] >> 4) | (s[i] >> 6) << 4.
void q4k_scale_min(uvec3 s, uint i, out float sc, out float m) {
  if (i < 4u) {
    sc = float(byte_of(s.x, i) & 63u);
    m = float(byte_of(s.y, i) & 63u);
  } else {
    const uint k = i - 4u;
    sc = float((byte_of(s.z, k) & 15u) | ((byte_of(s.x, k) >> 6) << 4));
    m = float((byte_of(s.z, k) >> 4) | ((byte_of(s.y, k) >> 6) << 4));
  }
}

// ---- one element, exactly as the CPU ------------------------------------------------------------
float w_one(words w, uvec3 pl, uint cols, uint r, uint c) {
#if WTYPE == 0
  return uintBitsToFloat(w.v[r * cols + c]);
#elif WTYPE == 1
  return f16_at(w, r * cols + c);
#elif WTYPE == 2
  return bf16_at(w, r * cols + c);
#elif WTYPE == 3
  const float d = half_of(w, pl.x, r * (cols >> 5) + (c >> 5));
  return d * float(sbyte_of(w.v[r * (cols >> 2) + (c >> 2)], c & 3u));
#elif WTYPE == 4
  const uint j = c & 31u;
  const uint b = byte_of(w.v[r * (cols >> 3) + (c >> 5) * 4u + ((j & 15u) >> 2)], j & 3u);
  const uint q = j < 16u ? (b & 15u) : (b >> 4);
  return half_of(w, pl.x, r * (cols >> 5) + (c >> 5)) * float(int(q) - 8);
#elif WTYPE == 5
  const uint blk = (r * (cols >> 8) + (c >> 8)) * 36u;
  const uint e = c & 255u, cc = e >> 6, hi = (e >> 5) & 1u, l = e & 31u;
  const vec2 dd = unpackHalf2x16(w.v[blk]);
  float sc, m;
  q4k_scale_min(uvec3(w.v[blk + 1u], w.v[blk + 2u], w.v[blk + 3u]), 2u * cc + hi, sc, m);
  const uint b = byte_of(w.v[blk + 4u + 8u * cc + (l >> 2)], l & 3u);
  const float q = float(hi != 0u ? (b >> 4) : (b & 15u));
  precise const float a = dd.x * sc;
  precise const float off = dd.y * m;
  precise const float v = a * q - off;  // no fused multiply-add: the CPU rounds twice
  return v;
#elif WTYPE == 6
  const uint rb = r * (cols >> 8) + (c >> 8);
  const uint e = c & 255u, h = e >> 7, g = (e >> 5) & 3u, l = e & 31u;
  const uint ql = byte_of(w.v[rb * 32u + 16u * h + 8u * (g & 1u) + (l >> 2)], l & 3u);
  const uint qh = byte_of(w.v[pl.x + rb * 16u + 8u * h + (l >> 2)], l & 3u);
  const uint si = 8u * h + (l >> 4) + 2u * g;
  const int sc = sbyte_of(w.v[pl.y + rb * 4u + (si >> 2)], si & 3u);
  const int q = int((g < 2u ? (ql & 15u) : (ql >> 4)) | (((qh >> (2u * g)) & 3u) << 4));
  precise const float a = half_of(w, pl.z, rb) * float(sc);
  precise const float v = a * float(q - 32);
  return v;
#endif
}

// ---- four consecutive elements --------------------------------------------------------------------
vec4 w_quad(words w, uvec3 pl, uint cols, uint r, uint k) {
#if WTYPE == 0
  const uint i = r * cols + k;
  return vec4(uintBitsToFloat(w.v[i]), uintBitsToFloat(w.v[i + 1u]), uintBitsToFloat(w.v[i + 2u]),
              uintBitsToFloat(w.v[i + 3u]));
#elif WTYPE == 1 || WTYPE == 2
  if ((cols & 1u) != 0u)  // odd widths: rows start mid-word
    return vec4(w_one(w, pl, cols, r, k), w_one(w, pl, cols, r, k + 1u), w_one(w, pl, cols, r, k + 2u),
                w_one(w, pl, cols, r, k + 3u));
  const uint i = (r * cols + k) >> 1;
  const uint u0 = w.v[i], u1 = w.v[i + 1u];
#if WTYPE == 1
  return vec4(unpackHalf2x16(u0), unpackHalf2x16(u1));
#else
  return vec4(uintBitsToFloat(u0 << 16), uintBitsToFloat(u0 & 0xFFFF0000u), uintBitsToFloat(u1 << 16),
              uintBitsToFloat(u1 & 0xFFFF0000u));
#endif
#elif WTYPE == 3
  const float d = half_of(w, pl.x, r * (cols >> 5) + (k >> 5));
  return d * sbytes4(w.v[r * (cols >> 2) + (k >> 2)]);
#elif WTYPE == 4
  const uint j = k & 31u;
  const uint q = w.v[r * (cols >> 3) + (k >> 5) * 4u + ((j & 15u) >> 2)];
  const uint nib = (j < 16u ? q : q >> 4) & 0x0F0F0F0Fu;
  return half_of(w, pl.x, r * (cols >> 5) + (k >> 5)) * (bytes4(nib) - 8.0);
#elif WTYPE == 5
  const uint blk = (r * (cols >> 8) + (k >> 8)) * 36u;
  const uint e = k & 255u, cc = e >> 6, hi = (e >> 5) & 1u, l = e & 31u;
  const vec2 dd = unpackHalf2x16(w.v[blk]);
  float sc, m;
  q4k_scale_min(uvec3(w.v[blk + 1u], w.v[blk + 2u], w.v[blk + 3u]), 2u * cc + hi, sc, m);
  const uint q = w.v[blk + 4u + 8u * cc + (l >> 2)];
  const uint nib = (hi != 0u ? q >> 4 : q) & 0x0F0F0F0Fu;
  return (dd.x * sc) * bytes4(nib) - dd.y * m;
#elif WTYPE == 6
  const uint rb = r * (cols >> 8) + (k >> 8);
  const uint e = k & 255u, h = e >> 7, g = (e >> 5) & 3u, l = e & 31u;
  const uint ql = w.v[rb * 32u + 16u * h + 8u * (g & 1u) + (l >> 2)];
  const uint qh = w.v[pl.x + rb * 16u + 8u * h + (l >> 2)];
  const uint si = 8u * h + (l >> 4) + 2u * g;
  const int sc = sbyte_of(w.v[pl.y + rb * 4u + (si >> 2)], si & 3u);
  const uint q = ((g < 2u ? ql : ql >> 4) & 0x0F0F0F0Fu) | (((qh >> (2u * g)) & 0x03030303u) << 4);
  return (half_of(w, pl.z, rb) * float(sc)) * (bytes4(q) - 32.0);
#endif
}

// ---- chunks of eight for matrix-vector products ----------------------------------------------------
#if WTYPE <= 3
// Elements 8c .. 8c + 7.
const uint W_HI = 4u;
uint chunk_k(uint c) { return 8u * c; }
void w_chunk(words w, uvec3 pl, uint cols, uint r, uint c, out vec4 lo, out vec4 hi) {
#if WTYPE == 3
  const uint i = r * (cols >> 2) + 2u * c;
  const float d = half_of(w, pl.x, r * (cols >> 5) + (c >> 2));
  lo = d * sbytes4(w.v[i]);
  hi = d * sbytes4(w.v[i + 1u]);
#else
  lo = w_quad(w, pl, cols, r, 8u * c);
  hi = w_quad(w, pl, cols, r, 8u * c + 4u);
#endif
}
#elif WTYPE == 4
// Block c / 4, quant word p = c % 4 of it: low nibbles are elements 4p .. 4p+3, high ones
// 16 + 4p .. 16 + 4p + 3.
const uint W_HI = 16u;
uint chunk_k(uint c) { return (c >> 2) * 32u + (c & 3u) * 4u; }
void w_chunk(words w, uvec3 pl, uint cols, uint r, uint c, out vec4 lo, out vec4 hi) {
  const uint q = w.v[r * (cols >> 3) + c];
  const float d = half_of(w, pl.x, r * (cols >> 5) + (c >> 2));
  lo = d * (bytes4(q & 0x0F0F0F0Fu) - 8.0);
  hi = d * (bytes4((q >> 4) & 0x0F0F0F0Fu) - 8.0);
}
#elif WTYPE == 5
// Block c / 32, quant word p = c % 32 (group cc = p / 8 of 32 bytes, offset o = 4 (p % 8)):
// low nibbles are elements 64cc + o + 0..3 (sub-block 2cc), high ones 64cc + 32 + o + 0..3
// (sub-block 2cc + 1). The block's 4-word head is the same load for its 32 chunks.
const uint W_HI = 32u;
uint chunk_k(uint c) { return (c >> 5) * 256u + ((c >> 3) & 3u) * 64u + (c & 7u) * 4u; }
void w_chunk(words w, uvec3 pl, uint cols, uint r, uint c, out vec4 lo, out vec4 hi) {
  const uint blk = (r * (cols >> 8) + (c >> 5)) * 36u;
  const uint cc = (c >> 3) & 3u;
  const vec2 dd = unpackHalf2x16(w.v[blk]);
  const uvec3 s = uvec3(w.v[blk + 1u], w.v[blk + 2u], w.v[blk + 3u]);
  const uint q = w.v[blk + 4u + (c & 31u)];
  float sc0, m0, sc1, m1;
  q4k_scale_min(s, 2u * cc, sc0, m0);
  q4k_scale_min(s, 2u * cc + 1u, sc1, m1);
  lo = (dd.x * sc0) * bytes4(q & 0x0F0F0F0Fu) - dd.y * m0;
  hi = (dd.x * sc1) * bytes4((q >> 4) & 0x0F0F0F0Fu) - dd.y * m1;
}
#elif WTYPE == 6
// Block c / 32, part p = c % 32, half h = p / 16, q = p % 16: ql word 16h + q of the block and
// qh word 8h + q % 8. The low nibbles are elements 128h + 4q + 0..3 (qh bits of group
// g = q / 8), the high ones 64 further (group g + 2); a run of four shares one scale,
// sc[8h + (q % 8) / 4 + 2 group].
const uint W_HI = 64u;
uint chunk_k(uint c) { return (c >> 5) * 256u + ((c >> 4) & 1u) * 128u + (c & 15u) * 4u; }
void w_chunk(words w, uvec3 pl, uint cols, uint r, uint c, out vec4 lo, out vec4 hi) {
  const uint rb = r * (cols >> 8) + (c >> 5);
  const uint h = (c >> 4) & 1u, q = c & 15u, g = q >> 3;
  const uint ql = w.v[rb * 32u + 16u * h + q];
  const uint qh = w.v[pl.x + rb * 16u + 8u * h + (q & 7u)];
  const uvec2 scw = uvec2(w.v[pl.y + rb * 4u + 2u * h], w.v[pl.y + rb * 4u + 2u * h + 1u]);
  const uint s_lo = ((q & 7u) >> 2) + 2u * g, s_hi = s_lo + 4u;  // scale bytes 0..7 of the half
  const float d = half_of(w, pl.z, rb);
  const float a_lo = d * float(sbyte_of(s_lo < 4u ? scw.x : scw.y, s_lo & 3u));
  const float a_hi = d * float(sbyte_of(s_hi < 4u ? scw.x : scw.y, s_hi & 3u));
  const uint v_lo = (ql & 0x0F0F0F0Fu) | (((qh >> (2u * g)) & 0x03030303u) << 4);
  const uint v_hi = ((ql >> 4) & 0x0F0F0F0Fu) | (((qh >> (2u * g + 4u)) & 0x03030303u) << 4);
  lo = a_lo * (bytes4(v_lo) - 32.0);
  hi = a_hi * (bytes4(v_hi) - 32.0);
}
#endif

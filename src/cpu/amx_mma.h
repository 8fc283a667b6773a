// The matrix-product policy of the AMX kernel (bf16 and e4m3 inputs): both products run on the
// tile unit (TDPBF16PS: bf16 pairs, fp32 accumulation), the online softmax stays in
// AVX-512 on the fp32 S tile. Included by kernel_amx.cpp inside its private namespace.
//
// Tile registers (all 16 rows x 64 bytes): 0-3 accumulators, 4-5 / 2-5 A operands, 6-7 B.
// Layouts (bf16 stored in the float scratch):
//   Q  rows_pad x dq_pad (dq_pad = dq rounded up to 32), exact input values as bf16 (e4m3
//      converts exactly), unscaled: the softmax scale (and fp8 descales) are applied to S in
//      fp32 instead of rounding a scaled Q to bf16; v's descale is applied to O at the end.
//   K  "VNNI" B tiles: per 16-key block and 32-wide d chunk, 16 pair-rows x 16 keys of
//      (K[n][2r], K[n][2r+1]) — a 32-bit transpose of the key rows.
//   V  per 32-key block and 16-wide column block, 16 pair-rows x 16 columns of
//      (V[2r][c], V[2r+1][c]).
//   P  32 x kBN bf16, rounded to nearest even from the fp32 softmax (as the naive
//      bf16 computation of the oracle rule does).
#pragma once

static_assert(kBN % 32 == 0, "AMX key blocks are 32 keys (one bf16 A tile row)");

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

struct AmxMma {
  static constexpr int MR = 32;
  static constexpr int kPanel = 32;
  static constexpr bool kPrescaledQ = false;
  static constexpr bool kScalesKV = false;  // e4m3 is packed exactly as bf16; descales are scalars

  static int64_t dq_pad(int64_t dq) { return (dq + 31) / 32 * 32; }
  static int64_t dv_pad(int64_t dv) { return (dv + 15) / 16 * 16; }
  static int64_t q_floats(int64_t rows_pad, int64_t dq) { return rows_pad * dq_pad(dq) / 2; }
  static int64_t k_floats(int64_t dq) { return int64_t(kBN) * dq_pad(dq) / 2; }
  static int64_t v_floats(int64_t dv) { return int64_t(kBN) * dv_pad(dv) / 2; }
  static int64_t p_floats() { return int64_t(MR) * kBN / 2; }
  // 16 bf16 key rows (pack_k16 of e4m3 input) or one bf16 row.
  static int64_t tmp_floats(int64_t dq, int64_t dv) { return 8 * (dq_pad(dq) + dv_pad(dv)) + 32; }

  // A row as bf16: bf16 input is used in place; e4m3 is converted exactly (3 mantissa bits
  // and its exponent range fit bf16) into `buf`.
  static const uint16_t* bf16_row(const void* src, DType t, int64_t n, uint16_t* buf) {
    if (t != DType::e4m3) return static_cast<const uint16_t*>(src);
    const uint8_t* b = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n; ++i) buf[i] = uint16_t(cpu::cvt_float_to_bits(cpu::kE4m3.v[b[i]]) >> 16);
    return buf;
  }

  static void pack_q(float* qf, int64_t r, const void* src, DType t, int64_t dq, float) {
    const int64_t dp = dq_pad(dq);
    uint16_t* q = reinterpret_cast<uint16_t*>(qf) + r * dp;
    if (t == DType::e4m3) bf16_row(src, t, dq, q);
    else std::memcpy(q, src, size_t(dq) * 2);
    for (int64_t d = dq; d < dp; ++d) q[d] = 0;
  }
  static void zero_q(float* qf, int64_t r0, int64_t r1, int64_t dq) {
    const int64_t dp = dq_pad(dq);
    uint16_t* q = reinterpret_cast<uint16_t*>(qf);
    for (int64_t i = r0 * dp; i < r1 * dp; ++i) q[i] = 0;
  }
  static void zero_kv(float* k, float* v, int64_t dq, int64_t dv) {
    std::memset(k, 0, size_t(k_floats(dq)) * 4);
    std::memset(v, 0, size_t(v_floats(dv)) * 4);
  }
  // Key k: its d pairs are 32-bit units; unit p goes to pair-row p % 16 of chunk p / 16,
  // column k % 16. A masked load zero-fills the odd-dq tail and the dq_pad padding.
  static void pack_k(float* kf, int64_t k, const void* src, DType t, int64_t dq, float, float* tmp) {
    const int64_t nch = dq_pad(dq) / 32;
    uint32_t* kb = reinterpret_cast<uint32_t*>(kf) + (k / 16) * nch * 256 + (k % 16);
    const uint16_t* s16 = bf16_row(src, t, dq, reinterpret_cast<uint16_t*>(tmp));
    alignas(64) uint32_t units[16];
    for (int64_t ch = 0; ch < nch; ++ch) {
      const int64_t left = dq - ch * 32;
      const __mmask32 m = left >= 32 ? ~__mmask32(0) : (__mmask32(1) << left) - 1;
      _mm512_store_si512(units, _mm512_maskz_loadu_epi16(m, s16 + ch * 32));
      uint32_t* dst = kb + ch * 256;
#pragma GCC unroll 16
      for (int r = 0; r < 16; ++r) dst[r * 16] = units[r];
    }
  }
  // 16 keys k0..k0+15 (k0 % 16 == 0) at once: per d chunk, a 16x16 transpose of 32-bit
  // units in registers (64 shuffles) instead of 256 scalar stores (a scalar scatter was a
  // large share of the AMX kernel's time).
  static constexpr bool kHasK16 = true;
  static void pack_k16(float* kf, int64_t k0, const void* const* rows_in, DType t, int64_t dq, float,
                       float* tmp) {
    const int64_t nch = dq_pad(dq) / 32;
    const void* rows[16];
    for (int i = 0; i < 16; ++i)
      rows[i] = bf16_row(rows_in[i], t, dq, reinterpret_cast<uint16_t*>(tmp) + i * dq_pad(dq));
    uint32_t* kb = reinterpret_cast<uint32_t*>(kf) + (k0 / 16) * nch * 256;
    for (int64_t ch = 0; ch < nch; ++ch) {
      const int64_t left = dq - ch * 32;
      const __mmask32 m = left >= 32 ? ~__mmask32(0) : (__mmask32(1) << left) - 1;
      __m512i r[16];
      for (int i = 0; i < 16; ++i)
        r[i] = _mm512_maskz_loadu_epi16(m, static_cast<const uint16_t*>(rows[i]) + ch * 32);
      Simd::transpose16(r);  // r[c]: 32-bit unit c (a bf16 pair) of the 16 keys
      uint32_t* dst = kb + ch * 256;
      for (int c = 0; c < 16; ++c) _mm512_store_si512(dst + c * 16, r[c]);
    }
  }
  static int64_t v_index(int64_t k, int64_t c, int64_t dv) {
    const int64_t ncb = dv_pad(dv) / 16;
    return ((((k / 32) * ncb + c / 16) * 16 + (k % 32) / 2) * 16 + c % 16) * 2 + (k % 2);
  }
  // Value row k fills one half of each 32-bit pair (even keys the low half): widen 16 values
  // to 32 bits, shift odd keys up, and store only this row's halves. Inf/NaN: exponent bits
  // all ones.
  static bool pack_v(float* vf, int64_t k, const void* src, DType t, int64_t dv, float, float* tmp) {
    uint16_t* vb = reinterpret_cast<uint16_t*>(vf);
    const uint16_t* s16 = bf16_row(src, t, dv, reinterpret_cast<uint16_t*>(tmp));
    const int64_t ncb = dv_pad(dv) / 16;
    const bool odd = k & 1;
    const __mmask32 half = odd ? __mmask32(0xAAAAAAAAu) : __mmask32(0x55555555u);
    const __m256i expo = _mm256_set1_epi16(0x7f80);
    __mmask16 nonfinite = 0;
    uint16_t* base = vb + (((k / 32) * ncb) * 16 + (k % 32) / 2) * 32;
    for (int64_t cb = 0; cb < ncb; ++cb) {
      const int64_t left = dv - cb * 16;
      const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
      const __m256i h = _mm256_maskz_loadu_epi16(m, s16 + cb * 16);
      nonfinite |= _mm256_cmpeq_epi16_mask(_mm256_and_si256(h, expo), expo);
      __m512i w = _mm512_cvtepu16_epi32(h);
      if (odd) w = _mm512_slli_epi32(w, 16);
      _mm512_mask_storeu_epi16(base + cb * 16 * 32, half, w);
    }
    return nonfinite != 0;
  }
  static float v_at(const float* vf, int64_t k, int64_t c, int64_t dv) {
    return cpu::cvt_bf16(reinterpret_cast<const uint16_t*>(vf)[v_index(k, c, dv)]);
  }

  // S is kept as its 16x16 fp32 tiles, each stored contiguously: column block c / 16 holds
  // rows 0..31 (two tiles) back to back. Contiguous tile stores keep the QK loop faster than
  // stores at the 1 KB row stride of a row-major 32 x 256 strip (docs/PERFORMANCE.md, CPU backend). The softmax
  // walks a row group's adjacent vectors of each block (softmax_strip's row groups).
  static float* s_at(float* s, int r, int c) {
    const unsigned u = unsigned(c);  // c >= 0: shifts, not signed division
    return s + (u / 16) * (MR * 16) + r * 16 + (u % 16);
  }
  // P's exponential: P is rounded to bf16 right after, so a shorter polynomial suffices.
  static V exp2_p(V x) { return Simd::exp2_bf16(x); }
  // P is rounded to bf16 by the softmax itself (the A operand of P.V).
  // Columns c..c+31 of row r: one VCVTNE2PS2BF16 for both vectors (half the conversion
  // uops of two single-source conversions).
  static void store_p2(float*, float* pf, int r, int c, V p0, V p1) {
    const __m512bh h = _mm512_cvtne2ps_pbh(p1, p0);  // p0 -> low half
    _mm512_store_si512(reinterpret_cast<uint16_t*>(pf) + r * kBN + c, reinterpret_cast<const __m512i&>(h));
  }
  static float p_at(const float*, const float* pf, int r, int k) {
    return cpu::cvt_bf16(reinterpret_cast<const uint16_t*>(pf)[r * kBN + k]);
  }

  static void begin() {
    AmxTileConfig cfg;
    for (int t = 0; t < 8; ++t) {
      cfg.colsb[t] = 64;
      cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
  }
  static void end() { _tile_release(); }

  // Operands split into bf16 planes (amx_split_mma.h) multiply plane pairs into the same
  // accumulators: `pairs` lists (A plane, B plane), smallest products first. The bf16
  // kernel has one plane and one pair.
  struct PlanePair {
    int a, b;
  };
  static constexpr PlanePair kOnePlane[1] = {{0, 0}};

  // S[0..32)[c0..c1) = sum over pairs of Q_a[s0 ..] . K_b[c0..c1) in fp32 (c0, c1 multiples
  // of 32). Q rows are `qrow` bf16 apart (plane a at + a * qplane), K plane b at + b * kplane.
  // 16-key blocks alternate between accumulator pairs (0,1) and (2,3), and a block's S
  // tiles are stored only after the next block's first step is issued, so the tile unit
  // has TDPBF16PS work queued while a store waits for its accumulator; faster than 2x2
  // blocking with the stores at the end of each block (docs/PERFORMANCE.md, CPU backend).
  template <int kPairs>
  static void qk_planes(const uint16_t* q0, int64_t qrow, int64_t qplane, const uint32_t* kb, int64_t kplane,
                        const PlanePair (&pairs)[kPairs], int64_t nch, int c0, int c1, float* s) {
    const uint16_t* q1 = q0 + 16 * qrow;
    const int64_t qstride = qrow * 2;
    for (int k0 = c0; k0 < c1; k0 += 32) {
      const uint32_t* b0 = kb + (k0 / 16) * nch * 256;
      const uint32_t* b1 = b0 + nch * 256;
      _tile_zero(0);
      _tile_zero(1);
      bool first = true;
      for (const PlanePair& pp : pairs)
        for (int64_t ch = 0; ch < nch; ++ch) {
          _tile_loadd(4, q0 + pp.a * qplane + ch * 32, qstride);
          _tile_loadd(5, q1 + pp.a * qplane + ch * 32, qstride);
          _tile_loadd(6, b0 + pp.b * kplane + ch * 256, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 5, 6);
          if (first && k0 > c0) {  // the previous block (keys k0-16..k0) is done by now
            _tile_stored(2, s_at(s, 0, k0 - 16), 64);
            _tile_stored(3, s_at(s, 16, k0 - 16), 64);
          }
          first = false;
        }
      _tile_zero(2);
      _tile_zero(3);
      first = true;
      for (const PlanePair& pp : pairs)
        for (int64_t ch = 0; ch < nch; ++ch) {
          _tile_loadd(4, q0 + pp.a * qplane + ch * 32, qstride);
          _tile_loadd(5, q1 + pp.a * qplane + ch * 32, qstride);
          _tile_loadd(7, b1 + pp.b * kplane + ch * 256, 64);
          _tile_dpbf16ps(2, 4, 7);
          _tile_dpbf16ps(3, 5, 7);
          if (first) {
            _tile_stored(0, s_at(s, 0, k0), 64);
            _tile_stored(1, s_at(s, 16, k0), 64);
          }
          first = false;
        }
    }
    _tile_stored(2, s_at(s, 0, c1 - 16), 64);
    _tile_stored(3, s_at(s, 16, c1 - 16), 64);
  }

  // O[0..32) += sum over pairs of P_a[.., k0..k1) V_b[k0..k1) (P plane a at + a * pplane,
  // V plane b at + b * vplane, bf16 units).
  template <int kPairs>
  static void pv_planes(const uint16_t* pb, int64_t pplane, const uint16_t* vb, int64_t vplane,
                        const PlanePair (&pairs)[kPairs], int k0, int k1, int64_t dv, float* o) {
    const int64_t dp = dv_pad(dv), ncb = dp / 16, ostride = dp * 4;
    // Two column blocks at a time: four independent accumulators (rows 0-15 / 16-31 x two
    // blocks) keep the tile unit busy; with one block, each C tile's load -> 2 tdp -> store
    // chain ran serially.
    for (int64_t cb = 0; cb < ncb; cb += 2) {
      const bool pair = cb + 1 < ncb;
      float* o0 = o + cb * 16;
      float* o1 = o + 16 * dp + cb * 16;
      _tile_loadd(0, o0, ostride);
      _tile_loadd(1, o1, ostride);
      if (pair) {
        _tile_loadd(2, o0 + 16, ostride);
        _tile_loadd(3, o1 + 16, ostride);
      }
      for (const PlanePair& pp : pairs)
        for (int kk = k0; kk < k1; kk += 32) {
          const uint16_t* pa = pb + pp.a * pplane;
          _tile_loadd(4, pa + kk, kBN * 2);
          _tile_loadd(5, pa + 16 * kBN + kk, kBN * 2);
          const uint16_t* v0 = vb + pp.b * vplane + ((kk / 32) * ncb + cb) * 512;
          _tile_loadd(6, v0, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 5, 6);
          if (pair) {
            _tile_loadd(7, v0 + 512, 64);
            _tile_dpbf16ps(2, 4, 7);
            _tile_dpbf16ps(3, 5, 7);
          }
        }
      _tile_stored(0, o0, ostride);
      _tile_stored(1, o1, ostride);
      if (pair) {
        _tile_stored(2, o0 + 16, ostride);
        _tile_stored(3, o1 + 16, ostride);
      }
    }
  }

  // S[0..32)[c0..c1) = Q[s0 ..] . K[c0..c1) in fp32 (c0, c1 multiples of 32).
  LONGATTN_CPU_STAGE static void qk(const float* qf, int64_t s0, int64_t dq, const float* kf, int c0, int c1,
                                    float* s) {
    const int64_t dp = dq_pad(dq);
    qk_planes(reinterpret_cast<const uint16_t*>(qf) + s0 * dp, dp, 0, reinterpret_cast<const uint32_t*>(kf), 0,
              kOnePlane, dp / 32, c0, c1, s);
  }
  // O[0..32) += P[.., k0..k1) V[k0..k1), P already bf16 in `pf` (see store_p2).
  LONGATTN_CPU_STAGE static void pv(const float*, int k0, int k1, const float* vf, int64_t dv, float* o,
                                    float* pf) {
    pv_planes(reinterpret_cast<const uint16_t*>(pf), 0, reinterpret_cast<const uint16_t*>(vf), 0, kOnePlane, k0,
              k1, dv, o);
  }
};

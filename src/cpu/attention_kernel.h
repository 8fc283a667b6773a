// The tiled flash-attention kernel, written once over a small vector interface `Simd` and
// a matrix-product policy `Mma`, compiled once per ISA. A translation unit defines
// LONGATTN_CPU_NS (its private namespace) and `longattn::detail::LONGATTN_CPU_NS::Simd`
// (plus LONGATTN_CPU_AMX for the AMX policy), then includes this file exactly once.
// Everything here has internal linkage, so copies built with different -m flags never meet
// at link time.
//
// One work item = the rows of `group` query heads (sharing one kv head) over a block of
// tokens. Per K/V tile of kBN keys: K and V are converted once (dequantized; laid out for
// the policy's products), then every MR-row strip runs
//   S = Q K^T  ->  softcap, boundary mask  ->  online softmax (log2 units, lazy rescale)
//   ->  O += P V
// with S/P (MR x kBN) staying in L1 between the two products. Policies: fma_mma.h
// (register-blocked FMA microkernels, f32 operands) and amx_mma.h (bf16 tiles).
#include <cstdint>

#include "cpu/convert.h"
#include "cpu/kernel_api.h"

#ifndef LONGATTN_CPU_NS
#error "define LONGATTN_CPU_NS before including attention_kernel.h"
#endif

// Keys per tile (FMA kernels; the AMX kernels set 256). 64 keeps an f32 K or V tile of head
// dim 128 at 32 KB, the P strip at MR x 64 floats, and amortizes the O-strip loads/stores
// of O += PV over 64 FMAs; 32 and 128 were no faster for f32.
#ifndef LONGATTN_CPU_BN
#define LONGATTN_CPU_BN 64
#endif

// Profiling builds (-DLONGATTN_CPU_PROFILE) keep the stages as separate symbols.
#ifdef LONGATTN_CPU_PROFILE
#define LONGATTN_CPU_STAGE __attribute__((noinline))
#else
#define LONGATTN_CPU_STAGE inline
#endif

namespace longattn::detail::LONGATTN_CPU_NS {
namespace {

using cpu::ItemView;
using cpu::KernelConst;
using cpu::RowDesc;
using V = Simd::V;

constexpr int W = Simd::W;
constexpr int kBN = LONGATTN_CPU_BN;

// The matrix-product policy: packing layouts and the two products. Everything else (tiles,
// masks, online softmax, epilogue) is shared by every kernel.
#ifdef LONGATTN_CPU_AMX
#include "cpu/amx_mma.h"
#ifdef LONGATTN_CPU_AMX_SPLIT
#include "cpu/amx_split_mma.h"
using Mma = AmxSplitMma;
#else
using Mma = AmxMma;
#endif
#else
#include "cpu/fma_mma.h"
using Mma = FmaMma;
#endif

constexpr int MR = Mma::MR;
constexpr int kPanel = Mma::kPanel;
static_assert(kBN % kPanel == 0, "a tile is a whole number of panels");
static_assert(kPanel % (2 * W) == 0, "panels are whole vector pairs (the softmax steps 2W columns)");

constexpr float kNegInf = -__builtin_inff();
constexpr float kLn2 = 0.69314718055994531f;
// K/V rows are prefetched this many tiles ahead of their packing.
#ifndef LONGATTN_CPU_PREFETCH_TILES
#define LONGATTN_CPU_PREFETCH_TILES 1
#endif
constexpr int kPrefetchTiles = LONGATTN_CPU_PREFETCH_TILES;
// Lazy rescale threshold (log2 units): O and l are rescaled only when a row's max grew by
// more than this, so P may reach 2^8 (harmless in fp32 accumulators) and most tiles skip the
// pass over O once the max settles. The decision depends only on the row's own values, so
// results stay bitwise identical for any thread count.
constexpr float kRescaleThreshold = 8.0f;

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

// Scratch partition, in floats; every region starts 64-byte aligned.
struct Layout {
  int64_t rows_pad = 0, dq = 0, dv_pad = 0;
  int64_t q = 0, o = 0, m = 0, l = 0, kt = 0, v = 0, s = 0, p = 0, tmp = 0, total = 0;
};

Layout make_layout(const KernelConst& kc, int64_t rows) {
  Layout L;
  L.rows_pad = round_up(rows > 0 ? rows : 1, MR);
  L.dq = kc.dqk;
  L.dv_pad = Mma::dv_pad(kc.dv);
  int64_t off = 0;
  auto take = [&off](int64_t n) {
    int64_t at = off;
    off += round_up(n, 16);
    return at;
  };
  L.q = take(Mma::q_floats(L.rows_pad, L.dq));
  L.o = take(L.rows_pad * L.dv_pad);
  L.m = take(L.rows_pad);
  L.l = take(L.rows_pad);
  L.kt = take(Mma::k_floats(L.dq));
  L.v = take(Mma::v_floats(kc.dv));
  L.s = take(int64_t(MR) * kBN);
  L.p = take(Mma::p_floats());
  L.tmp = take(imax(Mma::tmp_floats(L.dq, kc.dv), L.dv_pad + W));
  L.total = off;
  return L;
}

// The masked-aware O += PV for a boundary strip whose V tile holds Inf/NaN: 0 * Inf would
// turn a masked key into NaN, but the reference never touches masked keys. Rare; scalar.
inline void pv_strip_masked(const float* s, const float* pbuf, int k0, int k1, const float* v, int64_t dv,
                            int64_t dv_pad, float* o, const int64_t* lo, const int64_t* hi,
                            int64_t j0) {
  for (int r = 0; r < MR; ++r) {
    for (int k = k0; k < k1; ++k) {
      if (j0 + k < lo[r] || j0 + k >= hi[r]) continue;
      const float pk = Mma::p_at(s, pbuf, r, k);
      for (int64_t c = 0; c < dv; ++c) o[r * dv_pad + c] += pk * Mma::v_at(v, k, c, dv);
    }
  }
}

// cap * tanh(s / cap) in log2 units: s2 = s * log2(e), c2 = cap * log2(e), so
// s2 / c2 = s / cap and the result is the natural-unit softcap times log2(e).
// tanh|y| = (1 - t) / (1 + t) with t = e^(-2|y|) in (0, 1]: no overflow for any y, and
// NaN stays NaN. Absolute error ~1e-7 * c2, below the f32 rounding of the logit itself.
inline V softcap(V s2, V c2, V inv_c2) {
  const V y = Simd::mul(s2, inv_c2);
  const V t = Simd::exp2(Simd::mul(Simd::abs(y), Simd::set1(-2.0f * 1.4426950408889634f)));
  const V one = Simd::set1(1.0f);
  const V th = Simd::div(Simd::sub(one, t), Simd::add(one, t));
  return Simd::mul(c2, Simd::copysign(th, y));
}

// Online softmax of one strip over columns [c0, c1) (whole panels), in place: S becomes
// P = 2^(S - m_used). m/l/o are the strip's running max, denominator and output rows.
// `scale` (> 0) multiplies S on the fly (the AMX kernel's unscaled Q.K): max commutes with
// it, and 2^(s*scale - m) is one FMA, so no separate pass over S is needed.
// P goes where the policy wants it (Mma::store_p2: in place as f32 for the FMA kernels,
// bf16 into `pbuf` for the AMX kernel, saving a conversion pass).
LONGATTN_CPU_STAGE void softmax_strip(float* s, int c0, int c1, float* m, float* l, float* o, int64_t dv_pad,
                          float scale, float* pbuf) {
  // Two passes over the rows: all maxima (and rescales) first, then all exponentials.
  // Rows go in groups of kG with the group's rows innermost: kG independent max / sum
  // chains instead of one (a single chain per row waits on vmaxps latency), and with the
  // AMX tile layout of S the group's vectors are adjacent. Each row still sees its columns
  // in the same order, so the bits equal a row-at-a-time loop.
  constexpr int kG = MR % 4 == 0 ? 4 : 2;
  static_assert(MR % kG == 0, "row groups tile the strip");
  float msub[MR];
  for (int r0 = 0; r0 < MR; r0 += kG) {
    V mx[kG];
    for (int g = 0; g < kG; ++g) mx[g] = Simd::set1(kNegInf);
    for (int c = c0; c < c1; c += W)
      for (int g = 0; g < kG; ++g) mx[g] = Simd::max(mx[g], Simd::load(Mma::s_at(s, r0 + g, c)));
    for (int g = 0; g < kG; ++g) {
      const int r = r0 + g;
      const float mt = Simd::hmax(mx[g]) * scale;
      float mu = m[r];
      // mu == -inf: mu + 8 == -inf, so any finite tile max triggers the first "rescale"
      // (alpha = 2^-inf = 0 on an all-zero O). NaN compares false and flows through P.
      if (mt > mu + kRescaleThreshold) {
        const float alpha = __builtin_exp2f(mu - mt);
        l[r] *= alpha;
        const V va = Simd::set1(alpha);
        float* orow = o + r * dv_pad;
        for (int64_t c = 0; c < dv_pad; c += W) Simd::store(orow + c, Simd::mul(Simd::load(orow + c), va));
        m[r] = mu = mt;
      }
      // A row that has seen no visible key yet has mu = -inf: subtract 0 so that masked
      // logits give 2^-inf = 0 rather than 2^(-inf - -inf) = NaN.
      msub[r] = mu == kNegInf ? -0.0f : -mu;
    }
  }
  const V vs = Simd::set1(scale);
  for (int r0 = 0; r0 < MR; r0 += kG) {
    V vm[kG], sum[kG];
    for (int g = 0; g < kG; ++g) {
      vm[g] = Simd::set1(msub[r0 + g]);
      sum[g] = Simd::zero();
    }
    // Two vectors per row and step: the AMX policy converts them to bf16 with one
    // two-source instruction (c0, c1 are whole panels, and a panel is 2W columns).
    for (int c = c0; c < c1; c += 2 * W)
      for (int g = 0; g < kG; ++g) {
        const V p0 = Mma::exp2_p(Simd::fma(Simd::load(Mma::s_at(s, r0 + g, c)), vs, vm[g]));
        const V p1 = Mma::exp2_p(Simd::fma(Simd::load(Mma::s_at(s, r0 + g, c + W)), vs, vm[g]));
        Mma::store_p2(s, pbuf, r0 + g, c, p0, p1);
        sum[g] = Simd::add(Simd::add(sum[g], p0), p1);
      }
    for (int g = 0; g < kG; ++g) l[r0 + g] += Simd::hsum(sum[g]);
  }
}

inline void prefetch_row(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 2);
}

int64_t scratch_floats(const KernelConst& kc, int64_t rows_max) {
  return make_layout(kc, rows_max).total;
}

// Policies that cannot take Inf/NaN operands (Mma::kFiniteOnly) report them while packing;
// process_item then stops before writing anything and returns false.
template <class M>
constexpr bool finite_only() {
  if constexpr (requires { M::kFiniteOnly; }) return M::kFiniteOnly;
  return false;
}
template <class M>
void reset_finite() {
  if constexpr (finite_only<M>()) M::saw_nonfinite = false;
}
template <class M>
bool check_finite() {
  if constexpr (finite_only<M>()) {
    if (M::saw_nonfinite) return false;
  }
  return true;
}

bool process_item(const KernelConst& kc, const ItemView& it, float* scratch) {
  const int64_t rows = it.rows;
  if (rows <= 0) return true;
  reset_finite<Mma>();
  const Layout L = make_layout(kc, rows);
  const int64_t rp = L.rows_pad, dq = L.dq, dv = kc.dv, dvp = L.dv_pad;
  float* Q = scratch + L.q;
  float* O = scratch + L.o;
  float* M = scratch + L.m;
  float* Lsum = scratch + L.l;
  float* KT = scratch + L.kt;
  float* Vt = scratch + L.v;
  float* S = scratch + L.s;
  float* P = scratch + L.p;
  float* tmp = scratch + L.tmp;
  Mma::begin();

  // Q is converted once per item; the FMA kernels fold the scale in so that Q.K comes out
  // in log2 units, the AMX kernel keeps exact bf16 Q and scales S instead.
  const float qs = kc.qscale2 * it.q_descale;
  // Kernels that pack raw values (AMX: e4m3 is exact in bf16) apply the fp8 descales as
  // scalars instead: k's to S with the softmax scale, v's to O in the epilogue.
  const float s_scale = Mma::kScalesKV ? qs : qs * it.k_descale;
  const float o_scale = Mma::kScalesKV ? 1.0f : it.v_descale;
  for (int64_t r = 0; r < rows; ++r) Mma::pack_q(Q, r, it.row[r].q, kc.in, dq, Mma::kPrescaledQ ? qs : 1.0f);
  Mma::zero_q(Q, rows, rp, dq);
  if (!check_finite<Mma>()) {
    Mma::end();
    return false;
  }
  for (int64_t i = 0; i < rp * dvp; ++i) O[i] = 0.0f;
  for (int64_t r = 0; r < rp; ++r) {
    // A sink joins max and denominator: it seeds m = sink, l = 2^(sink - m) = 1.
    const bool sink = kc.has_sinks && r < rows && it.row[r].sink2 != kNegInf;
    M[r] = sink ? it.row[r].sink2 : kNegInf;
    Lsum[r] = sink ? 1.0f : 0.0f;
  }
  // Padding rows of the last strip copy the last real row's range: they never force the
  // strip onto the masked path, and their results are never stored.
  auto row_lo = [&](int64_t r) { return it.row[imin(r, rows - 1)].lo; };
  auto row_hi = [&](int64_t r) { return it.row[imin(r, rows - 1)].hi; };

  const V c2 = Simd::set1(kc.softcap2);
  const V inv_c2 = Simd::set1(kc.softcap2 > 0.0f ? 1.0f / kc.softcap2 : 0.0f);
  const V sscale = Simd::set1(s_scale);

  const int64_t es = kc.in == DType::f32 ? 4 : (kc.in == DType::e4m3 ? 1 : 2);
  const int64_t nstrips = rp / MR;
  const int64_t first_tile = (it.key_lo / kBN) * kBN;
  for (int64_t j0 = first_tile; j0 < it.key_hi; j0 += kBN) {
    // Pack the tile: keys outside [key_lo, key_hi) are zero (and always masked).
    const int64_t v0 = imax(j0, it.key_lo) - j0, v1 = imin(j0 + kBN, it.key_hi) - j0;
    if (v0 > 0 || v1 < kBN) Mma::zero_kv(KT, Vt, dq, dv);
    bool v_nonfinite = false;
    for (int64_t k = v0; k < v1;) {
      if (Mma::kHasK16 && k % 16 == 0 && k + 16 <= v1) {
        Mma::pack_k16(KT, k, it.krow + (j0 + k - it.key_lo), kc.in, dq, it.k_descale, tmp);
        for (int64_t e = k + 16; k < e; ++k)
          v_nonfinite |= Mma::pack_v(Vt, k, it.vrow[j0 + k - it.key_lo], kc.in, dv, it.v_descale, tmp);
        continue;
      }
      Mma::pack_k(KT, k, it.krow[j0 + k - it.key_lo], kc.in, dq, it.k_descale, tmp);
      v_nonfinite |= Mma::pack_v(Vt, k, it.vrow[j0 + k - it.key_lo], kc.in, dv, it.v_descale, tmp);
      ++k;
    }
    if (finite_only<Mma>() && (v_nonfinite || !check_finite<Mma>())) {
      Mma::end();
      return false;
    }

    // Rows of the next tile are prefetched into L2 a slice per strip: packing reads K/V
    // rows (strided by the head count) from L3 or DRAM, and without prefetch the
    // conversion loop stalls on each one.
    const int64_t pn0 = j0 + kPrefetchTiles * kBN, pn1 = imin(pn0 + kBN, it.key_hi);
    const int64_t pchunk = pn1 > pn0 ? (pn1 - pn0 + nstrips - 1) / nstrips : 0;
    for (int64_t s0 = 0; s0 < rp; s0 += MR) {
      for (int64_t k = pn0 + s0 / MR * pchunk, ke = imin(k + pchunk, pn1); k < ke; ++k) {
        prefetch_row(it.krow[k - it.key_lo], dq * es);
        prefetch_row(it.vrow[k - it.key_lo], dv * es);
      }
      int64_t lo[MR], hi[MR];
      int64_t min_lo = INT64_MAX, max_hi = INT64_MIN, max_lo = INT64_MIN, min_hi = INT64_MAX;
      bool any = false, all = true;
      for (int r = 0; r < MR; ++r) {
        lo[r] = row_lo(s0 + r);
        hi[r] = row_hi(s0 + r);
        if (lo[r] < hi[r]) {
          any = true;
          min_lo = imin(min_lo, lo[r]);
          max_hi = imax(max_hi, hi[r]);
        } else {
          all = false;
        }
        max_lo = imax(max_lo, lo[r]);
        min_hi = imin(min_hi, hi[r]);
      }
      // Fully masked for this strip: skip both products.
      if (!any || max_hi <= j0 || min_lo >= j0 + kBN) continue;
      const bool full = all && max_lo <= j0 && min_hi >= j0 + kBN;
      int c0 = 0, c1 = kBN;
      if (!full) {  // only the panels some row of the strip can see
        c0 = int((imax(min_lo, j0) - j0) / kPanel * kPanel);
        c1 = int(round_up(imin(max_hi, j0 + kBN) - j0, kPanel));
      }
      Mma::qk(Q, s0, dq, KT, c0, c1, S);
      float sm_scale = Mma::kPrescaledQ ? 1.0f : s_scale;
      if (sm_scale != 1.0f && kc.softcap2 > 0.0f) {  // softcap needs the scaled logits
        sm_scale = 1.0f;
        for (int r = 0; r < MR; ++r)
          for (int c = c0; c < c1; c += W) {
            float* p = Mma::s_at(S, r, c);
            Simd::store(p, Simd::mul(Simd::load(p), sscale));
          }
      }
      if (kc.softcap2 > 0.0f) {
        for (int r = 0; r < MR; ++r)
          for (int c = c0; c < c1; c += W) {
            float* p = Mma::s_at(S, r, c);
            Simd::store(p, softcap(Simd::load(p), c2, inv_c2));
          }
      }
      if (!full) {  // element mask, boundary tiles only (after softcap, as specified)
        for (int r = 0; r < MR; ++r) {
          int64_t a = c0, b = c0;  // visible columns [a, b) of this row
          if (lo[r] < hi[r]) {
            a = imin(imax(lo[r] - j0, c0), c1);
            b = imin(imax(hi[r] - j0, a), c1);
          }
          for (int64_t c = c0; c < a; ++c) *Mma::s_at(S, r, int(c)) = kNegInf;
          for (int64_t c = b; c < c1; ++c) *Mma::s_at(S, r, int(c)) = kNegInf;
        }
      }
      softmax_strip(S, c0, c1, M + s0, Lsum + s0, O + s0 * dvp, dvp, sm_scale, P);
      if (!full && v_nonfinite)
        pv_strip_masked(S, P, c0, c1, Vt, dv, dvp, O + s0 * dvp, lo, hi, j0);
      else
        Mma::pv(S, c0, c1, Vt, dv, O + s0 * dvp, P);
    }
  }
  Mma::end();

  // Epilogue: O / l in f32, rounded once to the output dtype. l == 0 means no visible key
  // (and no sink): output 0 and LSE -inf. A NaN l is not 0 and propagates.
  for (int64_t r = 0; r < rows; ++r) {
    const float lr = Lsum[r];
    const float* orow = O + r * dvp;
    if (lr == 0.0f) {
      for (int64_t c = 0; c < dv; ++c) tmp[c] = 0.0f;
    } else {
      const float inv = o_scale / lr;
      for (int64_t c = 0; c < dv; ++c) tmp[c] = orow[c] * inv;
    }
    cpu::store_row_scalar(tmp, kc.out, dv, it.row[r].out);
    if (it.row[r].lse)
      *it.row[r].lse = lr == 0.0f ? kNegInf : (M[r] + __builtin_log2f(lr)) * kLn2;
  }
  return true;
}

void process(const KernelConst& kc, const ItemView& it, float* scratch) { (void)process_item(kc, it, scratch); }

}  // namespace

}  // namespace longattn::detail::LONGATTN_CPU_NS

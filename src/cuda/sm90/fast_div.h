// Division of 32-bit indices by a divisor fixed at launch, as a multiply and a shift.
//
// The scheduler decodes tile ids and the kernel maps query heads to kv heads with divisions by
// launch constants (q-blocks, heads, section sizes, the GQA group). A 32-bit integer division
// is a float reciprocal (MUFU.RCP) plus a dozen correction instructions on the GPU; with the
// host's magic number it is one wide multiply and a shift.
//
// Rule: for a divisor d in [1, 2^31) let l = ceil(log2 d) and m = ceil(2^(31 + l) / d), so
// m < 2^32 (d > 2^(l-1)). Then floor(n m / 2^(31 + l)) = floor(n / d) for every n in
// [0, 2^31): with m d = 2^(31 + l) + e, 0 <= e < d, n m / 2^(31 + l) = n / d + n e / (d 2^(31 + l)),
// whose second term is below 2^31 d / (d 2^(31 + l)) = 2^-l <= 1 / d, and n / d's fractional
// part is at most (d - 1) / d. Callers keep n below 2^31 (the host refuses 2^31 tiles or more).
// NOTES: page_math.h page_div (the paged producer's token-to-page division) is the
// multiply-high form (mulhi, add, shift). Here that form made ptxas spill the paged 192 / 128
// kernel (12 bytes); this wide form (one IMAD.WIDE.U32 and a 64-bit shift) does not.
#pragma once

#include <cassert>
#include <cstdint>

#include "common/mask_rule.h"  // LONGATTN_HD

namespace longattn::cuda::sm90 {

struct FastDiv {
  uint32_t d = 1, m = 0x80000000u, s = 31;  // the divisor 1

  FastDiv() = default;
  // Host only: d in [1, 2^31).
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    assert(divisor >= 1 && divisor < (1u << 31));
    uint32_t l = 0;
    while ((uint64_t(1) << l) < divisor) ++l;
    s = 31 + l;
    m = uint32_t(((uint64_t(1) << s) + divisor - 1) / divisor);
  }
  LONGATTN_HD uint32_t div(uint32_t n) const { return uint32_t((uint64_t(n) * m) >> s); }
  LONGATTN_HD uint32_t mod(uint32_t n) const { return n - div(n) * d; }
};

}  // namespace longattn::cuda::sm90

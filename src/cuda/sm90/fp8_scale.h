// How the fp8 kernels keep P inside e4m3's range (host and device).
//
// P enters P V as e4m3 (largest finite value 448 = 2^8.81, saturating). The softmax computes
// P = 2^(x - m + kFp8POffset) with m the row's running max: the offset lifts P's largest
// entries toward the top of the range (finer resolution for the small ones: e4m3 is normal
// down to 2^-6, so entries down to 2^-(6 + offset) of the max keep 3 mantissa bits). With the
// lazy rescale the running max moves only when a block's max exceeds it by more than the
// threshold, so x - m <= threshold and P <= 2^(offset + threshold). If that could pass 448, P
// would saturate while the float32 row sum (over the unrounded P) would not, and O would be
// silently wrong; the static_assert below forbids it and tests/gpu/test_fp8.cpp checks the
// edge (maxima growing by just under the threshold, many keys near each).
#pragma once

namespace longattn::cuda::sm90 {

inline constexpr int kFp8POffset = 6;                // log2 units
inline constexpr float kFp8RescaleThreshold = 2.5f;  // log2 units
static_assert(kFp8POffset + kFp8RescaleThreshold <= 8.807f, "P must stay below e4m3's 448");

}  // namespace longattn::cuda::sm90

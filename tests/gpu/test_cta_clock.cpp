// The diagnostic probe (Overrides::cta_clock, params.h kCtaClockSlots) on the dense kind: every
// CTA records its start and SM, each consumer warpgroup's end, and its tiles in order; the
// recorded tiles cover the call's (batch, head, q-block) tiles exactly once, under the static
// sectioned snake and under the dynamic counter, and each CTA's times run forward.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "common/overrides.h"
#include "common/problem.h"
#include "cuda/sm90/params.h"
#include "device_case.h"
#include "gpu_case.h"
#include "longattn/longattn.h"

namespace longattn::gputest {
namespace {

void probe_case(detail::Force dynamic) {
  // 2 x 1000 (a partial last q-block: 8 q-blocks) x 12 heads, hdim 128, causal: 192 tiles, more
  // than one round on any Hopper part, at most 32 per CTA (the probe's record).
  constexpr int64_t kB = 2, kSeq = 1000, kH = 12, kD = 128, kMBlocks = 8;
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const int64_t n = kB * kSeq * kH * kD;
  std::mt19937 rng(11 + uint32_t(dynamic));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<uint16_t> h(static_cast<size_t>(n));
  DeviceBuf q(size_t(n) * 2), k(size_t(n) * 2), v(size_t(n) * 2), o(size_t(n) * 2);
  DeviceBuf clk(size_t(cuda::sm90::kCtaClockSlots) * size_t(sms) * 8);
  ASSERT_TRUE(q.p && k.p && v.p && o.p && clk.p);
  for (void* p : {q.p, k.p, v.p}) {
    for (int64_t i = 0; i < n; ++i) detail::store_from_float(h.data(), DType::bf16, i, u(rng));
    cudaMemcpy(p, h.data(), size_t(n) * 2, cudaMemcpyHostToDevice);
  }
  cudaMemset(o.p, 0xFF, size_t(n) * 2);  // NaN: an unwritten element shows
  cudaMemset(clk.p, 0, size_t(cuda::sm90::kCtaClockSlots) * size_t(sms) * 8);
  const Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q.p, DType::bf16, {kB, kSeq, kH, kD}, g);
  a.k = make_tensor(k.p, DType::bf16, {kB, kSeq, kH, kD}, g);
  a.v = make_tensor(v.p, DType::bf16, {kB, kSeq, kH, kD}, g);
  a.out = make_tensor(o.p, DType::bf16, {kB, kSeq, kH, kD}, g);
  a.mask.causal = true;
  a.backend = Backend::cuda;
  detail::Overrides ov;
  ov.dynamic = dynamic;
  ov.cta_clock = reinterpret_cast<uint64_t>(clk.p);
  const Status st = detail::forward_with(a, ov);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemcpy(h.data(), o.p, size_t(n) * 2, cudaMemcpyDeviceToHost);
  for (int64_t i = 0; i < n; ++i) {
    const float x = detail::load_as_float(h.data(), DType::bf16, i);
    ASSERT_TRUE(std::fabs(x) <= 1.f) << "output element " << i << ": " << x;  // a mix of V in [-1, 1]
  }
  std::vector<uint64_t> c(size_t(cuda::sm90::kCtaClockSlots) * size_t(sms));
  cudaMemcpy(c.data(), clk.p, c.size() * 8, cudaMemcpyDeviceToHost);
  std::set<std::tuple<uint64_t, uint64_t, uint64_t>> seen;
  int64_t tiles = 0;
  for (int cta = 0; cta < sms; ++cta) {
    const uint64_t* r = c.data() + size_t(cuda::sm90::kCtaClockSlots) * size_t(cta);
    ASSERT_NE(r[0], 0u) << "CTA " << cta << " wrote no start";
    EXPECT_LT(r[1], 1024u) << "CTA " << cta << ": SM id";
    EXPECT_GE(r[2], r[0]) << "CTA " << cta;
    EXPECT_GE(r[3], r[0]) << "CTA " << cta;
    uint64_t last = r[0];
    for (int t = 0; t < cuda::sm90::kCtaClockTiles; ++t) {
      const uint64_t* e = r + 8 + 4 * t;
      if (e[0] == 0) {
        EXPECT_EQ(e[1], 0u) << "CTA " << cta << " tile " << t << ": one warpgroup's end alone";
        break;
      }
      ASSERT_NE(e[1], 0u) << "CTA " << cta << " tile " << t;
      EXPECT_GE(e[0], last) << "CTA " << cta << " tile " << t;
      last = e[0];
      EXPECT_LE(e[0], r[2]);
      EXPECT_LE(e[1], r[3]);
      for (int w = 0; w < 2; ++w) {  // first S ready: before the warpgroup's end, within 0.1 s
        const uint32_t half = uint32_t(e[3] >> (32 * w));
        ASSERT_NE(half, 0u) << "CTA " << cta << " tile " << t << " warpgroup " << w << ": no first-S time";
        EXPECT_LT(uint32_t(uint32_t(e[w]) - half), 100000000u) << "CTA " << cta << " tile " << t << " warpgroup " << w;
      }
      const uint64_t b = e[2] >> 32, hh = (e[2] >> 16) & 0xFFFF, m = e[2] & 0xFFFF;
      ASSERT_TRUE(b < kB && hh < kH && m < kMBlocks) << "CTA " << cta << " tile " << t << ": " << b << " " << hh << " " << m;
      EXPECT_TRUE(seen.insert({b, hh, m}).second) << "tile (" << b << ", " << hh << ", " << m << ") twice";
      ++tiles;
    }
  }
  EXPECT_EQ(tiles, kB * kH * kMBlocks);
}

TEST(GpuCtaClock, StaticSnakeRecordsEveryTile) {
  if (!cuda_available()) GTEST_SKIP() << "no sm_90 device";
  probe_case(detail::Force::off);
}
TEST(GpuCtaClock, DynamicCounterRecordsEveryTile) {
  if (!cuda_available()) GTEST_SKIP() << "no sm_90 device";
  probe_case(detail::Force::on);
}

}  // namespace
}  // namespace longattn::gputest

// NaN in one key propagates to exactly the rows that see it (the reference's contract,
// tests/reference/closed_form_test.cpp), through the exp2 pass, the row max and the lazy
// rescale of the 16-bit kinds (hdim 64, 128) and the fp8 hdim-128 kind. The NaN keys sit at
// columns 31 and 159: in the last pair of a 16-key group (column 15 mod 16), 128 apart,
// so a kernel that treated some exp2s apart (a polynomial on the FMA pipe for every
// 4th or 8th, as was tried) would meet one too.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/problem.h"
#include "device_case.h"
#include "gpu_case.h"
#include "longattn/longattn.h"

namespace longattn::gputest {
namespace {

void nan_key_case(DType t, int64_t d) {
  constexpr int64_t kSeq = 300, kHeads = 2;
  const int64_t n = kSeq * kHeads * d, es = t == DType::e4m3 ? 1 : 2;
  const std::vector<int64_t> nan_keys = {31, 159};
  std::mt19937 rng(7 + uint32_t(d) + uint32_t(t == DType::e4m3));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<uint8_t> hq(size_t(n * es)), hk(size_t(n * es)), hv(size_t(n * es));
  for (int64_t i = 0; i < n; ++i) {
    detail::store_from_float(hq.data(), t, i, u(rng));
    detail::store_from_float(hk.data(), t, i, u(rng));
    detail::store_from_float(hv.data(), t, i, u(rng));
  }
  for (int64_t j : nan_keys) detail::store_from_float(hk.data(), t, (j * kHeads + 1) * d + 5, NAN);  // head 1 only
  DeviceBuf q(hq.size()), k(hk.size()), v(hv.size()), o(size_t(n * 2)), l(size_t(kSeq * kHeads * 4)), ds(64);
  ASSERT_TRUE(q.p && k.p && v.p && o.p && l.p && ds.p);
  cudaMemcpy(q.p, hq.data(), hq.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(k.p, hk.data(), hk.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(v.p, hv.data(), hv.size(), cudaMemcpyHostToDevice);
  cudaMemset(o.p, 0x7F, size_t(n * 2));  // poison: 3.4e38, finite, past the bound below
  const float ones[kHeads] = {1.f, 1.f};
  cudaMemcpy(ds.p, ones, sizeof(ones), cudaMemcpyHostToDevice);
  const Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q.p, t, {1, kSeq, kHeads, d}, g);
  a.k = make_tensor(k.p, t, {1, kSeq, kHeads, d}, g);
  a.v = make_tensor(v.p, t, {1, kSeq, kHeads, d}, g);
  a.out = make_tensor(o.p, DType::bf16, {1, kSeq, kHeads, d}, g);
  a.lse = make_tensor(l.p, DType::f32, {1, kHeads, kSeq}, g);
  if (t == DType::e4m3) {
    a.q_descale = make_tensor(ds.p, DType::f32, {1, kHeads}, g);
    a.k_descale = make_tensor(ds.p, DType::f32, {1, kHeads}, g);
    a.v_descale = make_tensor(ds.p, DType::f32, {1, kHeads}, g);
  }
  a.mask.causal = true;
  a.backend = Backend::cuda;
  const Status st = forward(a);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> ho(static_cast<size_t>(n));
  cudaMemcpy(ho.data(), o.p, ho.size() * 2, cudaMemcpyDeviceToHost);
  int64_t wrong = 0;
  for (int64_t i = 0; i < kSeq; ++i)
    for (int64_t h = 0; h < kHeads; ++h) {
      // Causal: row i sees keys <= i. Elsewhere O is a convex mix of V in [-1, 1] (fp8: P rounded
      // to e4m3 against a row sum of unrounded P, a few % over at most).
      const bool sees_nan = h == 1 && i >= nan_keys[0];
      for (int64_t c = 0; c < d; ++c) {
        const float x = detail::load_as_float(ho.data(), DType::bf16, (i * kHeads + h) * d + c);
        if (sees_nan ? !std::isnan(x) : !(std::fabs(x) <= 1.25f)) {
          if (++wrong <= 5) ADD_FAILURE() << "row " << i << " head " << h << " col " << c << ": " << x;
        }
      }
    }
  EXPECT_EQ(wrong, 0) << "dtype " << int(t) << " hdim " << d;
}

TEST(GpuNanKey, PropagatesToTheRowsThatSeeIt) {
  if (!cuda_available()) GTEST_SKIP() << "no sm_90 device";
  nan_key_case(DType::bf16, 64);
  nan_key_case(DType::bf16, 128);
  nan_key_case(DType::e4m3, 128);
}

}  // namespace
}  // namespace longattn::gputest

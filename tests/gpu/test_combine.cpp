// cuda_combine against the reference combine on the same random partials, with empty
// splits (LSE -inf) and a token whose splits are all empty (out 0, LSE -inf).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/problem.h"
#include "longattn/longattn.h"

namespace longattn {
namespace {

TEST(GpuCombine, MatchesReference) {
  if (!cuda_available()) GTEST_SKIP() << "no sm_90 device";
  for (DType out_t : {DType::bf16, DType::f32}) {
    const int64_t splits = 3, tokens = 37, heads = 5, dim = 72;
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> U(-2.f, 2.f);
    std::vector<float> op(size_t(splits * tokens * heads * dim)), lp(size_t(splits * heads * tokens));
    for (auto& x : op) x = U(rng);
    for (auto& x : lp) x = 3 * U(rng);
    for (int64_t h = 0; h < heads; ++h) lp[size_t((1 * heads + h) * tokens + 5)] = -INFINITY;  // empty split
    for (int64_t sp = 0; sp < splits; ++sp)
      for (int64_t h = 0; h < heads; ++h) lp[size_t((sp * heads + h) * tokens + 9)] = -INFINITY;  // all empty
    const size_t ob = size_t(tokens * heads * dim * dtype_size(out_t));
    void *dop, *dlp, *dout, *dlse;
    ASSERT_EQ(cudaMalloc(&dop, op.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dlp, lp.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dout, ob), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dlse, size_t(heads * tokens * 4)), cudaSuccess);
    cudaMemcpy(dop, op.data(), op.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dlp, lp.data(), lp.size() * 4, cudaMemcpyHostToDevice);
    cudaMemset(dout, 0xFF, ob);
    cudaMemset(dlse, 0xFF, size_t(heads * tokens * 4));
    Device g{DeviceKind::cuda, 0};
    CombineArgs c;
    c.out_partial = make_tensor(dop, DType::f32, {splits, tokens, heads, dim}, g);
    c.lse_partial = make_tensor(dlp, DType::f32, {splits, heads, tokens}, g);
    c.out = make_tensor(dout, out_t, {tokens, heads, dim}, g);
    c.lse = make_tensor(dlse, DType::f32, {heads, tokens}, g);
    c.backend = Backend::cuda;
    Status st = combine(c);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> gout(ob);
    std::vector<float> glse(size_t(heads * tokens));
    cudaMemcpy(gout.data(), dout, ob, cudaMemcpyDeviceToHost);
    cudaMemcpy(glse.data(), dlse, glse.size() * 4, cudaMemcpyDeviceToHost);

    std::vector<uint8_t> rout(ob);
    std::vector<float> rlse(size_t(heads * tokens));
    CombineArgs h = c;
    h.out_partial = make_tensor(op.data(), DType::f32, {splits, tokens, heads, dim});
    h.lse_partial = make_tensor(lp.data(), DType::f32, {splits, heads, tokens});
    h.out = make_tensor(rout.data(), out_t, {tokens, heads, dim});
    h.lse = make_tensor(rlse.data(), DType::f32, {heads, tokens});
    h.backend = Backend::reference;
    st = combine(h);
    ASSERT_TRUE(st.ok()) << st.message();
    // Tolerance: one rounding of the output dtype plus float32 accumulation.
    const double tol = out_t == DType::bf16 ? 2e-2 : 1e-4;
    double err = 0;
    int64_t nan = 0;
    for (int64_t i = 0; i < tokens * heads * dim; ++i) {
      double a = detail::load_as_float(gout.data(), out_t, i), b = detail::load_as_float(rout.data(), out_t, i);
      nan += std::isnan(a);
      err = std::max(err, std::fabs(a - b));
    }
    double lerr = 0;
    for (size_t i = 0; i < glse.size(); ++i) {
      if (std::isinf(rlse[i])) {
        EXPECT_TRUE(std::isinf(glse[i]) && glse[i] < 0) << "lse " << i;
        continue;
      }
      lerr = std::max(lerr, double(std::fabs(glse[i] - rlse[i])));
    }
    EXPECT_EQ(nan, 0);
    EXPECT_LT(err, tol) << dtype_name(out_t);
    EXPECT_LT(lerr, 1e-5);
    for (int64_t h2 = 0; h2 < heads; ++h2)
      for (int64_t d = 0; d < dim; ++d)
        EXPECT_EQ(detail::load_as_float(gout.data(), out_t, (9 * heads + h2) * dim + d), 0.f);
    cudaFree(dop);
    cudaFree(dlp);
    cudaFree(dout);
    cudaFree(dlse);
  }
}

}  // namespace
}  // namespace longattn

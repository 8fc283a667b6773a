// Packed GQA on the GPU (cuda/sm90/pack_gqa.h; the ragged / paged kernels with KernelConfig
// kPack): short seq_q x odd seq_k, groups 2 / 4 / 8 and MQA (16 / 1), head dims 64 / 128 /
// 256, causal in both alignments, windows, chunks, no mask, sinks, softcap, LSE, fp32 output,
// ragged q / k with zero-length sequences, seqused_k, paged K/V, strided rows. Every case
// runs with Overrides::pack_gqa on (packed wherever the kernel can: g a power of two) against
// the float64 reference under the oracle rule on every row, outputs poisoned first; keys no
// output reads hold NaN / Inf. PackedVsUnpacked runs the same inputs packed and unpacked
// (pack_gqa off) and bounds their difference by the two oracle bounds.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "device_case.h"
#include "common/overrides.h"
#include "gpu_case.h"
#include "support/testing.h"

namespace longattn {
namespace {

using gputest::DeviceCase;
using gputest::have_sm90;
using gputest::to_device;
using testing::Case;
using testing::CaseSpec;

// Packed GQA forced on / off (the rule otherwise decides; pack_gqa.h).
detail::Overrides packed(bool on) {
  detail::Overrides o;
  o.pack_gqa = on ? detail::Force::on : detail::Force::off;
  return o;
}

CaseSpec G(int64_t batch, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, uint64_t seed) {
  CaseSpec s;
  s.batch = batch;
  s.seq_q = sq;
  s.seq_k = sk;
  s.heads_q = hq;
  s.heads_kv = hkv;
  s.dim_qk = s.dim_v = d;
  s.amp = 1.5f;
  s.seed = seed;
  return s;
}

double atol_for(const CaseSpec& s) { return 1e-3 + (s.softcap > 0 ? double(s.softcap) / 2048.0 : 0.0); }

std::vector<CaseSpec> pack_cases() {
  std::vector<CaseSpec> v;
  // seq_q x seq_k grid; group, head dim and mask rotate over it.
  const int64_t sqs[] = {1, 3, 16, 37, 64, 100}, sks[] = {1, 200, 1000, 4099};
  const int64_t groups[] = {2, 4, 8, 16}, dims[] = {128, 64, 256};
  int i = 0;
  for (int64_t sq : sqs)
    for (int64_t sk : sks) {
      const int64_t g = groups[i % 4], d = dims[i % 3], hkv = g == 16 ? 1 : 2;
      CaseSpec s = G(sk > 1000 ? 1 : 2, sq, sk, g * hkv, hkv, d, 100 + uint64_t(i));
      switch (i % 5) {
        case 0: break;  // no mask
        case 1: s.mask.causal = true; break;  // bottom-right
        case 2:
          s.mask.causal = true;
          s.mask.align = CausalAlign::top_left;
          break;
        case 3:  // sliding window, both sides
          s.mask.window_left = 50;
          s.mask.window_right = 7;
          break;
        default:  // chunked, with causal
          s.mask.causal = true;
          s.mask.chunk_size = 64;
          break;
      }
      v.push_back(s);
      ++i;
    }
  // Features, one case each at least.
  CaseSpec s = G(2, 16, 1000, 8, 2, 128, 201);  // sinks + LSE, causal
  s.mask.causal = true;
  s.sinks = true;
  v.push_back(s);
  s = G(2, 37, 1000, 16, 2, 128, 202);  // softcap, g 8
  s.softcap = 30.f;
  v.push_back(s);
  s = G(2, 64, 200, 8, 2, 64, 203);  // f16 in, fp32 out
  s.dtype = DType::f16;
  s.out_dtype = DType::f32;
  v.push_back(s);
  s = G(1, 3, 999, 16, 1, 256, 204);  // MQA, fp32 out, sinks, window, hdim 256
  s.out_dtype = DType::f32;
  s.sinks = true;
  s.mask.window_left = 300;
  s.mask.causal = true;
  v.push_back(s);
  s = G(5, 37, 1000, 8, 2, 128, 205);  // ragged q with zero-length sequences, seqused_k
  s.ragged_q = true;
  s.seqlens_q = {37, 0, 16, 1, 0};
  s.seqused_k = true;
  s.mask.causal = true;
  v.push_back(s);
  s = G(4, 64, 1000, 8, 2, 128, 206);  // ragged q and k, zero-length keys and queries
  s.ragged_q = s.ragged_k = true;
  s.seqlens_q = {3, 64, 0, 17};
  s.seqlens_k = {1000, 0, 300, 5};
  s.mask.causal = true;
  v.push_back(s);
  s = G(3, 16, 1000, 8, 2, 128, 207);  // paged, page 16, seqused_k
  s.page_size = 16;
  s.seqused_k = true;
  s.mask.causal = true;
  v.push_back(s);
  s = G(2, 37, 700, 8, 1, 256, 208);  // paged, page 64 (= the hdim-256 block), g 8
  s.page_size = 64;
  v.push_back(s);
  s = G(3, 20, 900, 4, 1, 64, 209);  // paged + ragged q
  s.page_size = 128;
  s.ragged_q = true;
  s.seqlens_q = {20, 0, 9};
  s.mask.causal = true;
  v.push_back(s);
  s = G(2, 33, 500, 8, 2, 128, 210);  // strided rows
  s.padded = true;
  s.mask.causal = true;
  v.push_back(s);
  s = G(2, 16, 4099, 32, 8, 128, 211);  // the benchmark's heads (32 / 8), KV prefix
  s.mask.causal = true;
  v.push_back(s);
  // seqused_q (issue 16): dense q, paged, ragged q; chunk with a window.
  s = G(3, 37, 1000, 16, 2, 128, 212);
  s.used_q = {37, 0, 20};
  s.mask.causal = true;
  v.push_back(s);
  s = G(3, 16, 900, 8, 2, 128, 213);
  s.page_size = 16;
  s.seqused_k = true;
  s.used_q = {16, 9, 1};
  s.mask.causal = true;
  v.push_back(s);
  s = G(3, 40, 700, 8, 2, 128, 214);
  s.ragged_q = true;
  s.seqlens_q = {40, 0, 33};
  s.used_q = {17, 0, 33};
  s.mask.causal = true;
  s.mask.window_left = 100;
  s.mask.chunk_size = 64;
  v.push_back(s);
  s = G(2, 64, 500, 8, 2, 64, 215);
  s.mask.window_left = 30;
  s.mask.window_right = 30;
  s.mask.chunk_size = 50;
  v.push_back(s);
  return v;
}

// Runs `d` on the device and checks it; the returned result carries the oracle bound.
testing::OracleResult run_checked(Case& c, DeviceCase& d, const CaseSpec& s, const detail::Overrides& ov) {
  testing::OracleResult r;
  Status st = detail::forward_with(d.args, ov);
  if (!st.ok()) {
    r.failure = "forward: " + st.message();
    return r;
  }
  if (cudaDeviceSynchronize() != cudaSuccess) {
    r.failure = "device error";
    return r;
  }
  d.download(c.out, d.args.out);
  d.download(c.lse, d.args.lse);
  return testing::check_against_reference(c.args, atol_for(s));
}

class GpuPackGqa : public ::testing::TestWithParam<CaseSpec> {};

TEST_P(GpuPackGqa, MatchesReference) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  const CaseSpec& s = GetParam();
  Case c = testing::make_case(s);
  gputest::poison_unread_kv(c.args, s.seed % 2 ? INFINITY : NAN);
  DeviceCase d = to_device(c);
  testing::OracleResult r = run_checked(c, d, s, packed(true));
  printf("%-64s err %.2e naive %.2e lse %.2e\n", testing::describe(s).c_str(), r.max_err, r.naive_err, r.lse_err);
  EXPECT_TRUE(r.failure.empty()) << testing::describe(s) << ": " << r.failure;
}

std::string spec_name(const ::testing::TestParamInfo<CaseSpec>& i) {
  const CaseSpec& s = i.param;
  return "sq" + std::to_string(s.seq_q) + "_sk" + std::to_string(s.seq_k) + "_h" + std::to_string(s.heads_q) + "_" +
         std::to_string(s.heads_kv) + "_d" + std::to_string(s.dim_qk) + "_s" + std::to_string(s.seed);
}

INSTANTIATE_TEST_SUITE_P(PackGqa, GpuPackGqa, ::testing::ValuesIn(pack_cases()), spec_name);

// Every case is a valid problem (runs without a GPU: a spec mistake shows here, not on the
// device).
TEST(GpuPackGqaSpecs, ValidOnHost) {
  for (const CaseSpec& s : pack_cases()) {
    Case c = testing::make_case(s);
    Status st = validate(c.args);
    EXPECT_TRUE(st.ok()) << testing::describe(s) << ": " << st.message();
  }
}

// The same inputs packed and unpacked: each within its oracle bound of the reference, so
// within the sum of the bounds of each other; also checked directly, element by element.
TEST(GpuPackGqaAB, PackedVsUnpacked) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  std::vector<CaseSpec> specs;
  CaseSpec s = G(2, 16, 4099, 32, 8, 128, 301);
  s.mask.causal = true;
  specs.push_back(s);
  s = G(3, 37, 1000, 16, 1, 64, 302);  // MQA, sinks
  s.sinks = true;
  specs.push_back(s);
  s = G(2, 64, 777, 8, 4, 256, 303);  // g 2, window
  s.mask.window_left = 100;
  s.mask.causal = true;
  specs.push_back(s);
  for (const CaseSpec& sp : specs) {
    Case c = testing::make_case(sp);
    DeviceCase d = to_device(c);
    testing::OracleResult r1, r0;
    r1 = run_checked(c, d, sp, packed(true));
    testing::HostTensor o1 = c.out, l1 = c.lse;
    // Poison the device outputs again (NaN bytes) before the unpacked run.
    ASSERT_EQ(cudaMemset(d.bufs[3].get(), 0xff, c.out.bytes.size()), cudaSuccess);
    if (c.lse.t.data) ASSERT_EQ(cudaMemset(d.bufs[4].get(), 0xff, c.lse.bytes.size()), cudaSuccess);
    r0 = run_checked(c, d, sp, packed(false));
    EXPECT_TRUE(r1.failure.empty()) << "packed " << testing::describe(sp) << ": " << r1.failure;
    EXPECT_TRUE(r0.failure.empty()) << "unpacked " << testing::describe(sp) << ": " << r0.failure;
    double diff = 0, ldiff = 0;
    for (int64_t e = 0; e < c.out.t.numel(); ++e) diff = std::max(diff, std::fabs(get(o1, e) - get(c.out, e)));
    if (c.lse.t.data)
      for (int64_t e = 0; e < c.lse.t.numel(); ++e) {
        const double a = get(l1, e), b = get(c.lse, e);
        if (std::isfinite(a) || std::isfinite(b)) ldiff = std::max(ldiff, std::fabs(a - b));
      }
    printf("%-64s packed vs unpacked: out %.2e (bounds %.2e + %.2e) lse %.2e\n", testing::describe(sp).c_str(), diff,
           r1.bound, r0.bound, ldiff);
    EXPECT_LE(diff, r1.bound + r0.bound) << testing::describe(sp);
    EXPECT_LE(ldiff, r1.lse_bound + r0.lse_bound) << testing::describe(sp);
  }
}

}  // namespace
}  // namespace longattn

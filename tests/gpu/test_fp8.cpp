// fp8 (e4m3) forward on the GPU against the float64 reference on the dequantized inputs
// (oracle rule, tests/support/testing.h: the naive computation rounds P to e4m3 in [0, 1], so
// its error bounds the kernel's, whose P carries 2^kFp8POffset more resolution), every
// feature of the 16-bit path; and the range edge of P (cuda/sm90/fp8_scale.h).
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/overrides.h"
#include "common/problem.h"
#include "cuda/plan.h"
#include "cuda/sm90/fp8_scale.h"
#include "device_case.h"
#include "gpu_case.h"
#include "support/testing.h"

namespace longattn {
namespace {

using gputest::DeviceCase;
using gputest::have_sm90;
using gputest::to_device;
using testing::Case;
using testing::CaseSpec;

CaseSpec F8(int64_t batch, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, bool causal, uint64_t seed) {
  CaseSpec s;
  s.batch = batch;
  s.seq_q = sq;
  s.seq_k = sk;
  s.heads_q = hq;
  s.heads_kv = hkv;
  s.dim_qk = s.dim_v = 128;
  s.dtype = DType::e4m3;
  s.mask.causal = causal;
  s.amp = 2.f;  // e4m3 inputs in [-2, 2): descales in [0.5, 2) set the logits' scale
  s.seed = seed;
  return s;
}

// The fp8 kernels' cases: one line each, every feature the bf16 path has at head dim 128.
std::vector<CaseSpec> fp8_cases() {
  std::vector<CaseSpec> v;
  v.push_back(F8(2, 300, 300, 4, 4, false, 1));
  v.push_back(F8(2, 333, 517, 4, 2, true, 2));   // GQA, KV prefix, bottom-right causal
  v.push_back(F8(1, 1000, 1000, 8, 1, true, 3));  // MQA
  v.push_back(F8(3, 129, 1, 4, 2, false, 4));     // one key
  CaseSpec s = F8(2, 700, 400, 4, 2, true, 5);    // seq_q > seq_k: rows that see no key
  s.mask.align = CausalAlign::top_left;
  v.push_back(s);
  s = F8(2, 640, 700, 4, 2, true, 6);
  s.out_dtype = DType::f32;
  v.push_back(s);
  s = F8(2, 500, 640, 4, 2, false, 7);
  s.out_dtype = DType::f16;
  s.lse = false;
  v.push_back(s);
  s = F8(2, 500, 900, 4, 2, true, 8);  // window
  s.mask.window_left = 200;
  v.push_back(s);
  s = F8(2, 600, 600, 4, 2, true, 9);  // chunked
  s.mask.chunk_size = 256;
  v.push_back(s);
  s = F8(2, 768, 768, 4, 2, true, 57);  // chunks tiling the sequence: a batch of them (chunk_batch.h)
  s.mask.chunk_size = 256;
  v.push_back(s);
  s = F8(1, 1024, 1024, 4, 1, false, 58);  // the same, full within each chunk, one batch
  s.mask.chunk_size = 512;
  v.push_back(s);
  s = F8(2, 300, 777, 4, 2, true, 10);  // sinks + softcap
  s.sinks = true;
  s.softcap = 20.f;
  v.push_back(s);
  s = F8(1, 900, 333, 4, 2, false, 11);  // sinks alone
  s.sinks = true;
  v.push_back(s);
  s = F8(4, 400, 600, 4, 2, true, 12);  // ragged q and k
  s.ragged_q = s.ragged_k = true;
  v.push_back(s);
  s = F8(3, 300, 800, 4, 2, true, 13);  // seqused_k
  s.seqused_k = true;
  v.push_back(s);
  for (int64_t page : {16, 64, 128, 256}) {  // paged K/V
    s = F8(3, 200, 700, 4, 2, true, 20 + uint64_t(page));
    s.page_size = page;
    s.seqused_k = true;
    v.push_back(s);
  }
  s = F8(2, 16, 2000, 32, 8, true, 30);  // short seq_q: packed GQA
  v.push_back(s);
  s = F8(2, 250, 500, 4, 2, true, 31);  // padded (strided) rows
  s.padded = true;
  v.push_back(s);
  s = F8(1, 3000, 20000, 2, 1, false, 32);  // batch 1, few tiles: split-KV
  v.push_back(s);
  v.push_back(F8(1, 300, 6000, 4, 2, true, 35));  // split-KV, causal (splits the diagonal's too)
  v.push_back(F8(2, 700, 400, 4, 2, true, 36));   // bottom-right, seq_q > seq_k: tiles with no key
  // More tiles than SMs: each CTA runs several tiles (Q's two buffers, the K / V / Vt rings
  // and the epilogue across tiles); bf16 out full, f16 out causal.
  v.push_back(F8(8, 520, 520, 8, 2, false, 37));
  s = F8(6, 700, 700, 8, 4, true, 38);
  s.out_dtype = DType::f16;
  v.push_back(s);
  s = F8(3, 300, 500, 4, 2, true, 33);  // seqused_q (dense q: rows past it keep their poison)
  s.used_q = {300, 0, 129};
  v.push_back(s);
  s = F8(3, 400, 600, 4, 2, true, 34);  // ragged q + seqused_q, chunk with a window
  s.ragged_q = true;
  s.seqused_q = true;
  s.mask.window_left = 150;
  s.mask.chunk_size = 256;
  v.push_back(s);
  // Narrower head dims on the 128 kernel (issue 16; zero-filled columns): 64, 96 / 80, and
  // paged 48.
  s = F8(2, 333, 517, 4, 2, true, 40);
  s.dim_qk = s.dim_v = 64;
  v.push_back(s);
  s = F8(2, 300, 600, 4, 2, false, 41);
  s.dim_qk = 96;
  s.dim_v = 80;
  v.push_back(s);
  s = F8(2, 200, 700, 4, 2, true, 42);
  s.dim_qk = s.dim_v = 48;
  s.page_size = 64;
  s.seqused_k = true;
  v.push_back(s);
  // 256 / 256, dense: the fp8 hdim-256 kernel on V transposed in global memory (fp8_vt.h):
  // GQA with a KV prefix (bottom-right causal), full with seq_q < seq_k, MQA over several key
  // blocks, keys not a multiple of 16 (the transpose's zero padding) or of 128 (TMA's), one
  // key, f32 out, f16 out without LSE.
  auto d256 = [](CaseSpec x) {
    x.dim_qk = x.dim_v = 256;
    return x;
  };
  v.push_back(d256(F8(2, 333, 517, 4, 2, true, 43)));
  v.push_back(d256(F8(1, 200, 1100, 8, 2, false, 49)));
  v.push_back(d256(F8(1, 777, 777, 4, 1, true, 50)));
  v.push_back(d256(F8(3, 129, 1, 4, 4, false, 51)));
  s = d256(F8(2, 250, 263, 4, 2, true, 52));
  s.out_dtype = DType::f32;
  v.push_back(s);
  s = d256(F8(2, 384, 384, 2, 2, false, 53));
  s.out_dtype = DType::f16;
  s.lse = false;
  v.push_back(s);
  // v of 512 runs as two column slices of 256 (forward_sm90.cpp split_v_forward), each on the
  // fp8 hdim-256 kernel over its own slice of V.
  s = F8(2, 200, 333, 4, 2, true, 54);
  s.dim_qk = 256;
  s.dim_v = 512;
  v.push_back(s);
  // Head dims above 128 otherwise: the f16 kernels on upcast copies (fp8_upcast.h; Q carries
  // q x k descales by sequence, dense V or else the output rows v's): 192, 192 / 128 with ragged q and k,
  // paged 256 (the pool upcast whole), seqused_q (rows past it keep their poison through the
  // row scaling), sinks + softcap.
  s = F8(2, 300, 400, 4, 2, false, 44);
  s.dim_qk = s.dim_v = 192;
  v.push_back(s);
  s = F8(3, 300, 500, 4, 2, true, 45);
  s.dim_qk = 192;
  s.dim_v = 128;
  s.ragged_q = s.ragged_k = true;
  v.push_back(s);
  s = F8(2, 1030, 1100, 4, 2, false, 45);  // hdim 64, 1100 visible keys: the f16 kernel after the upcast (rule)
  s.dim_qk = s.dim_v = 64;
  v.push_back(s);
  s = F8(3, 200, 700, 4, 2, true, 46);
  s.dim_qk = s.dim_v = 256;
  s.page_size = 64;
  s.seqused_k = true;
  v.push_back(s);
  s = F8(3, 300, 500, 4, 2, true, 47);
  s.dim_qk = s.dim_v = 256;
  s.used_q = {300, 0, 129};
  v.push_back(s);
  s = F8(3, 400, 600, 4, 2, true, 48);
  s.dim_qk = s.dim_v = 192;
  s.ragged_q = true;
  s.seqused_q = true;
  s.sinks = true;
  s.softcap = 20.f;
  v.push_back(s);
  return v;
}

// The oracle rule with the fp8 tensor-core accumulation term (tests/support/testing.h):
// acc_eps = 2^-11 in general; 0 where every partial sum is exact (the range test).
constexpr double kAccEps = 1.0 / 2048;

testing::OracleResult run_fp8(const CaseSpec& s, Case& c, double acc_eps = kAccEps, const detail::Overrides& ov = {}) {
  testing::OracleResult r;
  DeviceCase d = to_device(c);
  const Status st = detail::forward_with(d.args, ov);
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
  return testing::check_against_reference(c.args, 1e-3, acc_eps);
}

class GpuFp8 : public ::testing::TestWithParam<CaseSpec> {};

// Whether Overrides::fp8_vt_global changes the kernel of this call: planned both ways on the
// host as forward_sm90.cpp plans it (a call the planner refuses counts as changed).
bool vt_override_matters(const CaseSpec& s) {
  Case c = testing::make_case(s);
  DeviceCase d = to_device(c);
  detail::Problem p;
  if (!detail::build_problem(d.args, &p).ok()) return true;
  cuda::ForwardPlan plan[2];
  for (int i = 0; i < 2; ++i) {
    detail::Overrides ov;
    ov.fp8_vt_global = i ? detail::Force::on : detail::Force::off;
    if (!cuda::plan_forward(d.args, p, ov, 132, int64_t(50) << 20, &plan[i]).ok()) return true;
  }
  return plan[0].kernel != plan[1].kernel;
}

// Each case on both hdim-128 kinds of plain attention (Overrides::fp8_vt_global: dense_vt, V
// transposed in global memory, and the dense kind's in-kernel transposer) where the override
// changes the kind, else once (features and other head dims: one kind), from fresh poisoned
// outputs each time.
TEST_P(GpuFp8, MatchesReference) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  const CaseSpec& s = GetParam();
  const bool both = vt_override_matters(s);
  for (const detail::Force vt : {detail::Force::on, detail::Force::off}) {
    if (vt == detail::Force::off && !both) break;
    Case c = testing::make_case(s);
    gputest::poison_unread_kv(c.args, s.seed % 2 ? INFINITY : NAN);
    detail::Overrides ov;
    ov.fp8_vt_global = vt;
    const testing::OracleResult r = run_fp8(s, c, kAccEps, ov);
    printf("fp8 %-60s vt %d err %.2e naive %.2e (bound %.2e) lse %.2e (bound %.2e)\n",
           testing::describe(s).c_str(), int(vt), r.max_err, r.naive_err, r.bound, r.lse_err, r.lse_bound);
    EXPECT_TRUE(r.failure.empty()) << testing::describe(s) << " fp8_vt_global " << int(vt) << ": " << r.failure;
  }
}

std::string spec_name(const ::testing::TestParamInfo<CaseSpec>& i) {
  const CaseSpec& s = i.param;
  return "b" + std::to_string(s.batch) + "_sq" + std::to_string(s.seq_q) + "_sk" + std::to_string(s.seq_k) + "_h" +
         std::to_string(s.heads_q) + "x" + std::to_string(s.heads_kv) + "_s" + std::to_string(s.seed);
}

INSTANTIATE_TEST_SUITE_P(Fp8, GpuFp8, ::testing::ValuesIn(fp8_cases()), spec_name);

TEST(GpuFp8Specs, ValidOnHost) {
  for (const CaseSpec& s : fp8_cases()) {
    Case c = testing::make_case(s);
    EXPECT_TRUE(validate(c.args).ok()) << testing::describe(s) << ": " << validate(c.args).message();
  }
}

// Causal hdim 128 and 256 (the fp8 dense_vt kinds, no sectioned snake) on the sectioned order as
// a device list (plan.cpp section_list): by the rule (a 4 MB L2 budget: sections of some of
// the 12 pairs at 3000 keys) and forced with sections of 3 pairs, bottom-right and top-left,
// GQA, a partial last q-block and key block.
TEST(GpuFp8SectionList, DenseCausal) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  for (const int dim : {128, 256}) {
    for (const bool forced : {false, true}) {
      for (const bool top_left : {false, true}) {
        CaseSpec s = forced ? F8(2, 700, 900, 8, 2, true, 60 + top_left) : F8(1, 3000, 3000, 12, 4, true, 62 + top_left);
        s.dim_qk = s.dim_v = dim;
        if (top_left) s.mask.align = CausalAlign::top_left;
        Case c = testing::make_case(s);
        c.args.l2_budget_bytes = 4 << 20;
        detail::Overrides ov;
        ov.fp8_vt_global = detail::Force::on;  // hdim 128: dense_vt at these sizes too
        if (forced) {
          ov.sections = 3;
          ov.section_list = detail::Force::on;
        }
        const testing::OracleResult r = run_fp8(s, c, kAccEps, ov);
        printf("fp8 section list d%d %-50s err %.2e (bound %.2e)\n", dim, testing::describe(s).c_str(), r.max_err,
               r.bound);
        EXPECT_TRUE(r.failure.empty()) << testing::describe(s) << ": " << r.failure;
      }
    }
  }
}

// fp8 on the f16 kernels after the exact upcast (Overrides::fp8_upcast on) and on the fp8
// kernel (off), head dims 64 and 128: dense (V scaled in its upcast), ragged K / V and paged
// K / V (the output rows scaled after the forward), GQA and causal, against the same oracle;
// strided (padded) rows too.
TEST(GpuFp8Upcast, BothPathsMatchTheReference) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  std::vector<CaseSpec> cases;
  for (const int dim : {64, 128}) {
    CaseSpec s = F8(2, 333, 517, 4, 2, true, 80 + dim);
    s.dim_qk = s.dim_v = dim;
    cases.push_back(s);
    s = F8(3, 300, 450, 6, 2, false, 81 + dim);
    s.dim_qk = s.dim_v = dim;
    s.ragged_q = s.ragged_k = true;
    cases.push_back(s);
    s = F8(2, 200, 700, 4, 1, true, 82 + dim);
    s.dim_qk = s.dim_v = dim;
    s.page_size = 64;
    cases.push_back(s);
    s = F8(2, 250, 400, 4, 2, false, 83 + dim);  // strided rows
    s.dim_qk = s.dim_v = dim;
    s.padded = true;
    cases.push_back(s);
  }
  for (const CaseSpec& s : cases) {
    for (const detail::Force f : {detail::Force::on, detail::Force::off}) {
      Case c = testing::make_case(s);
      gputest::poison_unread_kv(c.args, NAN);
      detail::Overrides ov;
      ov.fp8_upcast = f;
      const testing::OracleResult r = run_fp8(s, c, kAccEps, ov);
      printf("fp8 upcast %-3s %-56s err %.2e (bound %.2e)\n", f == detail::Force::on ? "on" : "off",
             testing::describe(s).c_str(), r.max_err, r.bound);
      EXPECT_TRUE(r.failure.empty()) << testing::describe(s) << (f == detail::Force::on ? " upcast" : "") << ": "
                                     << r.failure;
    }
  }
}

// Device memory taken until less than `keep` bytes stay free (at least one allocation of
// `keep` fails), in chunks, released on destruction. The stream-ordered pool is trimmed first
// so that the memory earlier calls freed into it counts as free.
struct MemoryHog {
  std::vector<void*> chunks;
  bool ok = false;
  explicit MemoryHog(size_t keep) {
    cudaDeviceSynchronize();
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess) cudaMemPoolTrimTo(pool, 0);
    for (size_t chunk = size_t(1) << 30; chunk >= keep / 4 && chunk > 0; chunk /= 2) {
      void* d = nullptr;
      while (cudaMalloc(&d, chunk) == cudaSuccess) chunks.push_back(d);
      cudaGetLastError();
    }
    void* probe = nullptr;
    ok = cudaMalloc(&probe, keep) != cudaSuccess;
    cudaGetLastError();
    if (!ok) cudaFree(probe);
  }
  ~MemoryHog() {
    for (void* d : chunks) cudaFree(d);
  }
};

// fp8 hdim 128 plain attention where the rule takes dense_vt (4500 visible keys per row) but its
// V-sized scratch cannot be allocated: the call runs on the dense kind instead and matches the
// reference; with dense_vt forced it fails naming the scratch and writes nothing.
TEST(GpuFp8VtScratch, FallsBackToTheDenseKindWhenMemoryIsShort) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  const CaseSpec s = F8(1, 300, 4500, 4, 2, false, 91);
  const size_t vt_bytes = size_t(s.seq_k) * size_t(s.heads_kv) * 128;  // about the scratch (keys padded up)
  for (const detail::Force vt : {detail::Force::rule, detail::Force::on}) {
    Case c = testing::make_case(s);
    DeviceCase d = to_device(c);
    const std::vector<uint8_t> poison = c.out.bytes;
    Status st;
    {
      MemoryHog hog(vt_bytes);
      ASSERT_TRUE(hog.ok) << "could not leave less than " << vt_bytes << " bytes of device memory free";
      detail::Overrides ov;
      ov.fp8_vt_global = vt;
      ov.kv_splits = 1;  // 12 tiles: the split-KV rule would allocate scratch too
      st = detail::forward_with(d.args, ov);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    d.download(c.out, d.args.out);
    d.download(c.lse, d.args.lse);
    if (vt == detail::Force::on) {
      EXPECT_FALSE(st.ok());
      EXPECT_NE(st.message().find("fp8 Vt scratch"), std::string::npos) << st.message();
      EXPECT_TRUE(c.out.bytes == poison) << "a failed call wrote its output";
      continue;
    }
    ASSERT_TRUE(st.ok()) << st.message();
    const testing::OracleResult r = testing::check_against_reference(c.args, 1e-3, kAccEps);
    printf("fp8 Vt scratch short, dense kind: err %.2e (bound %.2e)\n", r.max_err, r.bound);
    EXPECT_TRUE(r.failure.empty()) << r.failure;
  }
}

// The range edge of P (fp8_scale.h). Every row's logits rise by just under the lazy-rescale
// threshold from one key block to the next in the order the kernel visits them (the last block
// first), with every key of a block at that block's level: the running max never moves, so the
// P of block after block climbs toward 2^(offset + threshold) and every key sits near the top.
// With offset + threshold above log2(448), P would saturate in e4m3 while the float32 row sum
// kept growing, and O would be wrong by far more than the oracle allows.
// Every fp8 kernel: head dim 128 on dense_vt and on the dense kind, 256.
TEST(GpuFp8Range, MaxGrowingJustUnderTheThreshold) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  const std::pair<int, detail::Force> kernels[] = {
      {128, detail::Force::on}, {128, detail::Force::off}, {256, detail::Force::rule}};
  for (const auto& [dim, vt] : kernels) {
    constexpr int kBlock = 128, kBlocks = 12, kSk = kBlock * kBlocks;
    CaseSpec s = F8(1, 64, kSk, 2, 1, false, 77);
    s.dim_qk = s.dim_v = dim;
    s.lse = true;
    Case c = testing::make_case(s);
    // q = (16, 0, ...): logit of key j = scale qd kd 16 k_j[0]. k_j[0] = level of j's block
    // (integers 0..11, exact in e4m3); one level = (threshold - 0.05) log2 units.
    const double step_log2 = double(cuda::sm90::kFp8RescaleThreshold) - 0.05;
    const double scale = 1.0 / std::sqrt(double(dim));
    const double dqk = step_log2 / std::log2(std::exp(1.0)) / (scale * 16.0);  // qd kd for one level per unit
    auto* q = reinterpret_cast<__nv_fp8_e4m3*>(c.q.bytes.data());
    auto* k = reinterpret_cast<__nv_fp8_e4m3*>(c.k.bytes.data());
    for (int64_t i = 0; i < s.seq_q * s.heads_q; ++i)
      for (int d = 0; d < dim; ++d) q[i * dim + d] = __nv_fp8_e4m3(d == 0 ? 16.f : 0.f);
    for (int64_t j = 0; j < kSk; ++j)
      for (int d = 0; d < dim; ++d) k[j * dim + d] = __nv_fp8_e4m3(d == 0 ? float(kBlocks - 1 - j / kBlock) : 0.f);
    float* qd = reinterpret_cast<float*>(c.q_descale.bytes.data());
    float* kd = reinterpret_cast<float*>(c.k_descale.bytes.data());
    qd[0] = float(dqk);
    kd[0] = 1.f;
    // Q K^T has one non-zero term per logit: exact, so no accumulation term.
    detail::Overrides ov;
    ov.fp8_vt_global = vt;
    const testing::OracleResult r = run_fp8(s, c, 0.0, ov);
    printf("fp8 range edge, hdim %d vt %d: err %.2e naive %.2e (bound %.2e), P up to 2^%.2f\n", dim,
           int(vt), r.max_err, r.naive_err, r.bound, cuda::sm90::kFp8POffset + step_log2);
    EXPECT_TRUE(r.failure.empty()) << "hdim " << dim << " vt " << int(vt) << ": " << r.failure;
  }
}

}  // namespace
}  // namespace longattn

// Args::cp_world / cp_rank (zigzag context parallelism) on the CUDA backend: a rank's call
// over the gathered, rank-major K/V against the float64 reference of the same call (whose
// meaning tests/cpu/cp_zigzag_test.cpp checks against one call on the whole sequence).
// Every rank of each world, causal and full, GQA, the dense and feature kinds (sinks,
// softcap), fp8 (on both hdim-128 kinds), head dims 64 / 128 / 256 at chunks of their tiles;
// poisoned outputs.
#include <gtest/gtest.h>

#include <string>

#include "common/overrides.h"
#include "device_case.h"
#include "support/testing.h"

namespace longattn::gputest {
namespace {

using testing::HostTensor;

struct CpCase {
  int64_t world, chunk, heads_q, heads_kv, dim;
  bool causal;
  DType in = DType::bf16;
  bool sinks = false;
  float softcap = 0.f;
  DType out = DType::f32;  // bf16 / f16 (q's): O through shared memory and TMA stores
  int64_t kv_pad = 0;      // extra rows per rank in k / v's buffer: a rank stride other than 2c rows
  detail::Force fp8_vt = detail::Force::rule;  // fp8: dense_vt (on) or the dense kind (off)
};

std::string name(const CpCase& c) {
  return "w" + std::to_string(c.world) + "_c" + std::to_string(c.chunk) + "_h" + std::to_string(c.heads_q) + "x" +
         std::to_string(c.heads_kv) + "_d" + std::to_string(c.dim) + (c.causal ? "_causal" : "_full") + "_" +
         dtype_name(c.in) + (c.sinks ? "_sinks" : "") + (c.softcap > 0.f ? "_softcap" : "") + "_out" +
         dtype_name(c.out) + (c.kv_pad ? "_kvpad" : "") + (c.fp8_vt == detail::Force::rule ? "" : c.fp8_vt == detail::Force::on ? "_vt" : "_novt");
}

// One rank's call on the device; "" when it matches the reference. `status` receives the
// forward's status (the refusal test reads it).
std::string run_rank(const CpCase& c, int64_t rank, uint64_t seed, Status* status = nullptr) {
  const int64_t n = 2 * c.chunk;
  HostTensor q = testing::random_tensor(c.in, {1, n, c.heads_q, c.dim}, seed, -2.f, 2.f);
  // k / v: the first 2c rows of each rank's (2c + kv_pad)-row block (the view keeps the stride).
  HostTensor k = testing::random_tensor(c.in, {c.world, n + c.kv_pad, c.heads_kv, c.dim}, seed + 1, -2.f, 2.f);
  HostTensor v = testing::random_tensor(c.in, {c.world, n + c.kv_pad, c.heads_kv, c.dim}, seed + 2);
  k.t.shape[1] = v.t.shape[1] = n;
  HostTensor out = testing::empty_tensor(c.out, {1, n, c.heads_q, c.dim});
  HostTensor lse = testing::empty_tensor(DType::f32, {1, c.heads_q, n});
  HostTensor sinks = testing::random_tensor(DType::f32, {c.heads_q}, seed + 3, -1.f, 3.f);
  HostTensor qd, kd, vd;
  Args a;
  a.q = q.t, a.k = k.t, a.v = v.t, a.out = out.t, a.lse = lse.t;
  a.mask.causal = c.causal;
  a.softcap = c.softcap;
  if (c.sinks) a.sinks = sinks.t;
  if (c.in == DType::e4m3) {
    qd = testing::random_tensor(DType::f32, {1, c.heads_kv}, seed + 4, 0.5f, 1.5f);
    kd = testing::random_tensor(DType::f32, {1, c.heads_kv}, seed + 5, 0.5f, 1.5f);
    vd = testing::random_tensor(DType::f32, {1, c.heads_kv}, seed + 6, 0.5f, 1.5f);
    a.q_descale = qd.t, a.k_descale = kd.t, a.v_descale = vd.t;
  }
  a.cp_world = int(c.world);
  a.cp_rank = int(rank);
  testing::poison(out);
  testing::poison(lse);
  DeviceCase d;
  d.args = a;
  d.args.backend = Backend::cuda;
  d.args.q = d.upload(q), d.args.k = d.upload(k), d.args.v = d.upload(v);
  d.args.out = d.upload(out), d.args.lse = d.upload(lse);
  if (c.sinks) d.args.sinks = d.upload(sinks);
  if (c.in == DType::e4m3) d.args.q_descale = d.upload(qd), d.args.k_descale = d.upload(kd), d.args.v_descale = d.upload(vd);
  detail::Overrides ov;
  ov.fp8_vt_global = c.fp8_vt;
  const Status st = detail::forward_with(d.args, ov);
  if (status) *status = st;
  if (cudaDeviceSynchronize() != cudaSuccess) return "CUDA error after the call";
  d.download(out, d.args.out);
  d.download(lse, d.args.lse);
  if (!st.ok()) {
    const int64_t untouched = testing::count_nan(out) + testing::count_nan(lse);
    return "forward: " + st.message() + (untouched == out.t.numel() + lse.t.numel() ? "" : " (and it wrote)");
  }
  const testing::OracleResult r = testing::check_against_reference(a, 1e-3, c.in == DType::e4m3 ? 1.0 / 2048 : 0.0);
  return r.failure;
}

class GpuCpZigzag : public ::testing::TestWithParam<CpCase> {};

TEST_P(GpuCpZigzag, EveryRankMatchesTheReference) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  const CpCase& c = GetParam();
  for (int64_t r = 0; r < c.world; ++r) EXPECT_EQ(run_rank(c, r, 11 + 7 * uint64_t(r)), "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GpuCpZigzag,
    ::testing::Values(CpCase{1, 128, 4, 2, 128, true}, CpCase{2, 256, 4, 2, 128, true}, CpCase{4, 128, 3, 3, 128, true},
                      CpCase{3, 128, 4, 1, 128, false, DType::f16}, CpCase{2, 384, 2, 2, 64, true},
                      CpCase{2, 128, 4, 2, 128, true, DType::bf16, true, 20.f}, CpCase{3, 256, 2, 1, 128, true, DType::e4m3, false, 0.f, DType::f32, 0, detail::Force::on},
                      CpCase{3, 256, 2, 1, 128, true, DType::e4m3, false, 0.f, DType::f32, 0, detail::Force::off},
                      CpCase{2, 128, 4, 2, 128, false, DType::e4m3, false, 0.f, DType::bf16, 48, detail::Force::on},
                      CpCase{2, 640, 2, 2, 256, true}, CpCase{2, 128, 4, 4, 96, true},
                      CpCase{4, 128, 4, 2, 128, true, DType::bf16, false, 0.f, DType::bf16, 64},
                      CpCase{2, 384, 2, 2, 64, false, DType::f16, false, 0.f, DType::f16, 8},
                      CpCase{2, 896, 2, 1, 192, true, DType::bf16, false, 0.f, DType::bf16}),
    [](const ::testing::TestParamInfo<CpCase>& info) { return name(info.param); });

// A chunk the kernel's tiles do not divide: NotSupported naming cp_world, nothing written.
TEST(GpuCpZigzagRefused, ChunkOffTheTiles) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  Status st;
  const std::string r = run_rank(CpCase{2, 96, 2, 2, 128, true}, 1, 5, &st);
  EXPECT_EQ(st.code(), Status::Code::not_supported) << st.message();
  EXPECT_NE(st.message().find("cp_world"), std::string::npos) << st.message();
  EXPECT_EQ(r.find("and it wrote"), std::string::npos) << r;
}

}  // namespace
}  // namespace longattn::gputest

// Backend dispatch, the small public helpers, and what a build without CUDA reports.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "support/testing.h"

namespace longattn::testing {
namespace {

Case small_case() {
  CaseSpec s;
  s.batch = 1, s.seq_q = 3, s.seq_k = 4, s.heads_q = 2, s.heads_kv = 1, s.dim_qk = s.dim_v = 8;
  return make_case(s);
}

void to_cuda(Args& a) {
  for (Tensor* t : {&a.q, &a.k, &a.v, &a.out, &a.lse}) t->device = Device{DeviceKind::cuda, 0};
}

TEST(Types, DtypeSizesAndNames) {
  EXPECT_EQ(dtype_size(DType::f32), 4);
  EXPECT_EQ(dtype_size(DType::f16), 2);
  EXPECT_EQ(dtype_size(DType::bf16), 2);
  EXPECT_EQ(dtype_size(DType::e4m3), 1);
  EXPECT_EQ(dtype_size(DType::i32), 4);
  EXPECT_STREQ(dtype_name(DType::bf16), "bf16");
  EXPECT_STREQ(dtype_name(DType::e4m3), "e4m3");
  EXPECT_STREQ(backend_name(Backend::automatic), "auto");
  EXPECT_STREQ(backend_name(Backend::reference), "reference");
  EXPECT_STREQ(cpu_isa_name(CpuIsa::automatic), "auto");
  EXPECT_STREQ(cpu_isa_name(CpuIsa::avx512), "avx512");
  EXPECT_STREQ(cpu_isa_name(CpuIsa::amx), "amx");
  EXPECT_GT(std::strlen(version()), 0u);
}

TEST(Types, MakeTensorIsRowMajor) {
  float dummy;
  Tensor t = make_tensor(&dummy, DType::f32, {2, 3, 5, 7});
  EXPECT_EQ(t.rank, 4);
  EXPECT_EQ(t.numel(), 210);
  EXPECT_EQ(t.stride[0], 105);
  EXPECT_EQ(t.stride[1], 35);
  EXPECT_EQ(t.stride[2], 7);
  EXPECT_EQ(t.stride[3], 1);
  EXPECT_EQ(t.device.kind, DeviceKind::cpu);
}

TEST(Dispatch, ReferenceBackendRuns) {
  Case c = small_case();
  OracleResult r = run_and_check(c.args);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
}

TEST(Dispatch, HostBackendsRefuseDeviceTensors) {
  for (Backend b : {Backend::reference, Backend::cpu}) {
    Case c = small_case();
    Args a = c.args;
    to_cuda(a);
    a.backend = b;
    std::vector<uint8_t> before = c.out.bytes;
    Status s = forward(a);
    EXPECT_EQ(s.code(), Status::Code::not_supported) << s.message();
    EXPECT_NE(s.message().find("host"), std::string::npos) << s.message();
    EXPECT_TRUE(c.out.bytes == before);
  }
}

TEST(Dispatch, CudaBackendRefusesHostTensors) {
  Case c = small_case();
  c.args.backend = Backend::cuda;
  Status s = forward(c.args);
  EXPECT_EQ(s.code(), Status::Code::not_supported) << s.message();
}

TEST(Dispatch, DeviceTensorsWithoutCuda) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  Case c = small_case();
  Args a = c.args;
  to_cuda(a);
  a.backend = Backend::automatic;
  std::vector<uint8_t> before = c.out.bytes;
  Status s = forward(a);
  EXPECT_EQ(s.code(), Status::Code::not_supported) << s.message();
  EXPECT_TRUE(c.out.bytes == before);
}

TEST(Dispatch, DeviceCombineWithoutCuda) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  HostTensor op = random_tensor(DType::f32, {2, 3, 2, 4}, 1), lp = random_tensor(DType::f32, {2, 2, 3}, 2);
  HostTensor out = empty_tensor(DType::f32, {3, 2, 4});
  CombineArgs c;
  c.out_partial = op.t, c.lse_partial = lp.t, c.out = out.t;
  for (Tensor* t : {&c.out_partial, &c.lse_partial, &c.out}) t->device = Device{DeviceKind::cuda, 0};
  std::vector<uint8_t> before = out.bytes;
  Status s = combine(c);
  EXPECT_EQ(s.code(), Status::Code::not_supported) << s.message();
  EXPECT_TRUE(out.bytes == before);
}

TEST(Dispatch, UnknownBackendValue) {
  Case c = small_case();
  c.args.backend = static_cast<Backend>(42);
  Status s = forward(c.args);
  EXPECT_EQ(s.code(), Status::Code::invalid_argument);
  EXPECT_EQ(s.message().rfind("backend:", 0), 0u) << s.message();
}

// Args::cpu_isa: every ISA this machine has runs; one it lacks is refused by the CPU backend
// (automatic dispatch of host tensors included) before anything is written, and ignored by
// the reference backend.
TEST(Dispatch, CpuIsaAvailability) {
  EXPECT_TRUE(cpu_isa_available(CpuIsa::automatic));
  EXPECT_TRUE(cpu_isa_available(CpuIsa::portable));
  if (cpu_isa_available(CpuIsa::amx)) EXPECT_TRUE(cpu_isa_available(CpuIsa::avx512));
  if (cpu_isa_available(CpuIsa::avx512)) EXPECT_TRUE(cpu_isa_available(CpuIsa::avx2));
  for (CpuIsa isa : {CpuIsa::automatic, CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::amx}) {
    for (Backend b : {Backend::cpu, Backend::automatic, Backend::reference}) {
      Case c = small_case();
      c.args.backend = b;
      c.args.cpu_isa = isa;
      if (cpu_isa_available(isa) || b == Backend::reference) {
        OracleResult r = run_and_check(c.args);
        EXPECT_TRUE(r.failure.empty()) << cpu_isa_name(isa) << " " << backend_name(b) << ": " << r.failure;
        continue;
      }
      poison(c.out);
      const std::vector<uint8_t> before = c.out.bytes;
      Status s = forward(c.args);
      EXPECT_EQ(s.code(), Status::Code::not_supported) << s.message();
      EXPECT_EQ(s.message().rfind(std::string("cpu_isa: ") + cpu_isa_name(isa), 0), 0u) << s.message();
      EXPECT_NE(s.message().find("portable"), std::string::npos) << s.message();  // lists what is there
      EXPECT_TRUE(c.out.bytes == before);
    }
  }
}

TEST(Dispatch, CpuThreads) {
  EXPECT_EQ(cpu_threads(3), 3);
  EXPECT_GE(cpu_threads(0), 1);
}

TEST(Dispatch, EmptyBatchIsValidAndWritesNothing) {
  CaseSpec s;
  s.batch = 0;
  Case c = make_case(s);
  EXPECT_TRUE(forward(c.args).ok());
}

TEST(Dispatch, ZeroLengthQueriesAreValid) {
  CaseSpec s;
  s.seq_q = 0;
  Case c = make_case(s);
  EXPECT_TRUE(forward(c.args).ok());
}

// Zero-size arrays carry meaningless strides (NumPy reports 0 for every dimension): empty q,
// out and lse, or empty k and v, are valid whatever their strides, on every host backend.
TEST(Dispatch, EmptyTensorsWithZeroStridesAreValid) {
  for (Backend backend : {Backend::reference, Backend::cpu}) {
    CaseSpec s;
    s.seq_q = 0;
    Case c = make_case(s);
    for (Tensor* t : {&c.args.q, &c.args.out, &c.args.lse})
      for (int d = 0; d < t->rank; ++d) t->stride[d] = 0;
    c.args.backend = backend;
    Status st = forward(c.args);
    EXPECT_TRUE(st.ok()) << backend_name(backend) << ": " << st.message();

    CaseSpec sk;
    sk.seq_k = 0;  // no key at all: every row is 0 with LSE -inf
    Case e = make_case(sk);
    for (Tensor* t : {&e.args.k, &e.args.v})
      for (int d = 0; d < t->rank; ++d) t->stride[d] = 0;
    e.args.backend = backend;
    poison(e.out);
    poison(e.lse);
    st = forward(e.args);
    ASSERT_TRUE(st.ok()) << backend_name(backend) << ": " << st.message();
    for (int64_t i = 0; i < e.out.t.numel(); ++i) ASSERT_EQ(get(e.out, i), 0.0);
    for (int64_t i = 0; i < e.lse.t.numel(); ++i) ASSERT_EQ(get(e.lse, i), -INFINITY);
  }
}

}  // namespace
}  // namespace longattn::testing

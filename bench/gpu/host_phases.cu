// Where the host time of one tiny CUDA forward goes inside the C++ library (issue 16), on the
// device: the same tiny call as host_overhead.py (batch 1, 4 queries / 8 keys, 1 head, hdim 64,
// bf16, causal), longattn::forward whole and then each step it takes, each timed alone over
// many calls (best of 3 rounds of 5 windows, wall time; the GPU runs behind, the loops stay bound by the
// host). The last row is the floor any launch of a kernel with the same parameter bytes pays.
//
//     build/bench/gpu/host_phases [calls]
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "common/overrides.h"
#include "common/problem.h"
#include "cuda/launch_args.h"
#include "cuda/plan.h"
#include "cuda/sm90/launch.h"
#include "longattn/longattn.h"

namespace {

using namespace longattn;
using cuda::sm90::LaunchArgs;

struct ParamBytes {
  unsigned char b[sizeof(CUtensorMap) * 4 + sizeof(cuda::sm90::FwdParams)];
};
__global__ void empty_kernel(ParamBytes) {}
__global__ void empty_kernel_no_params() {}

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);

// The driver's cuLaunchKernel (no -lcuda), for the launch-path comparison rows.
LaunchFn driver_launch() {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<LaunchFn>(p);
}

template <class F>
double per_call_us(int calls, F&& f) {
  for (int i = 0; i < 200; ++i) f();
  cudaDeviceSynchronize();
  double best = 1e30;
  for (int w = 0; w < 5; ++w) {
    cudaDeviceSynchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    const auto t1 = std::chrono::steady_clock::now();
    cudaDeviceSynchronize();
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
    if (us < best) best = us;
  }
  return best;
}

void* device_buffer(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc failed\n");
    std::exit(1);
  }
  cudaMemset(p, 0, bytes);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 5000;
  const Device dev{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(device_buffer(4 * 64 * 2), DType::bf16, {1, 4, 1, 64}, dev);
  a.k = make_tensor(device_buffer(8 * 64 * 2), DType::bf16, {1, 8, 1, 64}, dev);
  a.v = make_tensor(device_buffer(8 * 64 * 2), DType::bf16, {1, 8, 1, 64}, dev);
  a.out = make_tensor(device_buffer(4 * 64 * 2), DType::bf16, {1, 4, 1, 64}, dev);
  a.mask.causal = true;
  cudaStream_t stream = nullptr;
  a.stream = stream;
  a.backend = Backend::cuda;

  detail::Problem p;
  if (!detail::build_problem(a, &p).ok() || !forward(a).ok()) {
    std::fprintf(stderr, "the tiny call failed\n");
    return 1;
  }
  const detail::Overrides ov{};
  int sms = 0, l2 = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  cuda::ForwardPlan plan;
  if (!cuda::plan_forward(a, p, ov, sms, l2, &plan).ok()) return 1;
  LaunchArgs la{};
  if (!cuda::encode_maps(a, p, plan, &la).empty()) return 1;
  cuda::fill_params(a, p, plan, &la.p);
  la.kernel = plan.kernel;
  la.num_sms = sms;
  la.stream = stream;
  la.p.o_tma = cuda::encode_out_map(a, p, plan, &la) ? 1 : 0;

  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s; us per call, best of 5 windows of %d calls\n", prop.name, calls);
  struct Row {
    const char* name;
    std::function<void()> f;
    double us = 1e30;
  };
  ParamBytes pb{};
  const LaunchFn cu_launch = driver_launch();
  cudaFunction_t fn_params = nullptr, fn_none = nullptr;
  cudaGetFuncBySymbol(&fn_params, reinterpret_cast<const void*>(&empty_kernel));
  cudaGetFuncBySymbol(&fn_none, reinterpret_cast<const void*>(&empty_kernel_no_params));
  void* pb_args[] = {&pb};
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(32);
  cfg.stream = stream;
  std::vector<Row> rows = {
      {"longattn::forward (whole)", [&] { (void)forward(a); }},
      {"build_problem (validation)", [&] {
         detail::Problem q;
         (void)detail::build_problem(a, &q);
       }},
      {"cudaGetDevice", [&] {
         int d = 0;
         cudaGetDevice(&d);
       }},
      {"plan_forward", [&] {
         cuda::ForwardPlan pl;
         (void)cuda::plan_forward(a, p, ov, sms, l2, &pl);
       }},
      {"encode_maps (q, k, v)", [&] {
         LaunchArgs l{};
         (void)cuda::encode_maps(a, p, plan, &l);
       }},
      {"encode_out_map", [&] {
         LaunchArgs l{};
         (void)cuda::encode_out_map(a, p, plan, &l);
       }},
      {"fill_params", [&] {
         cuda::sm90::FwdParams fp{};
         cuda::fill_params(a, p, plan, &fp);
       }},
      {"launch_fwd (prepared LaunchArgs)",
       [&] { (void)cuda::sm90::launch_fwd<cuda::sm90::InType::bf16, 64, 64>(la); }},
      {"empty kernel, same parameter bytes", [&] { empty_kernel<<<1, 32, 0, stream>>>(pb); }},
      {"empty kernel, no parameters", [&] { empty_kernel_no_params<<<1, 32, 0, stream>>>(); }},
      {"empty kernel, cudaLaunchKernelEx", [&] { cudaLaunchKernelEx(&cfg, empty_kernel, pb); }},
      {"empty kernel, driver cuLaunchKernel", [&] {
         if (cu_launch) cu_launch(reinterpret_cast<CUfunction>(fn_params), 1, 1, 1, 32, 1, 1, 0, stream, pb_args, nullptr);
       }},
      {"no-param kernel, driver cuLaunchKernel", [&] {
         if (cu_launch) cu_launch(reinterpret_cast<CUfunction>(fn_none), 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr);
       }},
      {"cudaGetLastError", [&] { (void)cudaGetLastError(); }},
  };
  // Rounds over all rows, each row's best: the host's speed drifts within a process.
  for (int round = 0; round < 3; ++round)
    for (Row& r : rows) r.us = std::min(r.us, per_call_us(calls, r.f));
  for (const Row& r : rows) std::printf("  %-36s %7.2f\n", r.name, r.us);
  std::printf("parameter bytes per launch: %zu\n", sizeof(ParamBytes));
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}

// Where the host time of one tiny CUDA forward goes inside the C++ library (issue 16), on the
// device: the same tiny call as host_overhead.py (batch 1, 4 queries / 8 keys, 1 head, hdim 64,
// bf16, causal), longattn::forward whole and then each step it takes, each timed alone over
// many calls (best of 5 windows, wall time; the GPU runs behind, the loops stay bound by the
// host). The last row is the floor any launch of a kernel with the same parameter bytes pays.
//
//     build/bench/gpu/host_phases [calls]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

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
    double us;
  };
  ParamBytes pb{};
  const Row rows[] = {
      {"longattn::forward (whole)", per_call_us(calls, [&] { (void)forward(a); })},
      {"build_problem (validation)", per_call_us(calls, [&] {
         detail::Problem q;
         (void)detail::build_problem(a, &q);
       })},
      {"cudaGetDevice", per_call_us(calls, [&] {
         int d = 0;
         cudaGetDevice(&d);
       })},
      {"plan_forward", per_call_us(calls, [&] {
         cuda::ForwardPlan pl;
         (void)cuda::plan_forward(a, p, ov, sms, l2, &pl);
       })},
      {"encode_maps (q, k, v)", per_call_us(calls, [&] {
         LaunchArgs l{};
         (void)cuda::encode_maps(a, p, plan, &l);
       })},
      {"encode_out_map", per_call_us(calls, [&] {
         LaunchArgs l{};
         (void)cuda::encode_out_map(a, p, plan, &l);
       })},
      {"fill_params", per_call_us(calls, [&] {
         cuda::sm90::FwdParams fp{};
         cuda::fill_params(a, p, plan, &fp);
       })},
      {"launch_fwd (prepared LaunchArgs)",
       per_call_us(calls, [&] { (void)cuda::sm90::launch_fwd<cuda::sm90::InType::bf16, 64, 64>(la); })},
      {"empty kernel, same parameter bytes", per_call_us(calls, [&] { empty_kernel<<<1, 32, 0, stream>>>(pb); })},
      {"empty kernel, no parameters", per_call_us(calls, [&] { empty_kernel_no_params<<<1, 32, 0, stream>>>(); })},
  };
  for (const Row& r : rows) std::printf("  %-36s %7.2f\n", r.name, r.us);
  std::printf("parameter bytes per launch: %zu\n", sizeof(ParamBytes));
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}

// Device copies of a host test problem (tests/support make_case): every present tensor
// uploaded with the same strides, outputs poisoned first; used by the CaseSpec-driven GPU
// tests (paged, packed GQA).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "support/testing.h"

namespace longattn::gputest {

inline bool have_sm90() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return false;
  cudaDeviceProp prop{};
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major >= 9;
}

// One device allocation for a test's own buffers; p is null when cudaMalloc failed.
struct DeviceBuf {
  void* p = nullptr;
  explicit DeviceBuf(size_t bytes) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
  }
  ~DeviceBuf() { cudaFree(p); }
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
};

// Device copies of every present tensor of a host Case (whole byte buffers, same strides).
struct DeviceCase {
  std::vector<std::shared_ptr<void>> bufs;
  Args args;

  Tensor upload(const testing::HostTensor& h) {
    Tensor t = h.t;
    if (!t.data) return t;
    void* d = nullptr;
    if (cudaMalloc(&d, h.bytes.size()) != cudaSuccess) return Tensor{};
    bufs.emplace_back(d, [](void* p) { cudaFree(p); });
    cudaMemcpy(d, h.bytes.data(), h.bytes.size(), cudaMemcpyHostToDevice);
    t.data = static_cast<uint8_t*>(d) + (static_cast<const uint8_t*>(h.t.data) - h.bytes.data());
    t.device = Device{DeviceKind::cuda, 0};
    return t;
  }
  void download(testing::HostTensor& h, const Tensor& t) {
    if (!t.data) return;
    const uint8_t* base = static_cast<const uint8_t*>(t.data) - (static_cast<const uint8_t*>(h.t.data) - h.bytes.data());
    cudaMemcpy(h.bytes.data(), base, h.bytes.size(), cudaMemcpyDeviceToHost);
  }
};

inline DeviceCase to_device(testing::Case& c) {
  testing::poison(c.out);
  if (c.lse.t.data) testing::poison(c.lse);
  DeviceCase d;
  d.args = c.args;
  d.args.backend = Backend::cuda;
  d.args.q = d.upload(c.q);
  d.args.k = d.upload(c.k);
  d.args.v = d.upload(c.v);
  d.args.out = d.upload(c.out);
  d.args.lse = d.upload(c.lse);
  d.args.cu_seqlens_q = d.upload(c.cu_seqlens_q);
  d.args.cu_seqlens_k = d.upload(c.cu_seqlens_k);
  d.args.seqused_k = d.upload(c.seqused_k);
  d.args.seqused_q = d.upload(c.seqused_q);
  d.args.page_table = d.upload(c.page_table);
  d.args.sinks = d.upload(c.sinks);
  d.args.q_descale = d.upload(c.q_descale);
  d.args.k_descale = d.upload(c.k_descale);
  d.args.v_descale = d.upload(c.v_descale);
  if (c.cu_seqlens_q.t.data) {  // device cu_seqlens need max_seqlen_q (the longest after seqused_q)
    const int32_t* cu = static_cast<const int32_t*>(c.cu_seqlens_q.t.data);
    const int32_t* used = static_cast<const int32_t*>(c.seqused_q.t.data);
    for (int64_t b = 0; b < c.spec.batch; ++b)
      d.args.max_seqlen_q = std::max<int64_t>(d.args.max_seqlen_q, used ? used[b] : cu[b + 1] - cu[b]);
  }
  if (c.cu_seqlens_k.t.data) {  // and max_seqlen_k
    const int32_t* cu = static_cast<const int32_t*>(c.cu_seqlens_k.t.data);
    for (int64_t b = 0; b < c.spec.batch; ++b) d.args.max_seqlen_k = std::max<int64_t>(d.args.max_seqlen_k, cu[b + 1] - cu[b]);
  }
  return d;
}

}  // namespace longattn::gputest

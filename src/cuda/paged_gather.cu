// The paged K/V gather (paged_gather.h).
#include "cuda/paged_gather.h"

namespace longattn::cuda {
namespace {

struct Gather {
  const char* pool;
  int64_t ps_page, ps_slot, ps_head;  // pool strides in bytes
  int64_t page_size, num_pages, max_pages;
  const int32_t* pt;
  int64_t pt_b, pt_i;  // page-table strides (elements)
  const int32_t* used;
  int64_t used_s;
  int64_t heads, chunks;  // 16-byte chunks per row (dim x element size / 16)
  int64_t batch, keys;
  uint4* dst;
};

// One thread per 16-byte chunk of a destination row (b, t, h); the 64-bit divisions run once
// per 16 bytes.
__global__ void gather_pages_kernel(Gather g) {
  const int64_t n = g.batch * g.keys * g.heads * g.chunks;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % g.chunks, r = i / g.chunks;  // r = (b * keys + t) * heads + h
    const int64_t h = r % g.heads, bt = r / g.heads;
    const int64_t t = bt % g.keys, b = bt / g.keys;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    const int64_t end = g.used ? int64_t(g.used[b * g.used_s]) : g.keys;
    if (t < end && t / g.page_size < g.max_pages) {
      const int64_t page = g.pt[b * g.pt_b + (t / g.page_size) * g.pt_i];
      if (page >= 0 && page < g.num_pages)
        val = *reinterpret_cast<const uint4*>(g.pool + page * g.ps_page + (t % g.page_size) * g.ps_slot +
                                              h * g.ps_head + c * 16);
    }
    g.dst[i] = val;
  }
}

}  // namespace

cudaError_t launch_gather_pages(const Tensor& pool, const Tensor& page_table, const Tensor& seqused_k, int64_t batch,
                                int64_t keys, void* dst, cudaStream_t stream) {
  const int64_t es = dtype_size(pool.dtype);
  Gather g;
  g.pool = static_cast<const char*>(pool.data);
  g.ps_page = pool.stride[0] * es;
  g.ps_slot = pool.stride[1] * es;
  g.ps_head = pool.stride[2] * es;
  g.page_size = pool.shape[1];
  g.num_pages = pool.shape[0];
  g.max_pages = page_table.shape[1];
  g.pt = static_cast<const int32_t*>(page_table.data);
  g.pt_b = page_table.stride[0];
  g.pt_i = page_table.stride[1];
  g.used = static_cast<const int32_t*>(seqused_k.data);
  g.used_s = seqused_k.present() ? seqused_k.stride[0] : 0;
  g.heads = pool.shape[2];
  g.chunks = pool.shape[3] * es / 16;
  g.batch = batch;
  g.keys = keys;
  g.dst = static_cast<uint4*>(dst);
  const int64_t n = batch * keys * g.heads * g.chunks;
  if (n == 0) return cudaSuccess;
  const int64_t blocks = (n + 255) / 256;
  gather_pages_kernel<<<unsigned(blocks < 65536 ? blocks : 65536), 256, 0, stream>>>(g);
  return cudaGetLastError();
}

}  // namespace longattn::cuda

// Helper kernels: the no-key fill and the split-KV / context-parallel combine.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "cuda/tensor_view.h"
#include "cuda/util_kernels.h"

namespace longattn::cuda {
namespace {

__device__ float load_f(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return __half2float(static_cast<const __half*>(p)[i]);
  }
}
__device__ void store_f(void* p, DType t, int64_t i, float x) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = x; break;
    case DType::bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x); break;
    default: static_cast<__half*>(p)[i] = __float2half_rn(x); break;
  }
}


// The query rows seqused_q leaves out of the fill (util_kernels.h launch_fill_empty). Device
// int32 metadata, contiguous (the API's rank-1 rule); used == null: every row is filled, else
// the rows RowSeq places in a sequence (tokens past the last sequence belong to none).
struct UsedRows {
  const int32_t* cu = nullptr;    // cu_seqlens_q (ragged q), else null
  const int32_t* used = nullptr;  // seqused_q
  int64_t batch = 0;
  __device__ bool operator()(int64_t b, int64_t s) const { return !used || RowSeq{cu, used, batch}(b, s) >= 0; }
};

// One thread per output element; grid-stride with 64-bit indices. out views (batch, seq,
// heads, dim) (ragged: (1, tokens, heads, dim)), lse (1, batch, heads, seq) (ragged: (1, 1,
// heads, tokens)).
__global__ void fill_empty_kernel(View4 out, View4 lse, const float* sinks, int64_t sinks_stride, UsedRows rows) {
  const int64_t n = out.shape[0] * out.shape[1] * out.shape[2] * out.shape[3];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i, idx[4];
    for (int d = 3; d >= 0; --d) {
      idx[d] = r % out.shape[d];
      r /= out.shape[d];
    }
    if (!rows(idx[0], idx[1])) continue;
    store_f(out.data, out.t,
            idx[0] * out.stride[0] + idx[1] * out.stride[1] + idx[2] * out.stride[2] + idx[3] * out.stride[3],
            0.f);
  }
  if (!lse.data) return;
  const int64_t m = lse.shape[1] * lse.shape[2] * lse.shape[3];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < m;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t c = i % lse.shape[3], r = i / lse.shape[3];
    int64_t bidx = r % lse.shape[2], a = r / lse.shape[2];
    if (!rows(a, c)) continue;
    // No key: the denominator holds only the sink, if any (LSE = the sink).
    static_cast<float*>(lse.data)[a * lse.stride[1] + bidx * lse.stride[2] + c * lse.stride[3]] =
        sinks ? sinks[bidx * sinks_stride] : -INFINITY;
  }
}

// Combine: one thread per (token, head, dim element); each recomputes the split weights
// from the LSEs (few splits; the reads hit L1).
__global__ void combine_kernel(View4 op, View4 lp, View4 out, View4 lse) {
  const int64_t splits = op.shape[0], tokens = op.shape[1], heads = op.shape[2], dim = op.shape[3];
  const int64_t n = tokens * heads * dim;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t d = i % dim, r = i / dim, h = r % heads, t = r / heads;
    float mx = -INFINITY;
    for (int64_t s = 0; s < splits; ++s) {
      float l = static_cast<const float*>(lp.data)[s * lp.stride[1] + h * lp.stride[2] + t * lp.stride[3]];
      mx = fmaxf(mx, l);
    }
    float acc = 0.f, wsum = 0.f;
    if (mx != -INFINITY) {
      for (int64_t s = 0; s < splits; ++s) {
        float l = static_cast<const float*>(lp.data)[s * lp.stride[1] + h * lp.stride[2] + t * lp.stride[3]];
        float w = expf(l - mx);  // exp(-inf) = 0: empty splits drop out
        wsum += w;
        if (w > 0.f)
          acc += w * load_f(op.data, op.t, s * op.stride[0] + t * op.stride[1] + h * op.stride[2] + d * op.stride[3]);
      }
    }
    float o = wsum > 0.f ? acc / wsum : 0.f;
    store_f(out.data, out.t, t * out.stride[1] + h * out.stride[2] + d * out.stride[3], o);
    if (d == 0 && lse.data)
      static_cast<float*>(lse.data)[h * lse.stride[2] + t * lse.stride[3]] =
          wsum > 0.f ? mx + logf(wsum) : -INFINITY;
  }
}

int blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return int(b < 65536 ? (b < 1 ? 1 : b) : 65536);
}

}  // namespace

cudaError_t launch_fill_empty(const Tensor& out, const Tensor& lse, const Tensor& sinks,
                              const Tensor& cu_seqlens_q, const Tensor& seqused_q, cudaStream_t stream) {
  View4 o = view4(out), l = lse.present() ? view4(lse) : View4{nullptr, DType::f32, {1, 1, 1, 1}, {}};
  UsedRows rows;
  if (seqused_q.present()) {
    rows.used = static_cast<const int32_t*>(seqused_q.data);
    rows.batch = seqused_q.shape[0];
    if (cu_seqlens_q.present()) rows.cu = static_cast<const int32_t*>(cu_seqlens_q.data);
  }
  fill_empty_kernel<<<blocks_for(out.numel()), 256, 0, stream>>>(
      o, l, static_cast<const float*>(sinks.data), sinks.present() ? sinks.stride[0] : 0, rows);
  return cudaGetLastError();
}

namespace {
// One thread per LSE element, in the destination's (b, h, s) order.
__global__ void lse_from_chunks_kernel(const float* src, float* dst, int64_t heads, int64_t seq, int64_t rows,
                                       int64_t sb, int64_t sh, int64_t ss, int64_t n) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t s = t % seq, bh = t / seq, h = bh % heads, b = bh / heads;
    const int64_t c = s / rows, r = s - c * rows;  // chunk c of batch b: sequence b (seq / rows) + c
    dst[b * sb + h * sh + s * ss] = src[((b * (seq / rows) + c) * heads + h) * rows + r];
  }
}

__global__ void repeat_rows_kernel(const float* src, int64_t s0, int64_t s1, int64_t cols, int64_t times, float* dst,
                                   int64_t n) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = t % cols, r = t / cols / times;
    dst[t] = src[r * s0 + c * s1];
  }
}
}  // namespace

cudaError_t launch_repeat_rows(const Tensor& src, int64_t times, float* dst, cudaStream_t stream) {
  const int64_t n = src.numel() * times;
  if (n == 0) return cudaSuccess;
  repeat_rows_kernel<<<blocks_for(n), 256, 0, stream>>>(static_cast<const float*>(src.data), src.stride[0],
                                                        src.stride[1], src.shape[1], times, dst, n);
  return cudaGetLastError();
}

cudaError_t launch_lse_from_chunks(const float* src, const Tensor& lse, int64_t rows, cudaStream_t stream) {
  const int64_t n = lse.numel();
  if (n == 0) return cudaSuccess;
  lse_from_chunks_kernel<<<blocks_for(n), 256, 0, stream>>>(src, static_cast<float*>(lse.data), lse.shape[1],
                                                            lse.shape[2], rows, lse.stride[0], lse.stride[1],
                                                            lse.stride[2], n);
  return cudaGetLastError();
}

namespace {
// One thread per sequence (batch is small next to the attention work; a debug path).
__global__ void check_page_table_kernel(const int32_t* pt, int64_t sb, int64_t sp, int64_t batch,
                                        int64_t max_pages, const int32_t* used, int64_t su,
                                        int64_t page_size, int64_t num_pages,
                                        unsigned long long* first_bad) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  int64_t keys = max_pages * page_size;
  if (used) keys = used[b * su];
  const int64_t pages = keys <= 0 ? 0 : (keys + page_size - 1) / page_size;
  for (int64_t i = 0; i < pages && i < max_pages; ++i) {
    const int32_t e = pt[b * sb + i * sp];
    if (e < 0 || e >= num_pages) {
      // Lowest (b, i) wins: b and i fit 32 bits each (int32 tensor extents).
      atomicMin(first_bad, (static_cast<unsigned long long>(b) << 32) | static_cast<unsigned long long>(i));
      return;
    }
  }
}
}  // namespace

cudaError_t check_page_table(const Tensor& pt, const Tensor& used, int64_t page_size, int64_t num_pages,
                             cudaStream_t stream, int64_t bad_host[3]) {
  bad_host[0] = -1;
  unsigned long long* d = nullptr;
  cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&d), sizeof(*d), stream);
  if (e != cudaSuccess) return e;
  const unsigned long long none = ~0ull;
  unsigned long long h = none;
  e = cudaMemcpyAsync(d, &none, sizeof(none), cudaMemcpyHostToDevice, stream);
  const int64_t batch = pt.shape[0];
  if (e == cudaSuccess && batch > 0) {
    check_page_table_kernel<<<unsigned((batch + 127) / 128), 128, 0, stream>>>(
        static_cast<const int32_t*>(pt.data), pt.stride[0], pt.stride[1], batch, pt.shape[1],
        static_cast<const int32_t*>(used.data), used.present() ? used.stride[0] : 0, page_size, num_pages, d);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpyAsync(&h, d, sizeof(h), cudaMemcpyDeviceToHost, stream);
  const cudaError_t f = cudaFreeAsync(d, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e == cudaSuccess) e = f;
  if (e != cudaSuccess) return e;
  if (h != none) {
    bad_host[0] = int64_t(h >> 32);
    bad_host[1] = int64_t(h & 0xffffffffull);
    int32_t entry = 0;
    e = cudaMemcpy(&entry, static_cast<const int32_t*>(pt.data) + bad_host[0] * pt.stride[0] + bad_host[1] * pt.stride[1],
                   sizeof(entry), cudaMemcpyDeviceToHost);
    bad_host[2] = entry;
  }
  return e;
}

cudaError_t launch_combine(const CombineArgs& a, cudaStream_t stream) {
  View4 op = view4(a.out_partial), lp = view4(a.lse_partial), out = view4(a.out);
  View4 l = a.lse.present() ? view4(a.lse) : View4{nullptr, DType::f32, {1, 1, 1, 1}, {}};
  combine_kernel<<<blocks_for(a.out.numel()), 256, 0, stream>>>(op, lp, out, l);
  return cudaGetLastError();
}

}  // namespace longattn::cuda

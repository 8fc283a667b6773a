// The fp8 upcast path's two elementwise kernels (fp8_upcast.h).
#include "cuda/fp8_upcast.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace longattn::cuda {
namespace {

struct View4 {
  void* data;
  DType t;
  int64_t shape[4], stride[4];
};
View4 view(const Tensor& x) {
  View4 v{x.data, x.dtype, {1, 1, 1, 1}, {0, 0, 0, 0}};
  for (int i = 0; i < x.rank; ++i) {
    v.shape[4 - x.rank + i] = x.shape[i];
    v.stride[4 - x.rank + i] = x.stride[i];
  }
  return v;
}

// The sequence of row (b, s) of a (batch, seq, heads, dim) view: b, or for a ragged view (1,
// tokens, ...) the sequence holding token s (cu[l] <= s < cu[l + 1]); -1: past the last one.
// `used` (seqused_q, may be null) drops the rows past it: -1 too.
struct RowSeq {
  const int32_t* cu = nullptr;
  const int32_t* used = nullptr;
  int64_t batch = 0;
  __device__ int64_t operator()(int64_t b, int64_t s) const {
    if (cu) {
      if (s >= cu[batch]) return -1;
      int64_t l = 0, h = batch;
      while (h - l > 1) {
        const int64_t m = (l + h) / 2;
        if (cu[m] <= s) l = m;
        else h = m;
      }
      return used && s - cu[l] >= used[l] ? -1 : l;
    }
    return used && s >= used[b] ? -1 : b;
  }
};

// A (batch, heads_kv) float32 descale; absent: 1.
struct Descale {
  const float* p = nullptr;
  int64_t sb = 0, sh = 0;
  __device__ float operator()(int64_t b, int64_t hk) const { return p ? p[b * sb + hk * sh] : 1.f; }
};
Descale descale(const Tensor& t) {
  Descale d;
  if (t.present()) {
    d.p = static_cast<const float*>(t.data);
    d.sb = t.stride[0];
    d.sh = t.stride[1];
  }
  return d;
}

__global__ void upcast_kernel(View4 src, __half* dst, Descale qd, Descale kd, int64_t group, RowSeq seq) {
  const int64_t n = src.shape[0] * src.shape[1] * src.shape[2] * src.shape[3];
  const bool scaled = qd.p || kd.p;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i, idx[4];
    for (int d = 3; d >= 0; --d) {
      idx[d] = r % src.shape[d];
      r /= src.shape[d];
    }
    const __nv_fp8_e4m3 e = static_cast<const __nv_fp8_e4m3*>(
        src.data)[idx[0] * src.stride[0] + idx[1] * src.stride[1] + idx[2] * src.stride[2] + idx[3] * src.stride[3]];
    float x = float(e);
    if (scaled) {
      const int64_t b = seq(idx[0], idx[1]);
      if (b >= 0) x *= qd(b, idx[2] / group) * kd(b, idx[2] / group);
    }
    dst[i] = __float2half_rn(x);
  }
}

__global__ void scale_rows_kernel(View4 out, Descale vd, int64_t group, RowSeq seq) {
  const int64_t n = out.shape[0] * out.shape[1] * out.shape[2] * out.shape[3];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i, idx[4];
    for (int d = 3; d >= 0; --d) {
      idx[d] = r % out.shape[d];
      r /= out.shape[d];
    }
    const int64_t b = seq(idx[0], idx[1]);
    if (b < 0) continue;
    const int64_t o = idx[0] * out.stride[0] + idx[1] * out.stride[1] + idx[2] * out.stride[2] + idx[3] * out.stride[3];
    const float s = vd(b, idx[2] / group);
    switch (out.t) {
      case DType::f32: static_cast<float*>(out.data)[o] *= s; break;
      case DType::bf16: {
        __nv_bfloat16* p = static_cast<__nv_bfloat16*>(out.data) + o;
        *p = __float2bfloat16_rn(__bfloat162float(*p) * s);
        break;
      }
      default: {
        __half* p = static_cast<__half*>(out.data) + o;
        *p = __float2half_rn(__half2float(*p) * s);
        break;
      }
    }
  }
}

int blocks_for(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return int(b < 65536 ? (b < 1 ? 1 : b) : 65536);
}

RowSeq row_seq(const Tensor& cu_seqlens_q, const Tensor& seqused_q, int64_t batch) {
  RowSeq s;
  s.batch = batch;
  if (cu_seqlens_q.present()) {
    s.cu = static_cast<const int32_t*>(cu_seqlens_q.data);
    s.batch = cu_seqlens_q.shape[0] - 1;
  }
  if (seqused_q.present()) s.used = static_cast<const int32_t*>(seqused_q.data);
  return s;
}

}  // namespace

cudaError_t launch_upcast_e4m3(const Tensor& src, __half* dst, const Tensor& qd, const Tensor& kd, int64_t group,
                               const Tensor& cu_seqlens_q, cudaStream_t stream) {
  const int64_t n = src.numel();
  if (n == 0) return cudaSuccess;
  const View4 v = view(src);
  upcast_kernel<<<blocks_for(n), 256, 0, stream>>>(v, dst, descale(qd), descale(kd), group,
                                                   row_seq(cu_seqlens_q, Tensor{}, v.shape[0]));
  return cudaGetLastError();
}

cudaError_t launch_scale_rows(const Tensor& out, const Tensor& vd, int64_t group, const Tensor& cu_seqlens_q,
                              const Tensor& seqused_q, cudaStream_t stream) {
  const int64_t n = out.numel();
  if (n == 0 || !vd.present()) return cudaSuccess;
  const View4 v = view(out);
  scale_rows_kernel<<<blocks_for(n), 256, 0, stream>>>(v, descale(vd), group,
                                                       row_seq(cu_seqlens_q, seqused_q, v.shape[0]));
  return cudaGetLastError();
}

}  // namespace longattn::cuda

// The fp8 upcast path's two elementwise kernels (fp8_upcast.h).
#include "cuda/fp8_upcast.h"
#include "cuda/tensor_view.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace longattn::cuda {
namespace {


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

// Rows of a 4-D view: (i0, i1, i2) of row r (the last dim is the row). One thread per 8
// columns of a row: the 64-bit divisions run once per 8 elements, not per element (per
// element they cost more than the copy).
struct Rows {
  int64_t n1, n2, segs;  // extents of dims 1, 2; 8-column segments per row
  __device__ void at(int64_t t, int64_t (&idx)[3], int64_t& c0) const {
    const int64_t r = t / segs;
    c0 = (t - r * segs) * 8;
    idx[2] = r % n2;
    idx[1] = (r / n2) % n1;
    idx[0] = r / (n2 * n1);
  }
};
Rows rows_of(const View4& v) { return Rows{v.shape[1], v.shape[2], (v.shape[3] + 7) / 8}; }

__global__ void upcast_kernel(View4 src, __half* dst, Descale qd, Descale kd, int64_t group, RowSeq seq, Rows rw) {
  const int64_t n = src.shape[0] * src.shape[1] * src.shape[2] * rw.segs, dim = src.shape[3];
  const bool scaled = qd.p || kd.p;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x) {
    int64_t idx[3], c0;
    rw.at(t, idx, c0);
    const __nv_fp8_e4m3* in = static_cast<const __nv_fp8_e4m3*>(src.data) + idx[0] * src.stride[0] +
                              idx[1] * src.stride[1] + idx[2] * src.stride[2];
    float s = 1.f;
    if (scaled) {
      const int64_t b = seq(idx[0], idx[1]);
      if (b >= 0) s = qd(b, idx[2] / group) * kd(b, idx[2] / group);
    }
    __half* out = dst + ((idx[0] * src.shape[1] + idx[1]) * src.shape[2] + idx[2]) * dim;
    if (c0 + 8 <= dim && src.stride[3] == 1) {
      // Whole segment of a contiguous row: one 8-byte load, one 16-byte store (rows start
      // 16-byte aligned: the TMA operand rules for src, dim a multiple of 8 for dst).
      const uint2 raw = *reinterpret_cast<const uint2*>(in + c0);
      const uint32_t w[2] = {raw.x, raw.y};
      uint32_t h[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const __half2_raw x = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w[i / 2] >> (16 * (i % 2))), __NV_E4M3);
        __half2 y = __half2(x);
        if (s != 1.f) {
          const float2 f = __half22float2(y);
          y = __floats2half2_rn(f.x * s, f.y * s);
        }
        h[i] = *reinterpret_cast<const uint32_t*>(&y);
      }
      *reinterpret_cast<uint4*>(out + c0) = make_uint4(h[0], h[1], h[2], h[3]);
      continue;
    }
    const int64_t c1 = c0 + 8 < dim ? c0 + 8 : dim;
    for (int64_t c = c0; c < c1; ++c) out[c] = __float2half_rn(float(in[c * src.stride[3]]) * s);
  }
}

__global__ void scale_rows_kernel(View4 out, Descale vd, int64_t group, RowSeq seq, Rows rw) {
  const int64_t n = out.shape[0] * out.shape[1] * out.shape[2] * rw.segs, dim = out.shape[3];
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x) {
    int64_t idx[3], c0;
    rw.at(t, idx, c0);
    const int64_t b = seq(idx[0], idx[1]);
    if (b < 0) continue;
    const int64_t row = idx[0] * out.stride[0] + idx[1] * out.stride[1] + idx[2] * out.stride[2];
    const float s = vd(b, idx[2] / group);
    const int64_t c1 = c0 + 8 < dim ? c0 + 8 : dim;
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t o = row + c * out.stride[3];
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
  if (src.numel() == 0) return cudaSuccess;
  const View4 v = view4(src);
  const Rows rw = rows_of(v);
  upcast_kernel<<<blocks_for(v.shape[0] * v.shape[1] * v.shape[2] * rw.segs), 256, 0, stream>>>(
      v, dst, descale(qd), descale(kd), group, row_seq(cu_seqlens_q, Tensor{}, v.shape[0]), rw);
  return cudaGetLastError();
}

cudaError_t launch_scale_rows(const Tensor& out, const Tensor& vd, int64_t group, const Tensor& cu_seqlens_q,
                              const Tensor& seqused_q, cudaStream_t stream) {
  if (out.numel() == 0 || !vd.present()) return cudaSuccess;
  const View4 v = view4(out);
  const Rows rw = rows_of(v);
  scale_rows_kernel<<<blocks_for(v.shape[0] * v.shape[1] * v.shape[2] * rw.segs), 256, 0, stream>>>(
      v, descale(vd), group, row_seq(cu_seqlens_q, seqused_q, v.shape[0]), rw);
  return cudaGetLastError();
}

}  // namespace longattn::cuda

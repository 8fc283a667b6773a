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

// Rows of a 4-D view: (i0, i1, i2) of row r (the last dim is the row). One thread per `kSeg`
// columns of a row: the divisions run once per segment, not per element (per element they
// cost more than the copy). I: the index type, 32-bit where every segment index fits (a 64-bit
// division is a long instruction sequence, a 32-bit one a few).
template <class I>
struct Rows {
  I n1, n2, segs;  // extents of dims 1, 2; segments per row
  __device__ void at(I t, int64_t (&idx)[3], int64_t& c0, int seg) const {
    const I r = t / segs;
    c0 = int64_t(t - r * segs) * seg;
    const I r2 = r / n2;
    idx[2] = int64_t(r - r2 * n2);
    idx[1] = int64_t(r2 % n1);
    idx[0] = int64_t(r2 / n1);
  }
};
template <class I>
Rows<I> rows_of(const View4& v, int seg) {
  return Rows<I>{I(v.shape[1]), I(v.shape[2]), I((v.shape[3] + seg - 1) / seg)};
}

// 16 columns per thread: one 16-byte load of e4m3, two 16-byte stores of f16.
constexpr int kUpSeg = 16;

template <class I>
__global__ void upcast_kernel(View4 src, __half* dst, Descale qd, Descale kd, int64_t group, RowSeq seq, Rows<I> rw) {
  const I n = I(src.shape[0] * src.shape[1] * src.shape[2]) * rw.segs;
  const int64_t dim = src.shape[3];
  const bool scaled = qd.p || kd.p;
  for (I t = I(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += I(gridDim.x) * blockDim.x) {
    int64_t idx[3], c0;
    rw.at(t, idx, c0, kUpSeg);
    const __nv_fp8_e4m3* in = static_cast<const __nv_fp8_e4m3*>(src.data) + idx[0] * src.stride[0] +
                              idx[1] * src.stride[1] + idx[2] * src.stride[2];
    float s = 1.f;
    if (scaled) {
      const int64_t b = seq(idx[0], idx[1]);
      if (b >= 0) s = qd(b, idx[2] / group) * kd(b, idx[2] / group);
    }
    __half* out = dst + ((idx[0] * src.shape[1] + idx[1]) * src.shape[2] + idx[2]) * dim;
    if (c0 + kUpSeg <= dim && src.stride[3] == 1 && (reinterpret_cast<uintptr_t>(in + c0) & 15) == 0) {
      // Whole segment of a contiguous row: one 16-byte load, two 16-byte stores (dst rows
      // start 16-byte aligned: dim is a multiple of 8).
      const uint4 raw = *reinterpret_cast<const uint4*>(in + c0);
      const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
      uint32_t h[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const __half2_raw x = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w[i / 2] >> (16 * (i % 2))), __NV_E4M3);
        __half2 y = __half2(x);
        if (s != 1.f) {
          const float2 f = __half22float2(y);
          y = __floats2half2_rn(f.x * s, f.y * s);
        }
        h[i] = *reinterpret_cast<const uint32_t*>(&y);
      }
      *reinterpret_cast<uint4*>(out + c0) = make_uint4(h[0], h[1], h[2], h[3]);
      *reinterpret_cast<uint4*>(out + c0 + 8) = make_uint4(h[4], h[5], h[6], h[7]);
      continue;
    }
    const int64_t c1 = c0 + kUpSeg < dim ? c0 + kUpSeg : dim;
    for (int64_t c = c0; c < c1; ++c) out[c] = __float2half_rn(float(in[c * src.stride[3]]) * s);
  }
}

__global__ void scale_rows_kernel(View4 out, Descale vd, int64_t group, RowSeq seq, Rows<int64_t> rw) {
  const int64_t n = out.shape[0] * out.shape[1] * out.shape[2] * rw.segs, dim = out.shape[3];
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x) {
    int64_t idx[3], c0;
    rw.at(t, idx, c0, 8);
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
                               const Tensor& cu_seqlens, cudaStream_t stream) {
  if (src.numel() == 0) return cudaSuccess;
  const View4 v = view4(src);
  const RowSeq seq = row_seq(cu_seqlens, Tensor{}, v.shape[0]);
  const int64_t segs = v.shape[0] * v.shape[1] * v.shape[2] * ((v.shape[3] + kUpSeg - 1) / kUpSeg);
  if (segs < (int64_t(1) << 31)) {
    upcast_kernel<uint32_t><<<blocks_for(segs), 256, 0, stream>>>(v, dst, descale(qd), descale(kd), group, seq,
                                                                  rows_of<uint32_t>(v, kUpSeg));
  } else {
    upcast_kernel<int64_t><<<blocks_for(segs), 256, 0, stream>>>(v, dst, descale(qd), descale(kd), group, seq,
                                                                 rows_of<int64_t>(v, kUpSeg));
  }
  return cudaGetLastError();
}

cudaError_t launch_scale_rows(const Tensor& out, const Tensor& vd, int64_t group, const Tensor& cu_seqlens_q,
                              const Tensor& seqused_q, cudaStream_t stream) {
  if (out.numel() == 0 || !vd.present()) return cudaSuccess;
  const View4 v = view4(out);
  const Rows<int64_t> rw = rows_of<int64_t>(v, 8);
  scale_rows_kernel<<<blocks_for(v.shape[0] * v.shape[1] * v.shape[2] * rw.segs), 256, 0, stream>>>(
      v, descale(vd), group, row_seq(cu_seqlens_q, seqused_q, v.shape[0]), rw);
  return cudaGetLastError();
}

}  // namespace longattn::cuda

// V -> Vt for the fp8 dense_vt kernels (fp8_vt.h).
#include "cuda/fp8_vt.h"

namespace longattn::cuda {
namespace {

constexpr int kKeys = 128;  // keys per block: 8 groups of 16

// A 4 x 4 byte transpose: out[j] = (a_j, b_j, c_j, d_j).
__device__ __forceinline__ void transpose4x4(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint32_t (&out)[4]) {
  const uint32_t ab_lo = __byte_perm(a, b, 0x5140), ab_hi = __byte_perm(a, b, 0x7362);
  const uint32_t cd_lo = __byte_perm(c, d, 0x5140), cd_hi = __byte_perm(c, d, 0x7362);
  out[0] = __byte_perm(ab_lo, cd_lo, 0x5410);
  out[1] = __byte_perm(ab_lo, cd_lo, 0x7632);
  out[2] = __byte_perm(ab_hi, cd_hi, 0x5410);
  out[3] = __byte_perm(ab_hi, cd_hi, 0x7632);
}

// Block (batch x key tile, head): 128 keys x dim bytes through shared memory, 2 dim threads.
// Loads: 16 bytes per thread and row segment (coalesced rows of V). Then thread (g, q) (g: the
// 16-key group, q: 4 columns of V) reads its 16 keys' 4-byte words, and each 4 x 4 byte
// transpose of keys (2t, 2t + 1, 8 + 2t, 9 + 2t) gives word t of its 4 Vt rows (the
// permutation of sm90/fp8.cuh): four 16-byte stores.
// g runs fastest within a warp (4 q x 8 g), so each store instruction of a warp writes 4 Vt
// rows x 128 contiguous bytes (whole lines where keys_pad is a multiple of 128) rather than 32
// rows x 16 bytes. The warp's shared-memory reads (8 rows 16 apart, one 16-byte segment of 4
// q) would then fall on one bank group unless the rows' segments are swizzled: segment s of
// row r sits at s ^ (r / 16 % 8) in rows of 256 bytes, which puts the 8 rows on 8 distinct
// 4-bank groups. At dim 256 the loads' shared-memory stores are conflict-free too; narrower
// dims (128, the other dense_vt kernel) leave segments unused and their stores conflict 2-8
// ways (correct, slower).
constexpr int kRowBytes = 256;
__device__ __forceinline__ int32_t swz(int32_t r, int32_t s) { return r * kRowBytes + ((s ^ ((r >> 4) & 7)) << 4); }

__global__ void transpose_v_kernel(const uint8_t* __restrict__ v, int64_t sb, int64_t ss, int64_t sh, int32_t seq_k,
                                   int32_t dim, int32_t heads, int64_t keys_pad, int32_t tiles,
                                   uint8_t* __restrict__ vt) {
  __shared__ uint4 tile4[kKeys * kRowBytes / 16];
  uint8_t* tile = reinterpret_cast<uint8_t*>(tile4);
  const int32_t segs = dim / 16, nthreads = int32_t(blockDim.x);
  const int32_t b = int32_t(blockIdx.x / unsigned(tiles)), h = int32_t(blockIdx.y);
  const int64_t k0 = int64_t(blockIdx.x - unsigned(b) * unsigned(tiles)) * kKeys;
  const uint8_t* src = v + b * sb + h * sh;
#pragma unroll 4
  for (int32_t i = threadIdx.x; i < kKeys * segs; i += nthreads) {
    const int32_t r = i / segs, s = i - r * segs;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (k0 + r < seq_k) x = *reinterpret_cast<const uint4*>(src + (k0 + r) * ss + s * 16);
    *reinterpret_cast<uint4*>(tile + swz(r, s)) = x;
  }
  __syncthreads();
  const int32_t g = int32_t(threadIdx.x) & 7, q = int32_t(threadIdx.x) >> 3;
  if (k0 + 16 * g >= keys_pad) return;
  uint32_t w[16];
#pragma unroll
  for (int i = 0; i < 16; ++i)
    w[i] = *reinterpret_cast<const uint32_t*>(tile + swz(16 * g + i, q >> 2) + 4 * (q & 3));
  uint32_t rows[4][4];  // [Vt row j][word t]
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    uint32_t out[4];
    transpose4x4(w[2 * t], w[2 * t + 1], w[8 + 2 * t], w[9 + 2 * t], out);
#pragma unroll
    for (int j = 0; j < 4; ++j) rows[j][t] = out[j];
  }
  uint8_t* dst = vt + ((int64_t(b) * heads + h) * dim + 4 * q) * keys_pad + k0 + 16 * g;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    *reinterpret_cast<uint4*>(dst + j * keys_pad) = make_uint4(rows[j][0], rows[j][1], rows[j][2], rows[j][3]);
}

}  // namespace

cudaError_t launch_transpose_v_e4m3(const Tensor& v, uint8_t* vt, cudaStream_t stream) {
  const int64_t batch = v.shape[0], seq_k = v.shape[1], heads = v.shape[2], dim = v.shape[3];
  if (batch == 0 || seq_k == 0 || heads == 0) return cudaSuccess;
  const int64_t keys_pad = vt_keys_pad(seq_k), tiles = (keys_pad + kKeys - 1) / kKeys;
  // Grid x: (batch, key tile), y: heads (fp8_vt_fits).
  if (dim > 256 || dim % 16 != 0 || !fp8_vt_fits(batch, seq_k, heads)) return cudaErrorInvalidValue;
  const dim3 grid(unsigned(batch * tiles), unsigned(heads));
  transpose_v_kernel<<<grid, unsigned(2 * dim), 0, stream>>>(static_cast<const uint8_t*>(v.data), v.stride[0],
                                                                v.stride[1], v.stride[2], int32_t(seq_k), int32_t(dim),
                                                                int32_t(heads), keys_pad, int32_t(tiles), vt);
  return cudaGetLastError();
}

}  // namespace longattn::cuda

// V -> Vt for the fp8 hdim-256 kernel (fp8_vt.h).
#include "cuda/fp8_vt.h"

namespace longattn::cuda {
namespace {

constexpr int kKeys = 64;      // keys per block (4 groups of 16)
constexpr int kThreads = 256;  // one output row (a head-dim column of V) per thread and 256 columns

// Block (key tile, head, batch): 64 keys x dim bytes through shared memory. Loads: 16 bytes
// per thread and row segment (coalesced rows of V); stores: one Vt row (a column d of V) per
// thread, its 64 keys as four 16-byte stores.
__global__ void __launch_bounds__(kThreads) transpose_v_kernel(const uint8_t* __restrict__ v, int64_t sb, int64_t ss,
                                                              int64_t sh, int32_t seq_k, int32_t dim, int32_t heads,
                                                              int64_t keys_pad, int32_t tiles, uint8_t* __restrict__ vt) {
  extern __shared__ uint4 tile4[];  // [kKeys][dim + 16] bytes: the pad spreads a column's rows over banks
  uint8_t* tile = reinterpret_cast<uint8_t*>(tile4);
  const int32_t pitch = dim + 16;
  const int32_t b = int32_t(blockIdx.x / unsigned(tiles)), h = int32_t(blockIdx.y);
  const int64_t k0 = int64_t(blockIdx.x - unsigned(b) * unsigned(tiles)) * kKeys;
  const uint8_t* src = v + b * sb + h * sh;
  const int32_t segs = dim / 16;
  for (int32_t i = threadIdx.x; i < kKeys * segs; i += kThreads) {
    const int32_t r = i / segs, s = i - r * segs;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (k0 + r < seq_k) x = *reinterpret_cast<const uint4*>(src + (k0 + r) * ss + s * 16);
    *reinterpret_cast<uint4*>(tile + r * pitch + s * 16) = x;
  }
  __syncthreads();
  uint8_t* dst = vt + ((int64_t(b) * heads + h) * dim) * keys_pad + k0;
  for (int32_t d = threadIdx.x; d < dim; d += kThreads) {
#pragma unroll
    for (int g = 0; g < kKeys / 16; ++g) {
      if (k0 + 16 * g >= keys_pad) break;
      uint32_t w[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        uint32_t word = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = 16 * g + 8 * (i / 2) + 2 * t + i % 2;  // column 4 t + i of the group
          word |= uint32_t(tile[key * pitch + d]) << (8 * i);
        }
        w[t] = word;
      }
      *reinterpret_cast<uint4*>(dst + int64_t(d) * keys_pad + 16 * g) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

}  // namespace

cudaError_t launch_transpose_v_e4m3(const Tensor& v, uint8_t* vt, cudaStream_t stream) {
  const int64_t batch = v.shape[0], seq_k = v.shape[1], heads = v.shape[2], dim = v.shape[3];
  if (batch == 0 || seq_k == 0 || heads == 0) return cudaSuccess;
  const int64_t keys_pad = vt_keys_pad(seq_k), tiles = (keys_pad + kKeys - 1) / kKeys;
  // Grid x: (batch, key tile), y: heads (fp8_vt_fits).
  if (dim > 256 || dim % 16 != 0 || !fp8_vt_fits(batch, seq_k, heads)) return cudaErrorInvalidValue;
  const dim3 grid(unsigned(batch * tiles), unsigned(heads));
  const size_t smem = size_t(kKeys) * size_t(dim + 16);  // <= 17 KB
  transpose_v_kernel<<<grid, kThreads, smem, stream>>>(static_cast<const uint8_t*>(v.data), v.stride[0], v.stride[1],
                                                       v.stride[2], int32_t(seq_k), int32_t(dim), int32_t(heads),
                                                       keys_pad, int32_t(tiles), vt);
  return cudaGetLastError();
}

}  // namespace longattn::cuda

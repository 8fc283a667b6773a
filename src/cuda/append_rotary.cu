// The kvcache pre-kernels (append_rotary.h): the metadata check and the append + rotary.
// Both are memory-bound and small next to the attention that follows (decode: a few hundred
// rows of one head dim each). The rotation is float32: x c - y s and x s + y c, rounded once
// to the cache's / q's dtype (the host backends evaluate it in float64 before that rounding,
// so a rotated element may differ from theirs by one unit in the last place).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "cuda/append_rotary.h"

namespace longattn::cuda {
namespace {

// --- metadata: one block walks the batch (every check of validate_kvcache.cpp that the host
// could not run, except the pages the attention only reads: Args::check_page_table) ---------
__global__ void kv_meta_kernel(KvMetaParams p) {
  __shared__ unsigned long long s_err;
  if (threadIdx.x == 0) s_err = kNoError;
  __syncthreads();
  for (int32_t b = threadIdx.x; b < p.batch; b += blockDim.x) {
    const int64_t row = p.batch_idx ? p.batch_idx[b] : b;
    const int64_t end = p.seqused_k ? p.seqused_k[b] : p.capacity;
    const int64_t lp = p.leftpad ? p.leftpad[b] : 0;
    int64_t n0 = 0, n = p.cu_new ? 0 : p.seqlen_new;
    bool bad_new = false;
    if (p.cu_new) {
      n0 = p.cu_new[b];
      const int64_t n1 = p.cu_new[b + 1];
      bad_new = n0 < 0 || n1 < n0 || n1 > p.seqlen_new;
      n = bad_new ? 0 : n1 - n0;
    }
    const int64_t q_len = p.cu_q ? int64_t(p.cu_q[b + 1]) - p.cu_q[b] : p.seq_q;
    const int64_t rot0 = p.rotary_seqlens ? p.rotary_seqlens[b] : end;
    uint32_t code = 0;
    if (row < 0 || row >= p.cache_rows) code = kBadRow;
    else if (end < 0 || end > p.capacity) code = kBadEnd;
    else if (lp < 0 || lp > end) code = kBadLeftpad;
    else if (bad_new) code = kBadNew;
    else if (end + n > p.capacity) code = kOverflow;
    if (!code && p.page_table)  // only the pages the append writes: a bad entry there is a stray write
      for (int64_t i = end / p.page_size; i * p.page_size < end + n; ++i) {
        const int32_t e = p.page_table[row * p.pt_sb + i * p.pt_sp];
        if (e < 0 || e >= p.num_pages) {
          code = kBadPage;
          break;
        }
      }
    if (!code && p.rotary) {
      const int64_t q_pos = p.per_row ? q_len : (q_len > 0 ? 1 : 0);
      const int64_t need = n > q_pos ? n : q_pos;
      if (p.rotary_seqlens && rot0 < 0) code = kBadRotary0;
      else if (need > 0 && rot0 + need > p.seqlen_ro) code = kShortTable;
    }
    if (code) atomicMin(&s_err, (static_cast<unsigned long long>(b) << 8) | code);
    p.seqs[b] = KvSeq{int32_t(row), int32_t(end), int32_t(lp), int32_t(rot0), int32_t(n0), int32_t(n)};
    p.k_len[b] = int32_t(end - lp + n);
    if (p.k_start) p.k_start[b] = int32_t(row * p.capacity + lp);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    *p.err = s_err;
    if (p.k_start) p.k_start[p.batch] = int32_t(p.cache_rows * p.capacity);
  }
  if (s_err != kNoError)  // nothing is appended: every sequence attends to no key
    for (int32_t b = threadIdx.x; b < p.batch; b += blockDim.x) p.k_len[b] = 0;
}

// --- append + rotary -------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ float to_f(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
  else return __half2float(x);
}
template <typename T>
__device__ __forceinline__ T from_f(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(x);
  else return __float2half_rn(x);
}
template <typename T>
__device__ __forceinline__ float table(const void* t, bool f32, int64_t i) {
  return f32 ? static_cast<const float*>(t)[i] : to_f(static_cast<const T*>(t)[i]);
}

// One row of d elements (d even) by the 32 lanes of a warp: pairs rotated at `pos` within the
// first rd elements (rd = 0: a copy). GPT-J pairs (2u, 2u + 1); GPT-NeoX (u, u + rd / 2) for
// u < rd / 2, then the unrotated tail two elements at a time.
template <typename T>
__device__ __forceinline__ void row_rotate(const T* src, T* dst, int d, int rd, const AppendParams& p, int64_t pos, int lane) {
  const int half = rd >> 1;
  for (int u = lane; u < (d >> 1); u += 32) {
    int e0, e1;
    bool rot;
    if (p.interleaved) {
      e0 = 2 * u, e1 = e0 + 1, rot = e1 < rd;
    } else if (u < half) {
      e0 = u, e1 = u + half, rot = true;
    } else {
      e0 = rd + 2 * (u - half), e1 = e0 + 1, rot = false;
    }
    const T x = src[e0], y = src[e1];
    if constexpr (!std::is_same_v<T, uint8_t>) {
      if (rot) {
        const float c = table<T>(p.cos, p.table_f32, pos * p.cos_st + u);
        const float s = table<T>(p.sin, p.table_f32, pos * p.sin_st + u);
        const float fx = to_f(x), fy = to_f(y);
        dst[e0] = from_f<T>(fx * c - fy * s);
        dst[e1] = from_f<T>(fx * s + fy * c);
        continue;
      }
    }
    dst[e0] = x;
    dst[e1] = y;
  }
}

// Sequence b of token t in packed rows described by cu (batch + 1 offsets): -1 past the end.
__device__ __forceinline__ int32_t find_seq(const int32_t* cu, int32_t batch, int64_t t) {
  int32_t lo = 0, hi = batch;
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) >> 1;
    if (cu[mid] <= t) lo = mid;
    else hi = mid;
  }
  return (t >= cu[lo] && t < cu[lo + 1]) ? lo : -1;
}

// One warp per (new token, kv head) -- K rotated into its cache slot, V copied -- then per
// (q token, q head) with rotary; then the page-table rows of cache_batch_idx. When the
// metadata kernel reported a failed check: no cache write and no table read at all, only q
// copied unrotated (the scratch the attention reads stays defined; it sees no key anyway).
// NOTES: item, token, slot and page-table counts are below 2^31 (host: kvcache_prepare), so
// the index arithmetic divides in 32 bits; 64-bit divisions are subroutine calls whose
// saved registers spilled here. Launched with 256 threads, but without __launch_bounds__(256):
// with it ptxas stopped the e4m3 (byte) instantiation at 40 registers and spilled 12 bytes;
// without it every instantiation takes 48 and spills nothing.
template <typename T>
__global__ void append_rotary_kernel(AppendParams p) {
  const bool ok = *p.err == kNoError;
  const int lane = threadIdx.x & 31;
  const uint32_t thread = blockIdx.x * blockDim.x + threadIdx.x, threads = gridDim.x * blockDim.x;
  const uint32_t hkv = uint32_t(p.heads_kv), hq = uint32_t(p.heads_q);
  const uint32_t kv_items = ok ? uint32_t(p.new_tokens) * hkv : 0u;
  const uint32_t items = kv_items + (p.q_rot ? uint32_t(p.q_tokens) * hq : 0u);
  for (uint32_t it = thread >> 5; it < items; it += threads >> 5) {
    if (it < kv_items) {
      const uint32_t tok = it / hkv, hk = it % hkv;
      int32_t b;
      uint32_t i;
      if (p.cu_new) {
        b = find_seq(p.cu_new, p.batch, tok);
        if (b < 0) continue;
        i = tok - uint32_t(p.seqs[b].new_start);
      } else {
        b = int32_t(tok / uint32_t(p.seqlen_new)), i = tok % uint32_t(p.seqlen_new);
      }
      const KvSeq s = p.seqs[b];
      const uint32_t slot = uint32_t(s.end) + i;
      int64_t kc, vc;
      if (p.page_table) {
        const uint32_t ps = uint32_t(p.page_size), r = slot % ps;
        const int64_t page = p.page_table[s.row * p.pt_sb + int64_t(slot / ps) * p.pt_sp];
        kc = page * p.kc_sb + r * p.kc_st + hk * p.kc_sh;
        vc = page * p.vc_sb + r * p.vc_st + hk * p.vc_sh;
      } else {
        kc = s.row * p.kc_sb + slot * p.kc_st + hk * p.kc_sh;
        vc = s.row * p.vc_sb + slot * p.vc_st + hk * p.vc_sh;
      }
      const int64_t kn = p.cu_new ? tok * p.kn_st + hk * p.kn_sh : b * p.kn_sb + i * p.kn_st + hk * p.kn_sh;
      const int64_t vn = p.cu_new ? tok * p.vn_st + hk * p.vn_sh : b * p.vn_sb + i * p.vn_st + hk * p.vn_sh;
      row_rotate<T>(static_cast<const T*>(p.k_new) + kn, static_cast<T*>(p.k_cache) + kc, p.dim_qk, p.rotary_dim, p,
                    int64_t(s.rot0) + i, lane);
      row_rotate<T>(static_cast<const T*>(p.v_new) + vn, static_cast<T*>(p.v_cache) + vc, p.dim_v, 0, p, 0, lane);
    } else {
      const uint32_t j = it - kv_items, tok = j / hq, h = j % hq;
      int32_t b;
      uint32_t i;
      if (p.cu_q) {
        b = find_seq(p.cu_q, p.batch, tok);
        if (b < 0) continue;  // rows past the last sequence are never read
        i = tok - uint32_t(p.cu_q[b]);
      } else {
        b = int32_t(tok / uint32_t(p.seq_q)), i = tok % uint32_t(p.seq_q);
      }
      const int64_t src = p.cu_q ? tok * p.q_st + h * p.q_sh : b * p.q_sb + i * p.q_st + h * p.q_sh;
      const int64_t dst = p.cu_q ? tok * p.qr_st + h * p.qr_sh : b * p.qr_sb + i * p.qr_st + h * p.qr_sh;
      row_rotate<T>(static_cast<const T*>(p.q) + src, static_cast<T*>(p.q_rot) + dst, p.dim_qk, ok ? p.rotary_dim : 0,
                    p, ok ? int64_t(p.seqs[b].rot0) + (p.per_row ? i : 0u) : 0, lane);
    }
  }
  if (p.pt_out && ok) {
    const uint32_t mp = uint32_t(p.max_pages), n = uint32_t(p.batch) * mp;
    for (uint32_t e = thread; e < n; e += threads) p.pt_out[e] = p.page_table[p.seqs[e / mp].row * p.pt_sb + (e % mp) * p.pt_sp];
  }
}

}  // namespace

cudaError_t launch_kv_meta(const KvMetaParams& p, cudaStream_t stream) {
  kv_meta_kernel<<<1, 256, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_append_rotary(const AppendParams& p, ElemType t, int num_sms, cudaStream_t stream) {
  const int64_t warps = p.new_tokens * p.heads_kv + (p.q_rot ? p.q_tokens * p.heads_q : 0);
  const int64_t gather = p.pt_out ? int64_t(p.batch) * p.max_pages / 256 : 0;
  int64_t blocks = (warps + 7) / 8;  // 8 warps a block
  if (gather > blocks) blocks = gather;
  const int64_t cap = int64_t(num_sms) * 8;
  blocks = blocks < 1 ? 1 : (blocks > cap ? cap : blocks);
  switch (t) {
    case ElemType::bf16: append_rotary_kernel<__nv_bfloat16><<<unsigned(blocks), 256, 0, stream>>>(p); break;
    case ElemType::f16: append_rotary_kernel<__half><<<unsigned(blocks), 256, 0, stream>>>(p); break;
    default: append_rotary_kernel<uint8_t><<<unsigned(blocks), 256, 0, stream>>>(p); break;
  }
  return cudaGetLastError();
}

}  // namespace longattn::cuda

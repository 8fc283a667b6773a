// The kvcache pre-kernels (longattn.h KvCacheArgs steps 1-3 on the device): a one-block
// metadata kernel that checks every sequence and writes the attention's per-sequence
// lengths, then the append + rotary kernel that writes the new keys / values into the cache
// and the rotated q into scratch. The host side (kvcache_prepass.cpp) fills these params;
// plain pointers and element strides only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace longattn::cuda {

// First failed check of the metadata kernel, (sequence << 8) | code, atomicMin over the batch;
// kNoError when every check passed. The host turns a code into a message (kvcache_prepass.cpp).
enum KvCheck : uint32_t {
  kBadRow = 1,      // cache_batch_idx outside [0, cache rows)
  kBadEnd = 2,      // seqused_k outside [0, capacity]
  kBadLeftpad = 3,  // cache_leftpad outside [0, seqused_k]
  kBadNew = 4,      // cu_seqlens_k_new not non-decreasing within [0, k_new rows]
  kOverflow = 5,    // seqused_k + new keys > capacity
  kBadPage = 6,     // a page the append writes is outside [0, num_pages)
  kBadRotary0 = 7,  // rotary_seqlens negative
  kShortTable = 8,  // rotary positions past the tables' rows
};
inline constexpr unsigned long long kNoError = ~0ull;

// Per sequence, written by the metadata kernel for the append kernel.
struct KvSeq {
  int32_t row, end, lp, rot0, new_start, new_len;
};

struct KvMetaParams {
  int32_t batch = 0;
  const int32_t* seqused_k = nullptr;  // cache_seqlens (required with an append; else capacity)
  const int32_t* batch_idx = nullptr;
  const int32_t* leftpad = nullptr;
  const int32_t* cu_new = nullptr;     // ragged k_new
  const int32_t* rotary_seqlens = nullptr;
  const int32_t* cu_q = nullptr;       // ragged q (query rows per sequence)
  int64_t seqlen_new = 0;              // dense k_new rows per sequence; ragged: k_new's rows
  int64_t seq_q = 0;                   // dense q rows per sequence
  int64_t capacity = 0, cache_rows = 0;
  const int32_t* page_table = nullptr;  // paged: checks the pages the append writes
  int64_t pt_sb = 0, pt_sp = 0, page_size = 0, num_pages = 0;
  bool rotary = false, per_row = false;
  int64_t seqlen_ro = 0;
  // Outputs.
  unsigned long long* err = nullptr;
  KvSeq* seqs = nullptr;
  int32_t* k_len = nullptr;    // keys the attention sees: end - lp + new (0 for every sequence on error)
  int32_t* k_start = nullptr;  // dense cache viewed as ragged rows: row * capacity + lp (batch + 1 entries); or null
};

struct AppendParams {
  const unsigned long long* err = nullptr;
  const KvSeq* seqs = nullptr;
  int32_t batch = 0;
  int32_t heads_q = 0, heads_kv = 0, dim_qk = 0, dim_v = 0;
  // New keys / values: dense (batch, n, heads_kv, d) or ragged (rows, heads_kv, d); strides in elements.
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  int64_t kn_sb = 0, kn_st = 0, kn_sh = 0, vn_sb = 0, vn_st = 0, vn_sh = 0;
  const int32_t* cu_new = nullptr;
  int64_t seqlen_new = 0, new_tokens = 0;  // dense n; token rows to visit (batch n or k_new's rows)
  // The cache: (rows or pages, slots, heads_kv, d).
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  int64_t kc_sb = 0, kc_st = 0, kc_sh = 0, vc_sb = 0, vc_st = 0, vc_sh = 0;
  const int32_t* page_table = nullptr;  // null: dense
  int64_t pt_sb = 0, pt_sp = 0, page_size = 1;
  // Rotary: (seqlen_ro, rotary_dim / 2) tables, row stride in elements; f32 or the input type.
  const void* cos = nullptr;
  const void* sin = nullptr;
  int64_t cos_st = 0, sin_st = 0;
  int32_t rotary_dim = 0;  // 0: no rotary
  bool interleaved = true, per_row = false, table_f32 = false;
  // q -> q_rot (rotary only): dense (batch, seq_q, heads_q, d) or ragged (tokens, heads_q, d).
  const void* q = nullptr;
  void* q_rot = nullptr;
  int64_t q_sb = 0, q_st = 0, q_sh = 0, qr_sb = 0, qr_st = 0, qr_sh = 0;
  const int32_t* cu_q = nullptr;
  int64_t seq_q = 0, q_tokens = 0;
  // Page-table rows gathered by cache_batch_idx (paged): out (batch, max_pages), packed.
  const int32_t* batch_idx = nullptr;
  int32_t* pt_out = nullptr;
  int64_t max_pages = 0;
};

enum class ElemType : int { bf16 = 0, f16 = 1, byte = 2 };  // byte: e4m3, copied only

cudaError_t launch_kv_meta(const KvMetaParams& p, cudaStream_t stream);
cudaError_t launch_append_rotary(const AppendParams& p, ElemType t, int num_sms, cudaStream_t stream);

}  // namespace longattn::cuda

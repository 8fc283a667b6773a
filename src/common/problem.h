// The validated, normalized description of one forward call that every backend consumes.
// Built by src/api/validate.cpp; backends never re-validate.
#pragma once

#include <cstdint>
#include <vector>

#include "common/mask_rule.h"
#include "longattn/longattn.h"

namespace longattn::detail {

enum class KvLayout : uint8_t { dense, ragged, paged };

// Args::kvcache, normalized (validate_kvcache.cpp). Off (all false / 0) without kvcache inputs.
struct KvCacheInfo {
  bool any = false;            // some kvcache input is present (the k / v are a cache)
  bool append = false;         // k_new / v_new
  bool new_ragged = false;     // cu_seqlens_k_new
  bool rotary = false;         // rotary_cos / rotary_sin
  bool rotary_f32 = false;     // the tables are float32 (else q's dtype)
  bool rotary_per_row = false; // query row i at r0 + i (causal, window or chunk), else all at r0
  bool batch_idx = false, leftpad = false;
  int64_t seqlen_new = 0;      // dense k_new rows per sequence; ragged: k_new's total rows
  int64_t rotary_dim = 0, seqlen_ro = 0;
  int64_t cache_rows = 0;      // dense: k's batch extent; paged: page_table's rows
  int64_t capacity = 0;        // slots per cache row (dense seq extent; paged max_pages * page_size)
};

struct Problem {
  int64_t batch = 0;
  int64_t heads_q = 0, heads_kv = 0, group = 1;  // group = heads_q / heads_kv
  int64_t dim_qk = 0, dim_v = 0;
  bool q_ragged = false;
  KvLayout kv = KvLayout::dense;
  // Dense: tensor extents (seqused_q / seqused_k may use fewer rows); ragged / paged: max over
  // the batch (host metadata, after seqused_q / seqused_k) or the caller's max_seqlen (device).
  int64_t max_seq_q = 0, max_seq_k = 0;
  int64_t page_size = 0, max_pages = 0, num_pages = 0;  // paged only
  float scale = 1.0f;    // resolved softmax scale
  float softcap = 0.0f;  // 0: off
  MaskRule mask{};
  bool has_lse = false, has_sinks = false, has_seqused_k = false, has_seqused_q = false;
  bool fp8 = false;
  DType in_dtype = DType::bf16, out_dtype = DType::bf16;
  Device device{};
  bool meta_on_host = true;  // cu_seqlens / seqused_q/k / page_table readable from the host
  // Args::cp_world / cp_rank (zigzag context parallelism): cp_chunk = c > 0 when on; then
  // batch 1, max_seq_q = 2c, max_seq_k = 2 cp_world c (the whole sequence), k / v are
  // (cp_world, 2c, heads_kv, dim) and query_position / k_offset map rows (layout.cpp).
  int64_t cp_world = 0, cp_rank = 0, cp_chunk = 0;
  KvCacheInfo kvc{};
};

// Per-sequence extents, read from host-resident metadata (meta_on_host must be true).
struct SeqInfo {
  int64_t q_start = 0;  // first row in q/out/lse token dim (ragged) or 0 (dense)
  int64_t q_len = 0;    // query rows used (seqused_q applied); later rows are not touched
  int64_t k_start = 0;  // first row in k/v token dim (ragged); dense / paged: first cache slot
                        // (kvcache.cache_leftpad, else 0)
  int64_t k_len = 0;    // keys used (seqused_k applied; kvcache: appended keys included)
  int64_t kv_row = 0;   // dense / paged: the cache row (kvcache.cache_batch_idx, else b)
  // kvcache append: the cache slot of the first new key (seqused_k), the new keys and the
  // first of them in k_new's token dim (ragged) or 0 (dense); rotary position r0.
  int64_t cache_end = 0, new_len = 0, new_start = 0, rot0 = 0;
};

SeqInfo seq_info(const Args& a, const Problem& p, int64_t b);

// Element offsets (in elements, 64-bit) of row `i` of sequence b, head h, dim 0.
int64_t q_offset(const Args& a, const Problem& p, int64_t b, const SeqInfo& s, int64_t i,
                 int64_t h);
int64_t out_offset(const Args& a, const Problem& p, int64_t b, const SeqInfo& s, int64_t i,
                   int64_t h);
// Key/value row j of sequence b (pages resolved through the host page table), kv head hk.
int64_t k_offset(const Args& a, const Problem& p, int64_t b, const SeqInfo& s, int64_t j,
                 int64_t hk);
int64_t v_offset(const Args& a, const Problem& p, int64_t b, const SeqInfo& s, int64_t j,
                 int64_t hk);
// Key position of query row i of a sequence (the mask's coordinates, mask_rule.h): i plus
// the mask's alignment offset, or the global position under zigzag context parallelism.
int64_t query_position(const Problem& p, const SeqInfo& s, int64_t i);
// LSE element of row i of sequence b, head h.
int64_t lse_offset(const Args& a, const Problem& p, int64_t b, const SeqInfo& s, int64_t i,
                   int64_t h);

// fp8 descale of (b, hk) for q/k/v (1.0 when absent).
float descale(const Tensor& t, int64_t b, int64_t hk);

// Scalar element conversions used by host backends.
double load_as_double(const void* base, DType t, int64_t offset);
float load_as_float(const void* base, DType t, int64_t offset);
void store_from_float(void* base, DType t, int64_t offset, float x);  // round to nearest even

// Fills `prob` from validated args (called by validation; exposed for tests).
Status build_problem(const Args& a, Problem* prob);

// validate_kvcache.cpp: Args::kvcache's shapes, dtypes and devices into p->kvc (after the
// core geometry of `p` is known), and one sequence's host metadata against the cache
// (capacity, rows, pages, rotary table). Both return Invalid naming the argument.
Status check_kvcache_args(const Args& a, Problem* p);
Status check_kvcache_sequence(const Args& a, const Problem& p, int64_t b, const SeqInfo& s);

// kvcache_host.cpp, for host backends: runs steps 1-3 of KvCacheArgs on host tensors (the
// append into the caller's k / v; the rotated q into `q_rot`, an owned buffer) and returns
// the attention-only arguments of step 4 in `attn` (q -> the rotated copy, seqused_k -> the
// ends after the append, no k_new / rotary; cache_batch_idx / cache_leftpad kept) with their
// problem. `ends` owns the new seqused_k values.
struct HostKvcache {
  std::vector<uint8_t> q_rot;
  std::vector<int32_t> ends;
  Args attn;
  Problem problem;
};
Status host_kvcache_apply(const Args& a, const Problem& p, HostKvcache* out);
// Only step 3's query rotation (no cache write): q rotated into `q_rot` (q's shape, packed).
// `view` receives a tensor viewing it.
void host_rotate_q(const Args& a, const Problem& p, std::vector<uint8_t>* q_rot, Tensor* view);

// Backend entry points. `a` is validated and `p` built from it.
Status reference_forward(const Args& a, const Problem& p);
Status cpu_forward(const Args& a, const Problem& p);
struct Overrides;  // common/overrides.h
Status cuda_forward(const Args& a, const Problem& p, const Overrides& ov);  // NotSupported without CUDA

Status reference_combine(const CombineArgs& a);
Status cuda_combine(const CombineArgs& a);

}  // namespace longattn::detail

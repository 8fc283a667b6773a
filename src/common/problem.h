// The validated, normalized description of one forward call that every backend consumes.
// Built by src/api/validate.cpp; backends never re-validate.
#pragma once

#include <cstdint>

#include "common/mask_rule.h"
#include "longattn/longattn.h"

namespace longattn::detail {

enum class KvLayout : uint8_t { dense, ragged, paged };

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
};

// Per-sequence extents, read from host-resident metadata (meta_on_host must be true).
struct SeqInfo {
  int64_t q_start = 0;  // first row in q/out/lse token dim (ragged) or 0 (dense)
  int64_t q_len = 0;    // query rows used (seqused_q applied); later rows are not touched
  int64_t k_start = 0;  // first row in k/v token dim (ragged) or 0 (dense/paged)
  int64_t k_len = 0;    // keys used (seqused_k applied)
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

// Backend entry points. `a` is validated and `p` built from it.
Status reference_forward(const Args& a, const Problem& p);
Status cpu_forward(const Args& a, const Problem& p);
struct Overrides;  // common/overrides.h
Status cuda_forward(const Args& a, const Problem& p, const Overrides& ov);  // NotSupported without CUDA

Status reference_combine(const CombineArgs& a);
Status cuda_combine(const CombineArgs& a);

}  // namespace longattn::detail

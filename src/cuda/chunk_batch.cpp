// Chunked attention as a batch of its chunks (chunk_batch.h).
#include "cuda/chunk_batch.h"

namespace longattn::cuda {
namespace {

// t (batch, seq, heads, dim) as (batch x seq / rows, rows, heads, dim); `t` qualifies when its
// batches follow each other (or there is one).
bool batches_follow(const Tensor& t) { return t.rank == 4 && (t.shape[0] == 1 || t.stride[0] == t.shape[1] * t.stride[1]); }

Tensor as_chunks(const Tensor& t, int64_t rows) {
  Tensor v = t;
  v.shape[0] = t.shape[0] * (t.shape[1] / rows);
  v.shape[1] = rows;
  v.stride[0] = rows * t.stride[1];
  return v;
}

}  // namespace

int64_t chunk_batch_rows(const Args& a, const detail::Problem& p) {
  const detail::MaskRule& m = p.mask;
  if (m.chunk <= 0 || m.window_left >= 0 || m.window_right >= 0) return 0;
  if (p.q_ragged || p.kv != detail::KvLayout::dense || p.has_seqused_k || p.has_seqused_q ||
      p.cp_chunk > 0 || p.kvc.any)
    return 0;
  const int64_t s = p.max_seq_q;
  if (s == 0 || p.max_seq_k != s) return 0;
  const int64_t rows = m.chunk < s ? m.chunk : s;
  if (s % rows != 0) return 0;
  if (!batches_follow(a.q) || !batches_follow(a.k) || !batches_follow(a.v) || !batches_follow(a.out)) return 0;
  return rows;
}

Args chunk_batch_args(const Args& a, int64_t rows, float* lse_scratch, float* descale_scratch) {
  Args b = a;
  b.q = as_chunks(a.q, rows);
  b.k = as_chunks(a.k, rows);
  b.v = as_chunks(a.v, rows);
  b.out = as_chunks(a.out, rows);
  b.mask.chunk_size = 0;
  if (a.lse.present()) {  // (batch x chunks, heads, rows), contiguous
    b.lse = a.lse;
    b.lse.data = lse_scratch;
    b.lse.shape[0] = b.q.shape[0];
    b.lse.shape[1] = a.lse.shape[1];
    b.lse.shape[2] = rows;
    b.lse.stride[2] = 1;
    b.lse.stride[1] = rows;
    b.lse.stride[0] = a.lse.shape[1] * rows;
  }
  // fp8 has all three descales (validate_forward.cpp), non-fp8 none: scratch row i is descale i.
  Tensor* ds[3] = {&b.q_descale, &b.k_descale, &b.v_descale};
  for (int i = 0; i < 3; ++i) {
    Tensor* d = ds[i];
    if (!d->present()) continue;
    const int64_t heads_kv = d->shape[1];
    d->data = descale_scratch + int64_t(i) * b.q.shape[0] * heads_kv;
    d->shape[0] = b.q.shape[0];
    d->stride[0] = heads_kv;
    d->stride[1] = 1;
  }
  return b;
}

}  // namespace longattn::cuda

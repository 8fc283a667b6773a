// A tiny C ABI over longattn::forward for the Python benchmark (loaded with ctypes): raw
// device pointers of contiguous (batch, seq, heads, dim) tensors, a stream, shapes.
#include <cstdint>
#include <cstring>

#include "longattn/longattn.h"

namespace {
void copy_err(const longattn::Status& s, char* err, int err_len) {
  if (err && err_len > 0) {
    std::strncpy(err, s.message().c_str(), size_t(err_len - 1));
    err[err_len - 1] = 0;
  }
}
// Every entry point ends here: CUDA backend on the caller's stream; 0 or 1 + message.
int run(longattn::Args& a, void* stream, char* err, int err_len) {
  a.backend = longattn::Backend::cuda;
  a.stream = stream;
  const longattn::Status s = longattn::forward(a);
  if (s.ok()) return 0;
  copy_err(s, err, err_len);
  return 1;
}
}  // namespace

extern "C" {

int longattn_bench_forward_ex(void* q, void* k, void* v, void* out, void* lse, int dtype,
                              int64_t batch, int64_t seq_q, int64_t seq_k, int64_t heads_q,
                              int64_t heads_kv, int64_t dim, int causal, float scale, float softcap,
                              void* sinks, int64_t window_left, int64_t window_right, int64_t chunk,
                              void* stream, char* err, int err_len);

/// Runs forward on the CUDA backend. dtype: 0 bf16, 1 f16 (out has the same dtype); lse may
/// be null; scale <= 0 means 1/sqrt(dim). Returns 0 on success, else writes a message to err.
int longattn_bench_forward(void* q, void* k, void* v, void* out, void* lse, int dtype,
                           int64_t batch, int64_t seq_q, int64_t seq_k, int64_t heads_q,
                           int64_t heads_kv, int64_t dim, int causal, float scale, void* stream,
                           char* err, int err_len) {
  return longattn_bench_forward_ex(q, k, v, out, lse, dtype, batch, seq_q, seq_k, heads_q, heads_kv,
                                   dim, causal, scale, 0.0f, nullptr, -1, -1, 0, stream, err,
                                   err_len);
}

/// longattn_bench_forward with the issue-5 options: softcap (0: off), sinks (device float32
/// per query head, or null), window_left / window_right (-1: off), chunk (0: off).
int longattn_bench_forward_ex(void* q, void* k, void* v, void* out, void* lse, int dtype,
                              int64_t batch, int64_t seq_q, int64_t seq_k, int64_t heads_q,
                              int64_t heads_kv, int64_t dim, int causal, float scale, float softcap,
                              void* sinks, int64_t window_left, int64_t window_right, int64_t chunk,
                              void* stream, char* err, int err_len) {
  using namespace longattn;
  const DType t = dtype == 0 ? DType::bf16 : DType::f16;
  const Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q, t, {batch, seq_q, heads_q, dim}, g);
  a.k = make_tensor(k, t, {batch, seq_k, heads_kv, dim}, g);
  a.v = make_tensor(v, t, {batch, seq_k, heads_kv, dim}, g);
  a.out = make_tensor(out, t, {batch, seq_q, heads_q, dim}, g);
  if (lse) a.lse = make_tensor(lse, DType::f32, {batch, heads_q, seq_q}, g);
  if (sinks) a.sinks = make_tensor(sinks, DType::f32, {heads_q}, g);
  a.mask.causal = causal != 0;
  a.mask.window_left = window_left;
  a.mask.window_right = window_right;
  a.mask.chunk_size = chunk;
  a.softcap = softcap;
  if (scale > 0) a.softmax_scale = scale;
  return run(a, stream, err, err_len);
}

/// Ragged batch (packed (total, heads, dim) q/k/v/out, device int32 cu_seqlens of length
/// batch+1 shared by q and k), on the CUDA backend.
int longattn_bench_forward_ragged(void* q, void* k, void* v, void* out, void* cu_seqlens, int64_t batch,
                                  int64_t total, int64_t max_len, int64_t heads_q, int64_t heads_kv,
                                  int64_t dim, int causal, void* stream, char* err, int err_len) {
  using namespace longattn;
  const Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q, DType::bf16, {total, heads_q, dim}, g);
  a.k = make_tensor(k, DType::bf16, {total, heads_kv, dim}, g);
  a.v = make_tensor(v, DType::bf16, {total, heads_kv, dim}, g);
  a.out = make_tensor(out, DType::bf16, {total, heads_q, dim}, g);
  a.cu_seqlens_q = make_tensor(cu_seqlens, DType::i32, {batch + 1}, g);
  a.cu_seqlens_k = a.cu_seqlens_q;
  a.max_seqlen_q = a.max_seqlen_k = max_len;
  a.mask.causal = causal != 0;
  return run(a, stream, err, err_len);
}

/// Paged K/V (bf16): dense q / out (batch, seq_q, heads_q, dim), k / v pages (num_pages,
/// page_size, heads_kv, dim), device int32 page table (batch, max_pages), optional device
/// int32 seqused_k (batch; null: every sequence holds max_pages * page_size keys).
int longattn_bench_forward_paged(void* q, void* k, void* v, void* out, void* page_table, void* seqused_k,
                                 int64_t batch, int64_t seq_q, int64_t num_pages, int64_t page_size,
                                 int64_t max_pages, int64_t heads_q, int64_t heads_kv, int64_t dim, int causal,
                                 void* stream, char* err, int err_len) {
  using namespace longattn;
  const Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q, DType::bf16, {batch, seq_q, heads_q, dim}, g);
  a.k = make_tensor(k, DType::bf16, {num_pages, page_size, heads_kv, dim}, g);
  a.v = make_tensor(v, DType::bf16, {num_pages, page_size, heads_kv, dim}, g);
  a.out = make_tensor(out, DType::bf16, {batch, seq_q, heads_q, dim}, g);
  a.page_table = make_tensor(page_table, DType::i32, {batch, max_pages}, g);
  if (seqused_k) a.seqused_k = make_tensor(seqused_k, DType::i32, {batch}, g);
  a.mask.causal = causal != 0;
  return run(a, stream, err, err_len);
}

/// Dense bf16 q / k (batch, seq, heads, dim_qk), v (batch, seq, heads_kv, dim_v), out
/// (batch, seq, heads_q, dim_v): head dims that differ (192 / 128), on the CUDA backend.
int longattn_bench_forward_split(void* q, void* k, void* v, void* out, int64_t batch, int64_t seq, int64_t heads_q,
                                 int64_t heads_kv, int64_t dim_qk, int64_t dim_v, int causal, void* stream, char* err,
                                 int err_len) {
  using namespace longattn;
  const Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q, DType::bf16, {batch, seq, heads_q, dim_qk}, g);
  a.k = make_tensor(k, DType::bf16, {batch, seq, heads_kv, dim_qk}, g);
  a.v = make_tensor(v, DType::bf16, {batch, seq, heads_kv, dim_v}, g);
  a.out = make_tensor(out, DType::bf16, {batch, seq, heads_q, dim_v}, g);
  a.mask.causal = causal != 0;
  return run(a, stream, err, err_len);
}
}

// Host entry of the CUDA backend: refuse what the sm90 kernels cannot serve, plan the call
// (plan.h), build its tensor maps and params (launch_args.h), launch, and merge split-KV
// partials. Arguments arrive validated (src/api); nothing is written before every check
// has passed.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "api/check.h"
#include "common/overrides.h"
#include "common/problem.h"
#include "cuda/chunk_batch.h"
#include "cuda/device_guard.h"
#include "cuda/fp8_upcast.h"
#include "cuda/fp8_upcast_rule.h"
#include "cuda/fp8_vt.h"
#include "cuda/paged_gather.h"
#include "cuda/kvcache_prepass.h"
#include "cuda/launch_args.h"
#include "cuda/plan.h"
#include "cuda/sm90/launch.h"
#include "cuda/util_kernels.h"

namespace longattn::detail {
namespace {

using cuda::sm90::InType;
using cuda::sm90::LaunchArgs;

Status not_yet(const std::string& what) {
  return Status::NotSupported(what + " not supported by the CUDA backend yet");
}

Status cuda_error(const char* what, cudaError_t e) {
  return Status::Error(std::string("CUDA backend: ") + what + ": " + cudaGetErrorString(e));
}

// A tensor without elements is never read (every key sequence empty: the fill runs; no query
// row: nothing runs) and its pointer may be anything (null, or the Python binding's one-byte
// sentinel): no alignment rule applies to it.
Status check_tma_operand(const char* name, const Tensor& t) {
  if (t.numel() == 0) return Status::Ok();
  const int64_t es = dtype_size(t.dtype);
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    return Status::NotSupported(std::string(name) + ": base pointer must be 16-byte aligned for the CUDA backend");
  for (int i = 0; i < t.rank - 1; ++i)  // every dim but the contiguous last one
    if ((t.stride[i] * es) % 16 != 0 && t.shape[i] > 1)
      return Status::NotSupported(std::string(name) + ": strides must be multiples of 16 bytes for the CUDA backend");
  return Status::Ok();
}

Status check_device(const char* name, const Tensor& t, const Problem& p) {
  if (!t.present()) return Status::Ok();
  if (t.device.kind != DeviceKind::cuda || t.device.ordinal != p.device.ordinal)
    return Status::Invalid(std::string(name) + ": must be on the same CUDA device as q");
  return Status::Ok();
}

// v's column slices (split_v_forward): v above 256 as a first slice of a multiple of 64 columns
// (its base stays 16-byte aligned for TMA at any element size) and the rest; else v whole.
int64_t v_slice(int64_t dv) { return dv > 256 ? std::min<int64_t>(256, (dv / 2 + 63) / 64 * 64) : dv; }

// What the kernels cannot serve: dtypes, head dims, layouts beyond their 32-bit coordinates,
// misaligned operands. NotSupported names the argument.
Status check_supported(const Args& a, const Problem& p) {
  if (p.in_dtype != DType::bf16 && p.in_dtype != DType::f16 && !p.fp8)
    return not_yet(std::string("q dtype ") + dtype_name(p.in_dtype));
  // Head dims: any multiple of 8 that a compiled kernel holds (tile_size.h kernel_dims: 64,
  // 128, 192 / 128, 192, 256; fp8 128 and 256 / 256), narrower ones with zero-filled columns.
  const std::string dims = std::to_string(p.dim_qk) + " / " + std::to_string(p.dim_v);
  if (p.dim_qk % 8 != 0 || p.dim_v % 8 != 0)
    return not_yet("head dims " + dims + " (q / k and v: multiples of 8)");
  // fp8 above 128 runs on the f16 kernels (fp8_upcast.h): the 16-bit kernels' dims apply. v
  // above 256 (up to 512) runs as two column slices (split_v_forward; the first the wider).
  const int64_t dv0 = v_slice(p.dim_v), dv1 = p.dim_v - dv0;
  const bool upcast = p.fp8 && cuda::sm90::kernel_dims(int(p.dim_qk), int(dv0), true).qk == 0;
  const cuda::sm90::HeadDims kd = cuda::sm90::kernel_dims(int(p.dim_qk), int(dv0), p.fp8 && !upcast);
  if (kd.qk == 0 || p.dim_v > 512) return not_yet("head dims " + dims + " (q / k up to 256, v up to 512)");
  if (p.out_dtype != DType::bf16 && p.out_dtype != DType::f16 && p.out_dtype != DType::f32)
    return not_yet(std::string("out dtype ") + dtype_name(p.out_dtype));
  if (p.device.kind != DeviceKind::cuda) return Status::Invalid("q: must be a CUDA tensor for the CUDA backend");

  const char* names[] = {"q", "k", "v", "out", "lse", "sinks", "page_table", "q_descale", "k_descale", "v_descale"};
  const Tensor* ts[] = {&a.q, &a.k, &a.v, &a.out, &a.lse, &a.sinks, &a.page_table, &a.q_descale, &a.k_descale, &a.v_descale};
  for (int i = 0; i < 10; ++i) LONGATTN_TRY(check_device(names[i], *ts[i], p));
  for (int i = 0; i < 3; ++i) LONGATTN_TRY(check_tma_operand(names[i], *ts[i]));
  // Ragged token rows are TMA coordinates (int32).
  for (int i = 0; i < 3; ++i)
    if (ts[i]->rank == 3 && ts[i]->shape[0] > INT32_MAX - 4096)
      return not_yet(std::string(names[i]) + ": 2^31 or more ragged tokens");
  // Epilogue stores pairs of elements: 4-byte (16-bit out) or 8-byte (f32 out) aligned (an
  // empty out is never written).
  const int64_t out_es = dtype_size(p.out_dtype);
  if (a.out.numel() > 0) {
    if (reinterpret_cast<uintptr_t>(a.out.data) % (2 * out_es) != 0)
      return Status::NotSupported("out: base pointer must be aligned to 2 elements for the CUDA backend");
    for (int i = 0; i < a.out.rank - 1; ++i)
      if (a.out.stride[i] % 2 != 0 && a.out.shape[i] > 1)
        return Status::NotSupported("out: strides must be even for the CUDA backend");
  }
  // TMA coordinates and tile ids are int32 (element offsets stay 64-bit).
  if (p.max_seq_q + p.max_seq_k > INT32_MAX - 1024 || p.heads_q > INT32_MAX || p.batch > INT32_MAX)
    return not_yet("sequence lengths beyond 2^31");
  // Zigzag context parallelism (Args::cp_world): the fp8 kernel at 128 and 16-bit kernels up
  // to 256 (plan.cpp checks the kernel kind and the chunk's size).
  if (p.cp_chunk > 0 && ((p.fp8 && (upcast || kd.qk != 128)) || p.dim_v > 256))
    return not_yet("cp_world with head dims " + dims + (p.fp8 ? " in fp8 (128 only)" : " (v up to 256)"));
  if (p.kv == KvLayout::paged) {  // the producer's page-table offsets are 32-bit
    if ((p.batch - 1) * a.page_table.stride[0] + p.max_pages > INT32_MAX) return not_yet("page_table: 2^31 or more entries");
    if (a.page_table.stride[1] != 1 && p.max_pages > 1) return not_yet("page_table: a non-contiguous row (stride[1] != 1)");
    if (p.num_pages > INT32_MAX || p.page_size > INT32_MAX / 2)
      return not_yet("page_table: 2^31 or more pages or keys per page");
  }
  return Status::Ok();
}

// Args::check_page_table: every entry a sequence reads lies in [0, num_pages).
Status check_pages(const Args& a, const Problem& p, cudaStream_t stream) {
  int64_t bad[3];
  if (cudaError_t e = cuda::check_page_table(a.page_table, a.seqused_k, p.page_size, p.num_pages, stream, bad);
      e != cudaSuccess)
    return cuda_error("page table check", e);
  if (bad[0] >= 0)
    return Status::Invalid("page_table: entry [" + std::to_string(bad[0]) + ", " + std::to_string(bad[1]) + "] = " +
                           std::to_string(bad[2]) + " outside [0, " + std::to_string(p.num_pages) + ") pages of k");
  return Status::Ok();
}

// The instantiation of the plan's head dims (tile_size.h kernel_dims).
cudaError_t launch(const Problem& p, const cuda::ForwardPlan& plan, const LaunchArgs& la) {
  if (p.fp8)
    return plan.dim_qk == 256 ? cuda::sm90::launch_fwd<InType::e4m3, 256, 256>(la)
                              : cuda::sm90::launch_fwd<InType::e4m3, 128, 128>(la);
  const bool bf16 = p.in_dtype == DType::bf16;
  if (plan.dim_qk != plan.dim_v)  // 192 / 128
    return bf16 ? cuda::sm90::launch_fwd<InType::bf16, 192, 128>(la) : cuda::sm90::launch_fwd<InType::f16, 192, 128>(la);
  switch (plan.dim_qk) {
    case 64: return bf16 ? cuda::sm90::launch_fwd<InType::bf16, 64, 64>(la) : cuda::sm90::launch_fwd<InType::f16, 64, 64>(la);
    case 192:
      return bf16 ? cuda::sm90::launch_fwd<InType::bf16, 192, 192>(la) : cuda::sm90::launch_fwd<InType::f16, 192, 192>(la);
    case 128:
      return bf16 ? cuda::sm90::launch_fwd<InType::bf16, 128, 128>(la) : cuda::sm90::launch_fwd<InType::f16, 128, 128>(la);
    default:
      return bf16 ? cuda::sm90::launch_fwd<InType::bf16, 256, 256>(la) : cuda::sm90::launch_fwd<InType::f16, 256, 256>(la);
  }
}

// A contiguous tensor of `rank` / `shape` and dtype `dt` over `data` (scratch), on `like`'s device.
Tensor contiguous(const Tensor& like, void* data, DType dt, int rank, const int64_t* shape) {
  Tensor t = like;
  t.data = data;
  t.dtype = dt;
  t.rank = rank;
  int64_t st = 1;
  for (int i = rank - 1; i >= 0; --i) {
    t.shape[i] = shape[i];
    t.stride[i] = st;
    st *= shape[i];
  }
  return t;
}

// fp8 with head dims no fp8 kernel serves (and the calls fp8_upcast_needed names): the f16
// kernels on exact f16 copies of K and V and a descaled copy of Q, v_descale in V's copy or
// on the output rows (fp8_upcast.h). Stream-ordered scratch for the copies (K / V whole, paged
// pools included), freed after the forward.
Status fp8_upcast_forward(const Args& a, const Problem& p, const Overrides& ov) {
  cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  auto padded = [](int64_t n) { return (n + 63) / 64 * 64; };  // 128-byte aligned regions
  const int64_t nq = padded(a.q.numel()), nk = padded(a.k.numel()), nv = padded(a.v.numel());
  __half* scratch = nullptr;
  if (cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&scratch), size_t(nq + nk + nv + 64) * 2, stream);
      e != cudaSuccess)
    return cuda_error("fp8 upcast scratch", e);
  Args b = a;
  b.q = contiguous(a.q, scratch, DType::f16, a.q.rank, a.q.shape);
  b.k = contiguous(a.k, scratch + nq, DType::f16, a.k.rank, a.k.shape);
  b.v = contiguous(a.v, scratch + nq + nk, DType::f16, a.v.rank, a.v.shape);
  b.q_descale = b.k_descale = b.v_descale = Tensor{};
  cudaError_t e = cuda::launch_upcast_e4m3(a.q, static_cast<__half*>(b.q.data), a.q_descale, a.k_descale, p.group,
                                           a.cu_seqlens_q, stream);
  if (e == cudaSuccess) e = cuda::launch_upcast_e4m3(a.k, static_cast<__half*>(b.k.data), {}, {}, 1, {}, stream);
  // V times its descale where each V row's batch index is its sequence (dense K / V; ragged
  // rows may come from a kvcache view whose starts are not sorted, paged pages may serve several
  // sequences): the output then needs no pass of its own.
  const bool v_scaled = a.v_descale.present() && p.kv == KvLayout::dense;
  if (e == cudaSuccess)
    e = cuda::launch_upcast_e4m3(a.v, static_cast<__half*>(b.v.data), v_scaled ? a.v_descale : Tensor{}, {}, 1,
                                 {}, stream);
  Status s = e == cudaSuccess ? Status::Ok() : cuda_error("fp8 upcast", e);
  Problem pb;
  if (s.ok()) s = build_problem(b, &pb);
  if (s.ok()) s = cuda_forward(b, pb, ov);
  if (s.ok() && a.v_descale.present() && !v_scaled) {
    e = cuda::launch_scale_rows(a.out, a.v_descale, p.group, a.cu_seqlens_q, a.seqused_q, stream);
    if (e != cudaSuccess) s = cuda_error("fp8 v_descale", e);
  }
  const cudaError_t f = cudaFreeAsync(scratch, stream);
  return !s.ok() || f == cudaSuccess ? s : cuda_error("fp8 upcast scratch", f);
}

// Chunked attention as a batch of its chunks (chunk_batch.h): the same call on views, its LSE
// (if asked for) and fp8's descales through one stream-ordered scratch.
Status chunk_batch_forward(const Args& a, int64_t rows, const Overrides& ov) {
  cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  const int64_t chunks = a.q.shape[1] / rows;
  const int64_t n_lse = a.lse.present() ? a.lse.numel() : 0;
  const int64_t n_descale = a.q_descale.present() ? a.q_descale.numel() * chunks : 0;  // each of the three
  float* scratch = nullptr;
  if (n_lse + 3 * n_descale > 0) {
    if (cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&scratch), size_t(n_lse + 3 * n_descale) * 4, stream);
        e != cudaSuccess)
      return cuda_error("chunk scratch", e);
  }
  float* lse = n_lse ? scratch : nullptr;
  float* descales = scratch ? scratch + n_lse : nullptr;
  cudaError_t e = cudaSuccess;
  if (n_descale > 0) {  // fp8: all three (validate_forward.cpp), in chunk_batch_args' order
    const Tensor* ds[3] = {&a.q_descale, &a.k_descale, &a.v_descale};
    for (int i = 0; i < 3 && e == cudaSuccess; ++i) e = cuda::launch_repeat_rows(*ds[i], chunks, descales + i * n_descale, stream);
  }
  const Args b = cuda::chunk_batch_args(a, rows, lse, descales);
  Problem pb;
  Status s = e == cudaSuccess ? build_problem(b, &pb) : cuda_error("chunk descales", e);
  if (s.ok()) s = cuda_forward(b, pb, ov);
  if (s.ok() && lse) {
    if (cudaError_t le = cuda::launch_lse_from_chunks(lse, a.lse, rows, stream); le != cudaSuccess)
      s = cuda_error("chunk LSE copy", le);
  }
  const cudaError_t f = scratch ? cudaFreeAsync(scratch, stream) : cudaSuccess;
  return !s.ok() || f == cudaSuccess ? s : cuda_error("chunk scratch", f);
}

// fp8 calls no fp8 kernel serves run on the f16 kernels (fp8_upcast_forward): head dims the
// fp8 kernels lack, and at 256 / 256 (there the dense_vt kind alone, V pre-transposed:
// fp8_vt.h) whatever that kind does not run: ragged or paged K/V and q, seqused, sinks, softcap,
// windows, chunks (and a transpose grid beyond CUDA's limits). Elsewhere Overrides::fp8_upcast
// decides, or the rule (fp8_upcast_rule.h: small head dims with enough queries and keys).
bool fp8_upcast_needed(const Problem& p, const Overrides& ov) {
  if (!p.fp8) return false;
  const cuda::sm90::HeadDims kd = cuda::sm90::kernel_dims(int(p.dim_qk), int(p.dim_v), true);
  if (kd.qk == 0) return true;
  if (kd.qk > 128) {
    const bool windowed = p.mask.windowed();
    if (p.q_ragged || p.kv != KvLayout::dense || p.has_seqused_k || p.has_seqused_q || p.has_sinks ||
        p.softcap > 0.f || windowed || !cuda::fp8_vt_fits(p.batch, p.max_seq_k, p.heads_kv))
      return true;
  }
  if (p.cp_chunk > 0) return false;  // context parallelism runs on the fp8 kernel (check_supported)
  if (ov.fp8_upcast != Force::rule) return ov.fp8_upcast == Force::on;
  return cuda::fp8_upcast_faster(p);
}

// fp8 dense_vt: V transposed into stream-ordered scratch (fp8_vt.h) and the kernel's V map
// over it (column-addressed: a 128-key box of all the head dim's rows). alloc() right after the
// plan (cuda_forward falls back to the dense kind where it fails), prepare() before the launch,
// release() after it; the destructor frees the scratch on the paths that return early.
struct Fp8Vt {
  uint8_t* vt = nullptr;
  cudaStream_t stream = nullptr;
  int64_t batch = 0, hk = 0, dim = 0, keys_pad = 0;
  Fp8Vt() = default;
  Fp8Vt(const Fp8Vt&) = delete;
  Fp8Vt& operator=(const Fp8Vt&) = delete;
  ~Fp8Vt() { release(); }
  cudaError_t alloc(const Args& a, cudaStream_t s) {
    stream = s;
    batch = a.v.shape[0], hk = a.v.shape[2], dim = a.v.shape[3];
    keys_pad = cuda::vt_keys_pad(a.v.shape[1]);
    const cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&vt), size_t(batch * hk * dim * keys_pad), stream);
    if (e != cudaSuccess) {
      cudaGetLastError();  // an allocation failure is not sticky: later checks must not see it
      vt = nullptr;
    }
    return e;
  }
  Status prepare(const Args& a, LaunchArgs* la) const {
    if (cudaError_t e = cuda::launch_transpose_v_e4m3(a.v, vt, stream); e != cudaSuccess)
      return cuda_error("fp8 V transpose", e);
    if (const std::string err = cuda::encode_vt_map(vt, batch, hk, dim, keys_pad, la); !err.empty())
      return Status::Error("CUDA backend: " + err);
    return Status::Ok();
  }
  cudaError_t release() {
    uint8_t* v = vt;
    vt = nullptr;
    return v ? cudaFreeAsync(v, stream) : cudaSuccess;
  }
};

// Paged K/V whose head dims run on the hdim-256 kernel without being 256 / 256: its paged kind
// has no column-addressed maps (kernel_config.cuh kColMaps), its dense kinds do. Decided on
// the whole call, before the v split (v above 256: one gather of K and all of V). fp8 above 128
// runs on the 16-bit kernels after the upcast, which then comes here.
bool needs_page_gather(const Problem& p) {
  if (p.kv != KvLayout::paged || p.fp8) return false;
  const cuda::sm90::HeadDims kd = cuda::sm90::kernel_dims(int(p.dim_qk), int(v_slice(p.dim_v)), false);
  return kd.qk == 256 && (p.dim_qk != 256 || p.dim_v != 256);
}

// The pages each sequence reads, gathered into dense (batch, max_seq_k, heads_kv, dim) copies
// (paged_gather.h) for the dense call with the same seqused_k. prepare() allocates the
// stream-ordered scratch and builds and checks the dense call's arguments, so that a kvcache
// call can fail before its append writes the cache; run() gathers (after the append) and
// computes. The scratch holds max_seq_k keys per sequence: the caller's max_seqlen_k where it
// gives a tighter one, else the page table's capacity (max_pages x page_size). A sequence whose
// seqused_k exceeds the promised max_seqlen_k reads zeros past it (the paged kernel would read
// its pages): the promise is the caller's.
struct PageGather {
  char* scratch = nullptr;
  Args dense;
  Problem problem;

  Status prepare(const Args& a, const Problem& p, cudaStream_t stream) {
    const int64_t es = dtype_size(a.k.dtype), keys = p.max_seq_k, hk = a.k.shape[2];
    int64_t rows = 0, nk = 0, nv = 0;  // 64-bit products checked: a wrap would under-allocate
    if (__builtin_mul_overflow(p.batch, keys, &rows) || __builtin_mul_overflow(rows, hk * es, &rows) ||
        __builtin_mul_overflow(rows, p.dim_qk, &nk) || __builtin_mul_overflow(rows, p.dim_v, &nv) ||
        nk > INT64_MAX - nv)
      return Status::NotSupported("page_table: dense copies of the pages (head dims " + std::to_string(p.dim_qk) +
                                  " / " + std::to_string(p.dim_v) + ") beyond 2^63 bytes");
    if (cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&scratch), size_t(nk + nv), stream); e != cudaSuccess) {
      cudaGetLastError();
      scratch = nullptr;
      return cuda_error("paged K/V copies for head dims the paged kernels do not serve", e);
    }
    dense = a;
    const int64_t ks[4] = {p.batch, keys, hk, p.dim_qk}, vs[4] = {p.batch, keys, hk, p.dim_v};
    dense.k = contiguous(a.k, scratch, a.k.dtype, 4, ks);
    dense.v = contiguous(a.v, scratch + nk, a.v.dtype, 4, vs);  // nk: a multiple of 16 bytes
    dense.page_table = Tensor{};
    dense.max_seqlen_k = keys;
    dense.kvcache = KvCacheArgs{};
    Status s = build_problem(dense, &problem);
    if (s.ok()) s = check_supported(dense, problem);
    return s;
  }
  // `a`: the paged call prepare() was given (its pool and page table, read now).
  Status run(const Args& a, const Overrides& ov) {
    cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
    const int64_t keys = problem.max_seq_k;
    cudaError_t e = cuda::launch_gather_pages(a.k, a.page_table, a.seqused_k, problem.batch, keys, dense.k.data, stream);
    if (e == cudaSuccess)
      e = cuda::launch_gather_pages(a.v, a.page_table, a.seqused_k, problem.batch, keys, dense.v.data, stream);
    if (e != cudaSuccess) return cuda_error("paged gather", e);
    return cuda_forward(dense, problem, ov);
  }
  cudaError_t release(cudaStream_t stream) {
    const cudaError_t e = scratch ? cudaFreeAsync(scratch, stream) : cudaSuccess;
    scratch = nullptr;
    return e;
  }
};

Status paged_gather_forward(const Args& a, const Problem& p, const Overrides& ov) {
  cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  PageGather g;
  Status s = g.prepare(a, p, stream);
  if (s.ok()) s = g.run(a, ov);
  const cudaError_t f = g.release(stream);
  return !s.ok() || f == cudaSuccess ? s : cuda_error("paged gather scratch", f);
}

// v head dim above 256 (FA3's q / k 64 with v 512): the call once per column slice of v and
// out (v_slice; views, no copies), both slices checked before either runs. Each slice computes
// the softmax of the same logits, so each is exact to the reference; the LSE is written by both
// (equal up to the slices' summation orders when their tiles differ).
Status split_v_forward(const Args& a, const Problem& p, const Overrides& ov) {
  const int64_t w0 = v_slice(p.dim_v);
  Args s[2] = {a, a};
  Problem ps[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t c0 = i == 0 ? 0 : w0, w = i == 0 ? w0 : p.dim_v - w0;
    auto slice = [&](Tensor& t) {
      t.data = static_cast<char*>(t.data) + c0 * t.stride[t.rank - 1] * dtype_size(t.dtype);
      t.shape[t.rank - 1] = w;
    };
    slice(s[i].v);
    slice(s[i].out);
    LONGATTN_TRY(build_problem(s[i], &ps[i]));
    LONGATTN_TRY(check_supported(s[i], ps[i]));
  }
  for (int i = 0; i < 2; ++i) LONGATTN_TRY(cuda_forward(s[i], ps[i], ov));
  return Status::Ok();
}

// Split-KV (plan.h kv_splits > 1): the kernel writes f32 partials of each key range into one
// stream-ordered scratch buffer (the split is the kernel's batch index), then the combine
// kernel merges them into out / lse. `part` = scratch: splits x rows x dim_v outputs, then
// splits x rows LSEs, rows = seq_q x heads_q.
struct SplitScratch {
  float* part = nullptr;
  int64_t splits = 1, rows = 0;

  cudaError_t alloc(const Problem& p, int64_t s, cudaStream_t stream) {
    splits = s;
    rows = p.max_seq_q * p.heads_q;
    const size_t bytes = size_t(splits * rows * (p.dim_v + 1)) * sizeof(float);
    const cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&part), bytes, stream);
    if (e != cudaSuccess) {
      cudaGetLastError();  // not sticky: later checks must not see it
      part = nullptr;
    }
    return e;
  }
  // Point the kernel's outputs at the partials (batch 1: the batch index is the split).
  void redirect(const Problem& p, cuda::sm90::FwdParams* fp) const {
    fp->batch = splits;
    fp->num_tiles *= splits;
    fp->kv_splits = int32_t(splits);
    fp->split_blocks = 0;
    fp->out = part;
    fp->out_type = cuda::sm90::OutType::f32;
    fp->o_vec = 0;  // f32 partials: the pair stores
    fp->out_stride_b = rows * p.dim_v;
    fp->out_stride_s = p.heads_q * p.dim_v;
    fp->out_stride_h = p.dim_v;
    fp->lse = part + splits * rows * p.dim_v;
    fp->lse_stride_b = rows;
    fp->lse_stride_h = p.max_seq_q;
    fp->lse_stride_s = 1;
  }
  cudaError_t combine(const Args& a, const Problem& p, cudaStream_t stream) const {
    auto dev = [&](void* data, int rank, const int64_t* shape, const int64_t* stride) {
      Tensor x;
      x.data = data;
      x.dtype = DType::f32;
      x.device = a.out.device;
      x.rank = rank;
      for (int i = 0; i < rank; ++i) {
        x.shape[i] = shape[i];
        x.stride[i] = stride[i];
      }
      return x;
    };
    const int64_t dv = p.dim_v, hq = p.heads_q, sq = p.max_seq_q;
    const int64_t op_shape[4] = {splits, sq, hq, dv}, op_stride[4] = {rows * dv, hq * dv, dv, 1};
    const int64_t lp_shape[3] = {splits, hq, sq}, lp_stride[3] = {rows, sq, 1};
    CombineArgs ca;
    ca.out_partial = dev(part, 4, op_shape, op_stride);
    ca.lse_partial = dev(part + splits * rows * dv, 3, lp_shape, lp_stride);
    ca.out = dev(a.out.data, 3, a.out.shape + 1, a.out.stride + 1);  // batch 1: drop the batch dim
    ca.out.dtype = a.out.dtype;
    if (a.lse.present()) ca.lse = dev(a.lse.data, 2, a.lse.shape + 1, a.lse.stride + 1);
    return cuda::launch_combine(ca, stream);
  }
};

// Args::kvcache: the pre-kernels (append_rotary.cu) write the new keys into the cache and the
// rotated q into scratch; then the attention-only arguments they describe (kvcache_prepass.h)
// run through cuda_forward. Everything is refused or checked before the cache is written.
Status kvcache_forward(const Args& a, const Problem& p, const Overrides& ov) {
  cuda::DeviceGuard guard(p.device.ordinal);
  if (!guard.ok()) return Status::Error("CUDA backend: cannot select device " + std::to_string(p.device.ordinal));
  cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  cuda::KvcachePrepass kv;
  LONGATTN_TRY(cuda::kvcache_prepare(a, p, stream, &kv));
  Status s = check_supported(kv.attn, kv.problem);
  // Head dims that need dense copies of the pages: their scratch and arguments before the
  // append writes the cache (an allocation failure must not leave a written cache behind).
  PageGather gather;
  const bool gathered = s.ok() && needs_page_gather(kv.problem) && kv.problem.batch > 0 && kv.problem.max_seq_q > 0 &&
                        kv.problem.heads_q > 0 && kv.problem.max_seq_k > 0;
  if (gathered) s = gather.prepare(kv.attn, kv.problem, stream);
  if (s.ok()) s = cuda::kvcache_run(kv, cuda::usable_sms(guard.num_sms(), a.sm_margin), a.kvcache.check, stream);
  // The pages only the attention reads: checked on request, as cuda_forward does.
  if (s.ok() && gathered && kv.attn.check_page_table) s = check_pages(kv.attn, kv.problem, stream);
  if (s.ok()) s = gathered ? gather.run(kv.attn, ov) : cuda_forward(kv.attn, kv.problem, ov);
  const cudaError_t f = gather.release(stream);
  const cudaError_t e = kv.release(stream);
  if (!s.ok()) return s;
  if (f != cudaSuccess) return cuda_error("paged gather scratch", f);
  return e == cudaSuccess ? s : cuda_error("kvcache scratch", e);
}

}  // namespace

Status cuda_forward(const Args& a, const Problem& p, const Overrides& ov) {
  if (p.kvc.any) return kvcache_forward(a, p, ov);
  LONGATTN_TRY(check_supported(a, p));
  if (ov.chunk_batch != Force::off) {
    if (const int64_t rows = cuda::chunk_batch_rows(a, p); rows > 0) return chunk_batch_forward(a, rows, ov);
  }
  const bool gather = needs_page_gather(p);  // before the v split: one gather for the whole call
  if (p.dim_v > 256 && !gather) return split_v_forward(a, p, ov);
  cuda::DeviceGuard guard(p.device.ordinal);
  if (!guard.ok()) return Status::Error("CUDA backend: cannot select device " + std::to_string(p.device.ordinal));
  if (fp8_upcast_needed(p, ov)) return fp8_upcast_forward(a, p, ov);
  cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  if (p.batch == 0 || p.max_seq_q == 0 || p.heads_q == 0) return Status::Ok();
  if (p.max_seq_k == 0) {  // no keys: out 0, lse -inf (or the sink), on the rows seqused_q uses
    cudaError_t e = cuda::launch_fill_empty(a.out, a.lse, a.sinks, a.cu_seqlens_q, a.seqused_q, stream);
    return e == cudaSuccess ? Status::Ok() : cuda_error("fill", e);
  }
  if (gather) {
    if (a.check_page_table && !p.meta_on_host) LONGATTN_TRY(check_pages(a, p, stream));
    return paged_gather_forward(a, p, ov);
  }

  const int l2 = cuda::device_attribute(cudaDevAttrL2CacheSize, p.device.ordinal, 50 << 20);
  const int sms = cuda::usable_sms(guard.num_sms(), a.sm_margin);
  cuda::ForwardPlan plan;
  LONGATTN_TRY(cuda::plan_forward(a, p, ov, sms, l2, &plan));
  // fp8 dense_vt's V-sized scratch first: where it cannot be allocated at head dim 128, the
  // dense kind (the in-kernel transposer, no scratch) serves the call, unless the caller forced
  // dense_vt; above 128 dense_vt is the only fp8 kind.
  Fp8Vt vt;
  if (p.fp8 && cuda::sm90::fp8_vt_global(plan.kernel)) {
    if (const cudaError_t e = vt.alloc(a, stream); e != cudaSuccess) {
      if (p.dim_qk > 128 || ov.fp8_vt_global == Force::on) return cuda_error("fp8 Vt scratch", e);
      Overrides dense_ov = ov;
      dense_ov.fp8_vt_global = Force::off;
      LONGATTN_TRY(cuda::plan_forward(a, p, dense_ov, sms, l2, &plan));
    }
  }
  if (p.kv == KvLayout::paged && a.check_page_table && !p.meta_on_host) LONGATTN_TRY(check_pages(a, p, stream));

  LaunchArgs la{};
  if (const std::string err = cuda::encode_maps(a, p, plan, &la); !err.empty())
    return Status::Error("CUDA backend: " + err);
  cuda::fill_params(a, p, plan, &la.p);
  la.kernel = plan.kernel;
  la.num_sms = sms;
  la.stream = stream;
  la.tile_list = plan.tile_list;
  la.list_items = plan.list_items;
  la.dynamic = plan.dynamic;
  la.section_list = plan.section_list;
  la.section_rotate = plan.section_rotate;

  SplitScratch split;
  if (plan.kv_splits > 1) {
    if (cudaError_t e = split.alloc(p, plan.kv_splits, stream); e != cudaSuccess) return cuda_error("split-KV scratch", e);
    split.redirect(p, &la.p);
    const int64_t key_blocks = (p.max_seq_k + plan.tile.block_n - 1) / plan.tile.block_n;
    la.p.split_blocks = int32_t((key_blocks + plan.kv_splits - 1) / plan.kv_splits);
  }
  if (!split.part) la.p.o_tma = cuda::encode_out_map(a, p, plan, &la) ? 1 : 0;
  Status vs = vt.vt ? vt.prepare(a, &la) : Status::Ok();
  cudaError_t e = vs.ok() ? launch(p, plan, la) : cudaSuccess;
  if (split.part) {
    if (vs.ok() && e == cudaSuccess) e = split.combine(a, p, stream);
    const cudaError_t f = cudaFreeAsync(split.part, stream);
    if (e == cudaSuccess) e = f;
  }
  const cudaError_t f = vt.release();
  if (!vs.ok()) return vs;
  if (e == cudaSuccess && f != cudaSuccess) return cuda_error("fp8 Vt scratch", f);
  return e == cudaSuccess ? Status::Ok() : cuda_error("forward kernel launch", e);
}

Status cuda_combine(const CombineArgs& a) {
  const Tensor* ts[] = {&a.out_partial, &a.lse_partial, &a.out, &a.lse};
  for (const Tensor* t : ts)
    if (t->present() && t->device.kind != DeviceKind::cuda)
      return Status::Invalid("combine: all tensors must be CUDA tensors for the CUDA backend");
  cuda::DeviceGuard guard(a.out.device.ordinal);
  if (!guard.ok()) return Status::Error("CUDA backend: cannot select device");
  if (a.out.numel() == 0) return Status::Ok();
  cudaError_t e = cuda::launch_combine(a, static_cast<cudaStream_t>(a.stream));
  return e == cudaSuccess ? Status::Ok() : cuda_error("combine", e);
}

}  // namespace longattn::detail

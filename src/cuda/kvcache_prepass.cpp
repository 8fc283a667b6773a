// Host side of the CUDA kvcache serving path (kvcache_prepass.h).
#include "cuda/kvcache_prepass.h"

#include <string>

#include "api/check.h"

namespace longattn::cuda {
namespace {

using detail::KvLayout;
using std::to_string;

Status not_yet(const std::string& what) { return Status::NotSupported(what + " not supported by the CUDA backend yet"); }

// Carves 256-byte aligned pieces out of one allocation (sizes first, then pointers).
struct Carve {
  size_t total = 0;
  size_t take(size_t bytes) {
    const size_t at = total;
    total += (bytes + 255) / 256 * 256;
    return at;
  }
};

Tensor device_tensor(void* data, DType t, std::initializer_list<int64_t> shape, const Device& d) {
  return make_tensor(data, t, shape, d);
}

// A dense cache (rows, slots, heads_kv, dim) as ragged token rows (rows * slots, heads_kv, dim).
bool flattenable(const Tensor& t) { return t.shape[0] <= 1 || t.stride[0] == t.shape[1] * t.stride[1]; }
Tensor as_rows(const Tensor& t) {
  Tensor r = t;
  r.rank = 3;
  r.shape[0] = t.shape[0] * t.shape[1], r.shape[1] = t.shape[2], r.shape[2] = t.shape[3];
  r.stride[0] = t.stride[1], r.stride[1] = t.stride[2], r.stride[2] = t.stride[3];
  r.shape[3] = r.stride[3] = 0;
  return r;
}

std::string message(uint32_t code, int64_t b, const KvSeq& s, const KvMetaParams& m, bool paged) {
  const std::string at = "[" + to_string(b) + "]";
  switch (code) {
    case kBadRow:
      return "cache_batch_idx: entry " + at + " = " + to_string(s.row) + " outside [0, " + to_string(m.cache_rows) +
             ") (" + (paged ? "page_table's rows" : "k's batch") + ")";
    case kBadEnd:
      return "seqused_k: entry " + at + " = " + to_string(s.end) + " outside [0, " + to_string(m.capacity) +
             "] (the cache's slots)";
    case kBadLeftpad:
      return "cache_leftpad: entry " + at + " = " + to_string(s.lp) + " outside [0, " + to_string(s.end) +
             "] (0 .. that sequence's seqused_k)";
    case kBadNew:
      return "cu_seqlens_k_new: entries " + at + ", [" + to_string(b + 1) +
             "] are not non-decreasing within [0, " + to_string(m.seqlen_new) + "] (k_new's rows)";
    case kOverflow:
      return "k_new: sequence " + to_string(b) + " appends " + to_string(s.new_len) + " keys at slot " +
             to_string(s.end) + " (seqused_k), past the cache's " + to_string(m.capacity) + " slots";
    case kBadPage:
      return "page_table: an entry of the pages sequence " + to_string(b) + " appends to (row " + to_string(s.row) +
             ", slots " + to_string(s.end) + ".." + to_string(s.end + s.new_len - 1) + ") is outside [0, " +
             to_string(m.num_pages) + ") pages of k";
    case kBadRotary0: return "rotary_seqlens: entry " + at + " = " + to_string(s.rot0) + " is negative";
    default:
      return "rotary_cos: sequence " + to_string(b) + " uses rotary positions from " + to_string(s.rot0) +
             " past the tables' " + to_string(m.seqlen_ro) + " rows";
  }
}

}  // namespace

cudaError_t KvcachePrepass::release(cudaStream_t stream) {
  if (!scratch) return cudaSuccess;
  const cudaError_t e = cudaFreeAsync(scratch, stream);
  scratch = nullptr;
  return e;
}

Status kvcache_prepare(const Args& a, const detail::Problem& p, cudaStream_t stream, KvcachePrepass* kv) {
  const detail::KvCacheInfo& c = p.kvc;
  const KvCacheArgs& kc = a.kvcache;
  const bool paged = p.kv == KvLayout::paged;
  if (paged && c.leftpad) return not_yet("cache_leftpad: left padding of a paged cache");
  const bool view = !paged && (c.batch_idx || c.leftpad);
  if (view && (!flattenable(a.k) || !flattenable(a.v)))
    return Status::NotSupported(
        "k: cache_batch_idx / cache_leftpad need a dense cache whose batch stride is seqlen_cache x its row stride on "
        "the CUDA backend (it reads the cache as rows)");
  if (p.batch > INT32_MAX || (view && a.k.shape[0] * a.k.shape[1] > INT32_MAX - 4096))
    return not_yet("k: 2^31 or more cache slots with cache_batch_idx / cache_leftpad");
  // The append kernel's item and index arithmetic is 32-bit (append_rotary.cu NOTES).
  const int64_t new_tokens = !c.append ? 0 : c.new_ragged ? c.seqlen_new : p.batch * c.seqlen_new;
  const int64_t q_tokens = p.q_ragged ? a.q.shape[0] : p.batch * a.q.shape[1];
  if (new_tokens * p.heads_kv + (c.rotary ? q_tokens * p.heads_q : 0) > INT32_MAX ||
      (paged && c.batch_idx && p.batch * p.max_pages > INT32_MAX) || c.capacity > INT32_MAX - 4096)
    return not_yet("k_new / q: 2^31 or more rows x heads, cache slots or page-table entries");
  const int64_t es = dtype_size(p.in_dtype);

  // Scratch: the check result, per-sequence metadata, the attention's lengths (and starts),
  // the gathered page table, the rotated q.
  Carve cv;
  const size_t o_err = cv.take(sizeof(unsigned long long));
  const size_t o_seqs = cv.take(sizeof(KvSeq) * size_t(p.batch));
  const size_t o_len = cv.take(sizeof(int32_t) * size_t(p.batch));
  const size_t o_start = view ? cv.take(sizeof(int32_t) * size_t(p.batch + 1)) : 0;
  const bool gather = paged && c.batch_idx;
  const size_t o_pt = gather ? cv.take(sizeof(int32_t) * size_t(p.batch * p.max_pages)) : 0;
  const size_t o_q = c.rotary ? cv.take(size_t(a.q.numel() * es)) : 0;
  if (cudaError_t e = cudaMallocAsync(&kv->scratch, cv.total, stream); e != cudaSuccess) {
    kv->scratch = nullptr;
    return Status::Error(std::string("CUDA backend: kvcache scratch: ") + cudaGetErrorString(e));
  }
  auto at = [&](size_t off) { return static_cast<void*>(static_cast<uint8_t*>(kv->scratch) + off); };
  const Device dev = p.device;

  // The attention-only arguments.
  Args& x = kv->attn;
  x = a;
  x.kvcache = KvCacheArgs{};
  x.max_seqlen_k = 0;
  if (c.rotary) {  // packed copy of q's shape
    x.q = a.q;
    x.q.data = at(o_q);
    int64_t st = 1;
    for (int i = x.q.rank - 1; i >= 0; --i) x.q.stride[i] = st, st *= x.q.shape[i];
  }
  x.seqused_k = device_tensor(at(o_len), DType::i32, {p.batch}, dev);
  if (view) {
    x.k = as_rows(a.k);
    x.v = as_rows(a.v);
    x.cu_seqlens_k = device_tensor(at(o_start), DType::i32, {p.batch + 1}, dev);
    x.max_seqlen_k = c.capacity;
  }
  if (gather) x.page_table = device_tensor(at(o_pt), DType::i32, {p.batch, p.max_pages}, dev);
  if (Status s = detail::build_problem(x, &kv->problem); !s.ok()) {
    kv->release(stream);
    return s;
  }

  KvMetaParams& m = kv->meta;
  m.batch = int32_t(p.batch);
  m.seqused_k = static_cast<const int32_t*>(a.seqused_k.data);
  m.batch_idx = static_cast<const int32_t*>(kc.cache_batch_idx.data);
  m.leftpad = static_cast<const int32_t*>(kc.cache_leftpad.data);
  m.cu_new = c.append ? static_cast<const int32_t*>(kc.cu_seqlens_k_new.data) : nullptr;
  m.rotary_seqlens = c.rotary ? static_cast<const int32_t*>(kc.rotary_seqlens.data) : nullptr;
  m.cu_q = static_cast<const int32_t*>(a.cu_seqlens_q.data);
  m.seqlen_new = c.append ? c.seqlen_new : 0;
  m.seq_q = p.q_ragged ? 0 : a.q.shape[1];
  m.capacity = c.capacity;
  m.cache_rows = c.cache_rows;
  if (paged && c.append) {
    m.page_table = static_cast<const int32_t*>(a.page_table.data);
    m.pt_sb = a.page_table.stride[0], m.pt_sp = a.page_table.stride[1];
    m.page_size = p.page_size, m.num_pages = p.num_pages;
  }
  m.rotary = c.rotary, m.per_row = c.rotary_per_row, m.seqlen_ro = c.seqlen_ro;
  m.err = static_cast<unsigned long long*>(at(o_err));
  m.seqs = static_cast<KvSeq*>(at(o_seqs));
  m.k_len = static_cast<int32_t*>(at(o_len));
  m.k_start = view ? static_cast<int32_t*>(at(o_start)) : nullptr;

  AppendParams& ap = kv->append;
  ap.err = m.err;
  ap.seqs = m.seqs;
  ap.batch = int32_t(p.batch);
  ap.heads_q = int32_t(p.heads_q), ap.heads_kv = int32_t(p.heads_kv);
  ap.dim_qk = int32_t(p.dim_qk), ap.dim_v = int32_t(p.dim_v);
  if (c.append) {
    const Tensor &kn = kc.k_new, &vn = kc.v_new;
    ap.k_new = kn.data, ap.v_new = vn.data;
    if (c.new_ragged) {
      ap.kn_st = kn.stride[0], ap.kn_sh = kn.stride[1], ap.vn_st = vn.stride[0], ap.vn_sh = vn.stride[1];
      ap.cu_new = m.cu_new;
      ap.new_tokens = c.seqlen_new;
    } else {
      ap.kn_sb = kn.stride[0], ap.kn_st = kn.stride[1], ap.kn_sh = kn.stride[2];
      ap.vn_sb = vn.stride[0], ap.vn_st = vn.stride[1], ap.vn_sh = vn.stride[2];
      ap.seqlen_new = c.seqlen_new;
      ap.new_tokens = p.batch * c.seqlen_new;
    }
    ap.k_cache = a.k.data, ap.v_cache = a.v.data;
    ap.kc_sb = a.k.stride[0], ap.kc_st = a.k.stride[1], ap.kc_sh = a.k.stride[2];
    ap.vc_sb = a.v.stride[0], ap.vc_st = a.v.stride[1], ap.vc_sh = a.v.stride[2];
  }
  if (paged) {
    ap.page_table = static_cast<const int32_t*>(a.page_table.data);
    ap.pt_sb = a.page_table.stride[0], ap.pt_sp = a.page_table.stride[1], ap.page_size = p.page_size;
  }
  if (c.rotary) {
    ap.cos = kc.rotary_cos.data, ap.sin = kc.rotary_sin.data;
    ap.cos_st = kc.rotary_cos.stride[0], ap.sin_st = kc.rotary_sin.stride[0];
    ap.rotary_dim = int32_t(c.rotary_dim);
    ap.interleaved = kc.rotary_interleaved, ap.per_row = c.rotary_per_row, ap.table_f32 = c.rotary_f32;
    ap.q = a.q.data, ap.q_rot = x.q.data;
    const int r = a.q.rank;  // dense (b, s, h, d) or ragged (t, h, d)
    ap.q_sb = r == 4 ? a.q.stride[0] : 0, ap.q_st = a.q.stride[r - 3], ap.q_sh = a.q.stride[r - 2];
    ap.qr_sb = r == 4 ? x.q.stride[0] : 0, ap.qr_st = x.q.stride[r - 3], ap.qr_sh = x.q.stride[r - 2];
    ap.cu_q = m.cu_q;
    ap.seq_q = m.seq_q;
    ap.q_tokens = p.q_ragged ? a.q.shape[0] : p.batch * a.q.shape[1];
  }
  if (gather) {
    ap.batch_idx = m.batch_idx;
    ap.pt_out = static_cast<int32_t*>(x.page_table.data);
    ap.max_pages = p.max_pages;
  }
  kv->elem = p.in_dtype == DType::bf16 ? ElemType::bf16 : p.in_dtype == DType::f16 ? ElemType::f16 : ElemType::byte;
  return Status::Ok();
}

Status kvcache_run(KvcachePrepass& kv, int num_sms, bool report, cudaStream_t stream) {
  auto fail = [](const char* what, cudaError_t e) {
    return Status::Error(std::string("CUDA backend: ") + what + ": " + cudaGetErrorString(e));
  };
  if (cudaError_t e = launch_kv_meta(kv.meta, stream); e != cudaSuccess) return fail("kvcache check", e);
  if (report) {  // wait for the check and name its first failure; nothing was written yet
    unsigned long long h = kNoError;
    cudaError_t e = cudaMemcpyAsync(&h, kv.meta.err, sizeof(h), cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) return fail("kvcache check", e);
    if (h != kNoError) {
      const int64_t b = int64_t(h >> 8);
      KvSeq s{};
      if ((e = cudaMemcpy(&s, kv.meta.seqs + b, sizeof(s), cudaMemcpyDeviceToHost)) != cudaSuccess)
        return fail("kvcache check", e);
      return Status::Invalid(message(uint32_t(h & 0xff), b, s, kv.meta, kv.append.page_table != nullptr));
    }
  }
  if (cudaError_t e = launch_append_rotary(kv.append, kv.elem, num_sms, stream); e != cudaSuccess)
    return fail("kvcache append / rotary", e);
  return Status::Ok();
}

}  // namespace longattn::cuda

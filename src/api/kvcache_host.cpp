// Args::kvcache on host tensors, for the host backends (reference, CPU): the append of the
// new keys / values into the caller's cache and the rotary embedding (steps 1-3 of
// longattn.h KvCacheArgs), after which the call is plain attention over the cache (step 4).
// The rotation is evaluated in float64 from the exact inputs and rounded once to the
// destination dtype; the CUDA pre-kernel (src/cuda/append_rotary.cu) evaluates it in float32,
// so the two may differ by one unit in the last place of a rotated element.
#include <algorithm>
#include <cstring>

#include "common/problem.h"

namespace longattn::detail {
namespace {

struct Rotary {
  const KvCacheArgs* kc = nullptr;
  int64_t dim = 0;  // rotary_dim
  bool interleaved = true;

  double table(const Tensor& t, int64_t pos, int64_t i) const {
    return load_as_double(t.data, t.dtype, pos * t.stride[0] + i * t.stride[1]);
  }
  // Element e (< dim) of the row `src` (dtype st, offset so) rotated at `pos`.
  double element(const void* src, DType st, int64_t so, int64_t pos, int64_t e) const {
    const int64_t half = dim / 2;
    const int64_t i = interleaved ? e / 2 : e % half;            // table column
    const int64_t ex = interleaved ? 2 * i : i, ey = interleaved ? 2 * i + 1 : i + half;
    const double x = load_as_double(src, st, so + ex), y = load_as_double(src, st, so + ey);
    const double c = table(kc->rotary_cos, pos, i), s = table(kc->rotary_sin, pos, i);
    return e == ex ? x * c - y * s : x * s + y * c;
  }
};

// One row of `dim` elements from (src, so) to (dst, dox) of the same dtype: rotated at `pos`
// when `rot` is given (the first rot->dim elements), the rest copied bit for bit.
void copy_row(const void* src, int64_t so, void* dst, int64_t dox, DType t, int64_t dim, const Rotary* rot,
              int64_t pos) {
  const int64_t es = dtype_size(t);
  const int64_t r = rot ? rot->dim : 0;
  for (int64_t e = 0; e < r; ++e) store_from_float(dst, t, dox + e, float(rot->element(src, t, so, pos, e)));
  std::memcpy(static_cast<uint8_t*>(dst) + (dox + r) * es, static_cast<const uint8_t*>(src) + (so + r) * es,
              size_t((dim - r) * es));
}

// Element offset of cache slot `slot`, kv head hk, of the sequence whose cache row is s.kv_row.
int64_t cache_offset(const Tensor& t, const Args& a, const Problem& p, const SeqInfo& s, int64_t slot, int64_t hk) {
  if (p.kv == KvLayout::paged) {
    const Tensor& pt = a.page_table;
    const int64_t page =
        static_cast<const int32_t*>(pt.data)[s.kv_row * pt.stride[0] + (slot / p.page_size) * pt.stride[1]];
    return page * t.stride[0] + (slot % p.page_size) * t.stride[1] + hk * t.stride[2];
  }
  return s.kv_row * t.stride[0] + slot * t.stride[1] + hk * t.stride[2];
}

int64_t new_offset(const Tensor& t, const Problem& p, int64_t b, const SeqInfo& s, int64_t i, int64_t hk) {
  if (p.kvc.new_ragged) return (s.new_start + i) * t.stride[0] + hk * t.stride[1];
  return b * t.stride[0] + i * t.stride[1] + hk * t.stride[2];
}

Rotary rotary_of(const Args& a, const Problem& p) {
  Rotary r;
  r.kc = &a.kvcache;
  r.dim = p.kvc.rotary_dim;
  r.interleaved = a.kvcache.rotary_interleaved;
  return r;
}

}  // namespace

void host_rotate_q(const Args& a, const Problem& p, std::vector<uint8_t>* q_rot, Tensor* view) {
  Tensor v = a.q;  // same shape, packed strides
  int64_t st = 1;
  for (int i = v.rank - 1; i >= 0; --i) {
    v.stride[i] = st;
    st *= v.shape[i];
  }
  q_rot->assign(size_t(std::max<int64_t>(st, 1) * dtype_size(v.dtype)), 0);
  v.data = q_rot->data();
  const Rotary rot = rotary_of(a, p);
  // Rows are addressed through a copy of `a` whose q is the packed buffer (same SeqInfo).
  Args packed = a;
  packed.q = v;
  for (int64_t b = 0; b < p.batch; ++b) {
    const SeqInfo s = seq_info(a, p, b);
    const int64_t rows = p.q_ragged ? (static_cast<const int32_t*>(a.cu_seqlens_q.data)[(b + 1) * a.cu_seqlens_q.stride[0]] -
                                       s.q_start)
                                    : a.q.shape[1];
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t h = 0; h < p.heads_q; ++h) {
        // Rows past seqused_q are never read; they are copied unrotated.
        const bool used = i < s.q_len && p.kvc.rotary;
        const int64_t pos = s.rot0 + (p.kvc.rotary_per_row ? i : 0);
        copy_row(a.q.data, q_offset(a, p, b, s, i, h), v.data, q_offset(packed, p, b, s, i, h), p.in_dtype, p.dim_qk,
                 used ? &rot : nullptr, pos);
      }
  }
  *view = v;
}

Status host_kvcache_apply(const Args& a, const Problem& p, HostKvcache* out) {
  const KvCacheInfo& c = p.kvc;
  const KvCacheArgs& kc = a.kvcache;
  const Rotary rot = rotary_of(a, p);
  out->ends.assign(size_t(std::max<int64_t>(p.batch, 1)), 0);
  for (int64_t b = 0; b < p.batch; ++b) {
    const SeqInfo s = seq_info(a, p, b);
    for (int64_t i = 0; i < s.new_len; ++i)
      for (int64_t hk = 0; hk < p.heads_kv; ++hk) {
        const int64_t slot = s.cache_end + i;
        copy_row(kc.k_new.data, new_offset(kc.k_new, p, b, s, i, hk), a.k.data, cache_offset(a.k, a, p, s, slot, hk),
                 p.in_dtype, p.dim_qk, c.rotary ? &rot : nullptr, s.rot0 + i);
        copy_row(kc.v_new.data, new_offset(kc.v_new, p, b, s, i, hk), a.v.data, cache_offset(a.v, a, p, s, slot, hk),
                 p.in_dtype, p.dim_v, nullptr, 0);
      }
    out->ends[size_t(b)] = int32_t(s.cache_end + s.new_len);
  }
  Args& attn = out->attn;
  attn = a;
  if (c.rotary) host_rotate_q(a, p, &out->q_rot, &attn.q);
  attn.seqused_k = make_tensor(out->ends.data(), DType::i32, {p.batch});
  attn.kvcache.k_new = attn.kvcache.v_new = attn.kvcache.cu_seqlens_k_new = Tensor{};
  attn.kvcache.rotary_cos = attn.kvcache.rotary_sin = attn.kvcache.rotary_seqlens = Tensor{};
  return build_problem(attn, &out->problem);
}

}  // namespace longattn::detail

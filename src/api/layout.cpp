// Host-side address arithmetic for every layout (dense, ragged, paged). All 64-bit.
// Only valid when the metadata tensors are host-resident (Problem::meta_on_host).
#include "common/problem.h"
#include "common/zigzag.h"

namespace longattn::detail {
namespace {

int64_t read_i32(const Tensor& t, int64_t i) {
  return static_cast<const int32_t*>(t.data)[i * t.stride[0]];
}

}  // namespace

SeqInfo seq_info(const Args& a, const Problem& p, int64_t b) {
  SeqInfo s;
  if (p.q_ragged) {
    s.q_start = read_i32(a.cu_seqlens_q, b);
    s.q_len = read_i32(a.cu_seqlens_q, b + 1) - s.q_start;
  } else {
    s.q_len = a.q.shape[1];
  }
  s.kv_row = b;
  switch (p.kv) {
    case KvLayout::dense: s.k_len = p.cp_chunk > 0 ? p.max_seq_k : a.k.shape[1]; break;
    case KvLayout::ragged:
      s.k_start = read_i32(a.cu_seqlens_k, b);
      s.k_len = read_i32(a.cu_seqlens_k, b + 1) - s.k_start;
      break;
    case KvLayout::paged: s.k_len = p.max_pages * p.page_size; break;
  }
  if (p.has_seqused_q) s.q_len = read_i32(a.seqused_q, b);
  if (p.has_seqused_k) s.k_len = read_i32(a.seqused_k, b);
  const KvCacheInfo& c = p.kvc;
  if (c.any) {  // dense / paged cache (validation): keys are slots [leftpad, end + new)
    const KvCacheArgs& kc = a.kvcache;
    s.cache_end = s.k_len;
    if (c.batch_idx) s.kv_row = read_i32(kc.cache_batch_idx, b);
    if (c.leftpad) s.k_start = read_i32(kc.cache_leftpad, b);
    if (c.append) {
      if (c.new_ragged) {
        s.new_start = read_i32(kc.cu_seqlens_k_new, b);
        s.new_len = read_i32(kc.cu_seqlens_k_new, b + 1) - s.new_start;
      } else {
        s.new_len = c.seqlen_new;
      }
    }
    s.rot0 = c.rotary && kc.rotary_seqlens.present() ? read_i32(kc.rotary_seqlens, b) : s.cache_end;
    s.k_len = s.cache_end - s.k_start + s.new_len;
  }
  return s;
}

int64_t q_offset(const Args& a, const Problem& p, int64_t b, const SeqInfo& s, int64_t i,
                 int64_t h) {
  const int64_t* st = a.q.stride;
  if (p.q_ragged) return (s.q_start + i) * st[0] + h * st[1];
  return b * st[0] + i * st[1] + h * st[2];
}

int64_t out_offset(const Args& a, const Problem& p, int64_t b, const SeqInfo& s, int64_t i,
                   int64_t h) {
  const int64_t* st = a.out.stride;
  if (p.q_ragged) return (s.q_start + i) * st[0] + h * st[1];
  return b * st[0] + i * st[1] + h * st[2];
}

static int64_t kv_offset(const Tensor& t, const Args& a, const Problem& p, int64_t /*b*/,
                         const SeqInfo& s, int64_t j, int64_t hk) {
  const int64_t* st = t.stride;
  switch (p.kv) {
    case KvLayout::dense:
      if (p.cp_chunk > 0) {  // the gathered zigzag shards (zigzag.h)
        int64_t rank, row;
        zigzag_key(j, p.cp_chunk, p.cp_world, &rank, &row);
        return rank * st[0] + row * st[1] + hk * st[2];
      }
      return s.kv_row * st[0] + (s.k_start + j) * st[1] + hk * st[2];
    case KvLayout::ragged: return (s.k_start + j) * st[0] + hk * st[1];
    case KvLayout::paged: {  // cache slot t = k_start + j of page-table row kv_row
      const Tensor& pt = a.page_table;
      const int64_t t = s.k_start + j;
      int64_t page = static_cast<const int32_t*>(
          pt.data)[s.kv_row * pt.stride[0] + (t / p.page_size) * pt.stride[1]];
      return page * st[0] + (t % p.page_size) * st[1] + hk * st[2];
    }
  }
  return 0;
}

int64_t k_offset(const Args& a, const Problem& p, int64_t b, const SeqInfo& s, int64_t j,
                 int64_t hk) {
  return kv_offset(a.k, a, p, b, s, j, hk);
}

int64_t v_offset(const Args& a, const Problem& p, int64_t b, const SeqInfo& s, int64_t j,
                 int64_t hk) {
  return kv_offset(a.v, a, p, b, s, j, hk);
}

int64_t query_position(const Problem& p, const SeqInfo& s, int64_t i) {
  if (p.cp_chunk > 0) {
    const int64_t c = p.cp_chunk;
    return i < c ? p.cp_rank * c + i : (2 * p.cp_world - 2 - p.cp_rank) * c + i;
  }
  return i + p.mask.offset(s.q_len, s.k_len);
}

int64_t lse_offset(const Args& a, const Problem& p, int64_t b, const SeqInfo& s, int64_t i,
                   int64_t h) {
  const int64_t* st = a.lse.stride;
  if (p.q_ragged) return h * st[0] + (s.q_start + i) * st[1];
  return b * st[0] + h * st[1] + i * st[2];
}

float descale(const Tensor& t, int64_t b, int64_t hk) {
  if (!t.present()) return 1.0f;
  return static_cast<const float*>(t.data)[b * t.stride[0] + hk * t.stride[1]];
}

}  // namespace longattn::detail

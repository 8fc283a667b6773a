// Test problems for the kvcache serving path (longattn.h KvCacheArgs) and the check of one
// call's result: the cache after the call against the definition (every slot untouched but
// the appended ones), and out / lse against the float64 reference of the attention over the
// updated cache with the rotated q.
//
//   KvCaseSpec s;  s.page_size = 16;  s.rotary_dim = 32;  s.mask.causal = true;
//   KvCase c = make_kv_case(s);
//   const KvSnapshot before = snapshot(c);
//   c.args.backend = Backend::cpu;
//   ASSERT_TRUE(forward(c.args).ok());
//   EXPECT_EQ(check_kv_call(c.args, before), "");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/testing.h"

namespace longattn::testing {

struct KvCaseSpec {
  int64_t batch = 3, seq_q = 5;       ///< q rows per sequence (ragged_q: the longest)
  int64_t heads_q = 4, heads_kv = 2;
  int64_t dim_qk = 64, dim_v = 64;
  int64_t capacity = 40;              ///< cache slots per row (paged: rounded up to pages)
  int64_t page_size = 0;              ///< > 0: paged cache over a shuffled page pool
  int64_t seqlen_new = 4;             ///< new keys per sequence (ragged_new: the longest); 0 with append: none
  bool append = true;                 ///< k_new / v_new
  bool ragged_new = false;            ///< k_new / v_new packed with cu_seqlens_k_new
  bool ragged_q = false;              ///< q packed with cu_seqlens_q
  bool batch_idx = false;             ///< cache_batch_idx into batch + 2 cache rows
  bool leftpad = false;               ///< random cache_leftpad
  int64_t rotary_dim = 0;             ///< > 0: rotary_cos / rotary_sin with this rotary_dim
  bool interleaved = true;            ///< rotary_interleaved
  bool rotary_f32 = false;            ///< float32 tables (else q's dtype)
  bool rotary_seqlens = false;        ///< random rotary_seqlens
  DType dtype = DType::bf16;
  Mask mask{};
  float softcap = 0.0f;
  bool sinks = false;
  bool lse = true;
  uint64_t seed = 1;
};

std::string describe(const KvCaseSpec& s);
inline void PrintTo(const KvCaseSpec& s, std::ostream* os) { *os << describe(s); }

/// Owned host tensors of one kvcache call and the Args viewing them (backend: reference).
/// Cache slots no sequence reads (outside [cache_leftpad, cache_seqlens)) hold NaN, so a
/// stray read or a missing append shows in the output.
struct KvCase {
  KvCase() = default;
  KvCase(KvCase&&) = default;
  KvCase& operator=(KvCase&&) = default;
  KvCase(const KvCase&) = delete;
  KvCase& operator=(const KvCase&) = delete;

  KvCaseSpec spec;
  HostTensor q, k, v, out, lse, cu_seqlens_q, seqused_k, page_table, sinks, q_descale, k_descale, v_descale;
  HostTensor k_new, v_new, cu_seqlens_k_new, cache_batch_idx, cache_leftpad, rotary_cos, rotary_sin,
      rotary_seqlens;
  Args args;
};
KvCase make_kv_case(const KvCaseSpec& spec);

/// Copies of the cache before a call.
struct KvSnapshot {
  HostTensor k, v;
};
KvSnapshot snapshot(const KvCase& c);

/// After a call with `after` (host tensors: its caches and out / lse as the call left them):
/// the caches equal `before` with the append of the definition applied (host_kvcache_apply
/// on copies; rotated elements within `cache_ulps` units in the last place, everything else
/// bit for bit, NaN included), and out / lse pass the oracle rule against the float64
/// reference of the attention-only arguments (`acc_eps`: the fp8 tensor-core term of
/// check_against_reference). "" or the first failure.
std::string check_kv_call(const Args& after, const KvSnapshot& before, double atol = 1e-3, double cache_ulps = 0,
                          double acc_eps = 0);

}  // namespace longattn::testing

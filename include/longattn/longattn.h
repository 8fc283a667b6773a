// longattn: long-context attention prefill (forward) on Hopper GPUs and x86-64 CPUs.
//
// One call, `longattn::forward`, expresses every feature. Semantics (all backends):
//  - Dense layout (batch, seq, heads, dim); ragged layout (total_tokens, heads, dim) with
//    int32 cumulative offsets `cu_seqlens` of length batch+1; paged K/V
//    (num_pages, page_size, kv_heads, dim) with an int32 page table (batch, max_pages).
//    Only the last dimension must be contiguous; all strides are 64-bit element counts.
//  - GQA/MQA: heads_q % heads_kv == 0; query head h reads kv head h / (heads_q / heads_kv).
//  - Softcap (if > 0): s = cap * tanh(s / cap), applied to scaled logits before masking.
//  - Sinks: one float32 logit per query head that joins the softmax denominator only.
//  - LSE: float32 natural-log logsumexp of the (scaled, capped, masked) logits, sinks
//    included; dense (batch, heads_q, seq_q), ragged (heads_q, total_q).
//  - A query row with no visible key produces 0 output and LSE = -inf (never NaN); with a
//    sink its LSE is the sink logit (the sink is still part of the denominator, so split-KV
//    and context-parallel merges through `combine` stay exact).
#pragma once

#include <cstdint>
#include <optional>

#include "longattn/types.h"

namespace longattn {

/// FlashAttention-3's serving path (`flash_attn_with_kvcache`), before the attention: new
/// keys / values appended to a KV cache, rotary embedding of Q and the new keys, and which
/// cache row / first cache slot each sequence uses. Used with `Args::k` / `Args::v` holding
/// the cache, dense (batch_cache, seqlen_cache, heads_kv, dim) or paged (num_pages,
/// page_size, heads_kv, dim) with `Args::page_table` (batch_cache, max_pages), and
/// `Args::seqused_k` holding each sequence's `cache_seqlens` (the end of its cached keys).
///
/// Sequence b (with lp = cache_leftpad[b] or 0, end = seqused_k[b], n = its new keys):
///  1. Its cache is row r = cache_batch_idx[b] (or b) of k / v (paged: of page_table); cache
///     slot t of it is k[r, t] (paged: slot t of page page_table[r, t / page_size]).
///  2. Append: new key i (i < n) is written, after rotary, to slot end + i of k, new value i
///     to slot end + i of v. No other cache element is written. end + n must fit the cache.
///  3. Rotary (when rotary_cos / rotary_sin are present; needs k_new): with r0 =
///     rotary_seqlens[b] (or end), new key i is rotated at position r0 + i; query row i at
///     r0 + i when the mask is causal or has a window or a chunk, else every row at r0 (as
///     FlashAttention-3). Rotation of position t by the (cos, sin) row t on pairs of
///     elements (x, y) within the first rotary_dim elements: (x cos - y sin, x sin + y cos);
///     interleaved pairs (2i, 2i+1) (GPT-J), else (i, i + rotary_dim / 2) (GPT-NeoX), both
///     using table column i; the rest is unchanged. The rotated q is rounded to q's dtype
///     (the caller's q is never written); the rotated keys are what the cache receives.
///  4. Attention: the keys of sequence b are cache slots [lp, end + n) (end + n - lp keys),
///     with masks aligned to that count as usual (causal bottom-right).
/// Validation checks host-resident metadata against all of this before anything is written
/// (overflowing the cache, page-table entries, rotary table length, indices); device-resident
/// metadata is checked on the device (see `check`).
struct KvCacheArgs {
  /// New keys: dense (batch, seqlen_new, heads_kv, dim_qk), or ragged (total_new, heads_kv,
  /// dim_qk) with cu_seqlens_k_new. The cache's dtype. Needs v_new and Args::seqused_k.
  Tensor k_new;
  /// New values: k_new's layout with last dim dim_v.
  Tensor v_new;
  /// Optional int32 (batch + 1): k_new / v_new are ragged (rank 3) when present.
  Tensor cu_seqlens_k_new;
  /// Optional int32 (batch): the cache row of each sequence (dense: k's batch index; paged:
  /// page_table's row). Absent: sequence b uses row b. With duplicate entries and k_new,
  /// which duplicate's keys land in the shared slots is unspecified (as FlashAttention-3).
  Tensor cache_batch_idx;
  /// Optional int32 (batch): the first cache slot of each sequence's keys (left padding);
  /// 0 <= cache_leftpad[b] <= seqused_k[b]. Absent: 0.
  Tensor cache_leftpad;
  /// Optional (seqlen_ro, rotary_dim / 2) tables of q's dtype or float32 (both alike):
  /// rotary embedding with rotary_dim <= dim_qk. Not for e4m3 inputs.
  Tensor rotary_cos;
  /// See rotary_cos.
  Tensor rotary_sin;
  /// Optional int32 (batch): rotary position of each sequence's first new key (and query);
  /// absent: seqused_k[b]. Ignored without rotary_cos (as FlashAttention-3).
  Tensor rotary_seqlens;
  /// true: GPT-J pairs (2i, 2i + 1); false: GPT-NeoX pairs (i, i + rotary_dim / 2).
  bool rotary_interleaved = true;
  /// CUDA backend with device-resident metadata (which the host cannot read): the same checks
  /// run in a small kernel before anything is written -- all but the page-table entries of
  /// pages the attention only reads, which Args::check_page_table covers as without kvcache;
  /// if one fails, nothing is written to the cache and every sequence attends to no key
  /// (out 0, LSE -inf). With `check` the host also waits for that kernel (one stream
  /// synchronization) and returns its first failure as an error naming the argument.
  bool check = false;

  /// True when any of the serving-path inputs is present.
  bool any() const {
    return k_new.present() || v_new.present() || cu_seqlens_k_new.present() || cache_batch_idx.present() ||
           cache_leftpad.present() || rotary_cos.present() || rotary_sin.present();
  }
};

/// Everything one attention forward needs. Optional tensors are absent when `data` is null.
struct Args {
  /// Queries: dense (batch, seq_q, heads_q, dim_qk) or ragged (total_q, heads_q, dim_qk).
  Tensor q;
  /// Keys: dense (batch, seq_k, heads_kv, dim_qk), ragged (total_k, heads_kv, dim_qk) or
  /// paged (num_pages, page_size, heads_kv, dim_qk). Dense with kvcache.cache_batch_idx:
  /// (batch_cache, seq_k, heads_kv, dim_qk). Written only by kvcache.k_new's append.
  Tensor k;
  /// Values: same layout as `k` with last dim dim_v (1..512; dim_qk is 1..256).
  Tensor v;
  /// Output: q's layout with last dim dim_v; dtype bf16, f16 or f32. Must not overlap inputs.
  Tensor out;
  /// Optional float32 LSE: dense (batch, heads_q, seq_q) or ragged (heads_q, total_q).
  Tensor lse;

  /// Optional int32 (batch+1): ragged queries when present (q is then rank 3).
  Tensor cu_seqlens_q;
  /// Optional int32 (batch+1): ragged keys/values when present (k, v are then rank 3).
  Tensor cu_seqlens_k;
  /// Optional int32 (batch): keys actually used per sequence (<= that sequence's capacity).
  /// With kvcache inputs (KvCacheArgs) it is FlashAttention-3's cache_seqlens: the end of each
  /// sequence's cached keys before the append (its keys start at cache_leftpad[b]).
  Tensor seqused_k;
  /// Optional int32 (batch): query rows actually used per sequence, 0 <= seqused_q[b] <= that
  /// sequence's rows (dense: seq_q; ragged: its cu_seqlens_q length), as FlashAttention-3's
  /// `seqused_q`. Sequence b then has seqused_q[b] queries: rows [0, seqused_q[b]) are
  /// computed, with causal / window / chunk masks aligned to that length (bottom-right:
  /// offset = keys used - seqused_q[b]); its later rows are neither read nor written (out
  /// and lse keep their previous contents there).
  Tensor seqused_q;
  /// Optional int32 (batch, max_pages): paged K/V when present (k, v are then rank 4 pages).
  /// With kvcache.cache_batch_idx: (batch_cache, max_pages), indexed by it.
  Tensor page_table;
  /// Largest query length over the batch (after seqused_q). Required when cu_seqlens_q is
  /// device-resident, unless q has no rows; otherwise 0 means "compute it".
  int64_t max_seqlen_q = 0;
  /// Largest key length over the batch. Same rule as max_seqlen_q, except that device-resident
  /// ragged k / v with no rows (every key sequence empty) need none.
  int64_t max_seqlen_k = 0;

  /// FlashAttention-3's kvcache serving inputs (append, rotary, cache rows, left padding);
  /// all absent by default. See KvCacheArgs.
  KvCacheArgs kvcache;

  /// Optional float32 (heads_q): per-head attention-sink logits.
  Tensor sinks;
  /// fp8 descale of q, float32 (batch, heads_kv); required when q/k/v are e4m3.
  Tensor q_descale;
  /// fp8 descale of k, float32 (batch, heads_kv); required when q/k/v are e4m3.
  Tensor k_descale;
  /// fp8 descale of v, float32 (batch, heads_kv); required when q/k/v are e4m3.
  Tensor v_descale;

  /// Multiplier of q·k. Unset: 1/sqrt(dim_qk). Must be finite and > 0.
  std::optional<float> softmax_scale;
  /// Softcap (0: off). Must be >= 0 and finite.
  float softcap = 0.0f;
  /// Which keys each query sees.
  Mask mask{};

  /// Implementation to run.
  Backend backend = Backend::automatic;
  /// cudaStream_t for the CUDA backend (nullptr: legacy default stream).
  void* stream = nullptr;
  /// CPU backend threads. 0: the environment variable LONGATTN_NUM_THREADS if it holds a
  /// positive integer, else every hardware thread (see `cpu_threads`). Must be >= 0. The
  /// result is bitwise identical for any thread count.
  int num_threads = 0;
  /// CPU backend: instruction set of the kernel. `automatic` picks the widest the CPU and the
  /// operating system support; another value runs that kernel, and `forward` returns
  /// NotSupported naming `cpu_isa` when this machine lacks it (see `cpu_isa_available`).
  /// Ignored by the other backends.
  CpuIsa cpu_isa = CpuIsa::automatic;
  /// CUDA backend: check device-resident page-table entries and report an out-of-range
  /// entry as an error (costs a small extra kernel).
  bool check_page_table = false;
  /// CUDA backend: bytes of K+V the tile scheduler lets one section of heads keep in L2
  /// (long-context tile order; see src/cuda/sm90/schedule_rule.h). 0: the environment
  /// variable LONGATTN_L2_BYTES if set, else half the device's L2 size. Must be >= 0.
  /// Changes only the order of work, never the results.
  int64_t l2_budget_bytes = 0;
  /// CUDA backend: SMs the attention kernel leaves free for other work running beside it
  /// (communication kernels of context or tensor parallelism; FlashAttention-3's
  /// `sm_margin`). The persistent kernel then launches max(1, SMs - sm_margin) CTAs. Must be
  /// >= 0; 0 uses every SM. Changes only where the work runs, never the results beyond the
  /// split-KV choice (which counts SMs). Ignored by the other backends.
  int sm_margin = 0;

  /// Context parallelism in the zigzag layout (longattn.distributed's all_gather_kv): one
  /// sequence of 2 x cp_world x c tokens is split into 2 x cp_world chunks of c, and rank r
  /// holds chunks r and 2 cp_world - 1 - r. With cp_world > 0, `q` / `out` / `lse` are rank
  /// `cp_rank`'s shard, batch 1, 2c rows (chunk cp_rank, then chunk 2 cp_world - 1 - cp_rank),
  /// and `k` / `v` are every rank's shard as an all-gather leaves them, rank-major:
  /// (cp_world, 2c, heads_kv, dim), any strides. Attention runs over the whole sequence at
  /// global positions: query row i is at position cp_rank c + i (i < c) or
  /// (2 cp_world - 1 - cp_rank) c + i - c, and key j of the sequence is row (j mod c) (+ c for
  /// a rank's second chunk) of the rank holding chunk j / c. So no copy puts the gathered K/V
  /// in sequence order. Causal masks use those positions (mask.align is then irrelevant);
  /// windows and chunks are not supported, nor ragged, paged or kvcache inputs. 0: off.
  int cp_world = 0;
  /// This rank (0 <= cp_rank < cp_world) when cp_world > 0.
  int cp_rank = 0;
};

/// Check `args` without computing anything. Returns the same error `forward` would.
Status validate(const Args& args);

/// Compute attention. On any error nothing is written and the Status names the argument.
Status forward(const Args& args);

/// Merge partial attention results computed over disjoint key sets (split-KV, context
/// parallelism). For each token t and head h with partial LSEs l_s:
///   lse = log(sum_s exp(l_s)),  out = sum_s exp(l_s - lse) * out_s.
/// A partial with LSE -inf contributes nothing; if all are -inf, out = 0 and lse = -inf.
struct CombineArgs {
  /// float32 or bf16/f16 partial outputs (splits, tokens, heads, dim_v).
  Tensor out_partial;
  /// float32 partial LSEs (splits, heads, tokens).
  Tensor lse_partial;
  /// Output (tokens, heads, dim_v); bf16, f16 or f32.
  Tensor out;
  /// Optional float32 merged LSE (heads, tokens).
  Tensor lse;
  /// Implementation to run (automatic: where the tensors live).
  Backend backend = Backend::automatic;
  /// cudaStream_t for the CUDA backend.
  void* stream = nullptr;
};

/// Merge partial results (see CombineArgs). Nothing is written on error.
Status combine(const CombineArgs& args);

/// True when this build contains the CUDA backend and a device of compute capability 9.0
/// is visible.
bool cuda_available();

/// True when the CPU backend can run kernels of `isa` on this machine (CPUID, and for amx
/// the operating system's permission to use the tile state). `automatic` is always available.
bool cpu_isa_available(CpuIsa isa);

/// Threads the CPU backend uses for `Args::num_threads = requested` (before it caps them at
/// the number of work items): `requested` if > 0, else LONGATTN_NUM_THREADS if that holds a
/// positive integer (at most 4096), else every hardware thread.
int cpu_threads(int requested);

/// Library version string.
const char* version();

}  // namespace longattn

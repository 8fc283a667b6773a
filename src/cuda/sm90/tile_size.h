// The one table of tile decisions for the sm90 forward kernel: (kernel kind, head dims) ->
// block sizes, pipeline stages, consumer warpgroups, register split. Kernels take the
// result as template parameters; nothing else in the backend picks a tile.
//
// Shared memory per CTA = q_stages x Q (kBlockM x d) + stages x (K + V) (kBlockN x d each), 16-bit
// elements, + an O buffer where o_own_buffer says (kBlockM x dv x 2 bytes), at most 227 KB.
// Registers per consumer thread: O (d/2) + S (kBlockN/2) + P (kBlockN/4) live at once in the
// overlapped loop.
#pragma once

#include <cstdint>

namespace longattn::cuda::sm90 {

struct TileConfig {
  int block_m;        // query rows per CTA tile (64 per consumer warpgroup)
  int block_n;        // keys per K/V tile
  int stages;         // K/V ring depth
  int consumer_wgs;   // consumer warpgroups
  int producer_regs;  // setmaxnreg for the producer warpgroup
  int consumer_regs;  // setmaxnreg for each consumer warpgroup
  int q_stages = 1;   // Q buffers: 2 lets the next tile's Q land while this tile finishes
  bool lpt_sections = true;  // causal: L2-section LPT snake (else the dense kind reads that order from a
                             // device list, kernel_config.cuh kSectionList, and the others run one global snake)
};

// NOTES: setmaxnreg splits must fit the entry allocation: 128 * producer + 256 * consumer
// <= 168 * 384 = 64512 (else setmaxnreg.inc waits forever): 24/240, 32/232, 56/224.
// Producer registers: 24 is enough for the global schedule; with the sectioned causal
// schedule the producer spills at 24, so those tiles use 32/232.

// The dense kernel's tile (plain attention, causal or not).
constexpr TileConfig dense_tile(int head_dim) {
  // hdim 64: 192 x 128 with three consumer warpgroups (128 x 32 + 384 x 160 = 64K registers;
  // 40/152 spilled 48 bytes); two Q buffers (112 KB smem, + 24 KB for O: o_own_buffer).
  if (head_dim <= 64) return {192, 128, 2, 3, 32, 160, 2};
  // hdim 128: 128 x 128 with two Q buffers (192 KB smem, + 32 KB for O: o_own_buffer); S 64 +
  // two P buffers of 32 + O 64 registers (consumer.cuh kDoubleP). NOTES: the wider non-causal
  // tiles (128 x 176 / 192: S 88-96, one P buffer) ran 0.94-0.96x of it at 4k-16k
  // (docs/PERFORMANCE.md).
  if (head_dim <= 128) return {128, 128, 2, 2, 32, 232, 2};
  // hdim 192: 128 x 112 (48 KB Q + 2 x 2 x 42 KB K / V = 216 KB; 128 keys would need 240 KB);
  // S 56 + P 28 + O 96 registers, one P buffer (consumer.cuh kDoubleP: hdim <= 128), the
  // producer at 32 for the sectioned causal schedule.
  if (head_dim <= 192) return {128, 112, 2, 2, 32, 232, 1};
  // hdim 256: O alone takes 128 registers; 128 x 80 (224 KB smem) at 24/240. The sectioned
  // causal schedule does not fit there (producer spills at 24 and 32 registers, consumer at
  // 232), so hdim 256 reads that order from a device list (kernel_config.cuh kSectionList);
  // the sectioned 128 x 64 tile at 40/224 was slower (docs/PERFORMANCE.md).
  return {128, 80, 2, 2, 24, 240, 1, false};
}

// The feature kernel's tile (sinks, softcap, windows, chunks): the dense tile. NOTES: the window element mask spilled on hdim 64 (28 bytes) and
// 256 (4 bytes) until it became one unsigned compare per element (mask.cuh) and its
// arithmetic 32-bit.
constexpr TileConfig feature_tile(int head_dim) { return dense_tile(head_dim); }

// The ragged feature kernel's tile (per-sequence starts and lengths read per tile). NOTES:
// on the hdim-64 (192 x 128 at 160 registers) and hdim-256 (128 x 80 at 240) tiles its
// consumer spilled 8 / 4 bytes; these have room.
// head_dim_v != head_dim (192 / 128): 128 x 128 with one Q buffer (48 KB Q + 2 x 48 KB K +
// 2 x 32 KB V = 208 KB); registers as hdim 128 (S 64 + P 32 + O 64).
constexpr TileConfig ragged_tile(int head_dim, int head_dim_v = 0) {
  if (head_dim_v > 0 && head_dim_v != head_dim) return {128, 128, 2, 2, 32, 232, 1};
  if (head_dim <= 64) return {128, 128, 2, 2, 32, 232, 2};
  if (head_dim <= 128) return dense_tile(head_dim);
  // hdim 192: 128 x 80 (the dense 128 x 112 spilled 88 bytes here).
  if (head_dim <= 192) return {128, 80, 2, 2, 32, 232, 1};
  return {128, 64, 2, 2, 24, 240, 1, false};
}

// The paged kernel's tile: the ragged tile with 24 more producer registers where it had 32
// (consumers 232 -> 224; 128 x 56 + 256 x 224 = 64512, the whole file). NOTES: at 32 its
// producer spilled 4 bytes; the cp.async gather / lanes team (paged_kv.cuh) spilled 120 bytes
// at 40, none at 56. hdim 256 (24 / 240) keeps its split: its consumer spilled 52 bytes at
// 224, so that kernel has no team path (paged_team_ok) and runs every page size on TMA boxes.
constexpr TileConfig paged_tile(int head_dim, int head_dim_v = 0) {
  TileConfig t = ragged_tile(head_dim, head_dim_v);
  // hdim 192: paged boxes and the grouped V layout need a power-of-two block_n: 128 x 64.
  if (head_dim == 192 && (head_dim_v == 0 || head_dim_v == 192)) t = {128, 64, 2, 2, 32, 232, 1};
  if (t.producer_regs == 32) {
    t.producer_regs = 56;
    t.consumer_regs = 224;
  }
  return t;
}

// Whether a paged kernel compiles the producer-team modes (page_math.h PagedMode lanes /
// gather): they need the 56-register producer.
constexpr bool paged_team_ok(const TileConfig& t) { return t.producer_regs >= 56; }

// The kernels, by name. Each compiles a fixed set of features (later kinds add to earlier
// ones) and takes its tile from kernel_tile below; launch_impl.cuh instantiates each kind
// once per (dtype, head dims) (fp8: the feature kind runs on the ragged one).
enum class Kernel : int {
  dense,          // plain attention, causal or not
  dense_vt,       // fp8 only: dense on V transposed in global memory first (fp8_vt.h, kVtGlobal)
  feature,        // + sinks, softcap, windows, chunks (run-time predicates), dense layout
  ragged,         // feature + per-sequence starts and lengths (cu_seqlens, seqused_k)
  paged,          // ragged + paged K/V (the producer resolves pages)
  ragged_packed,  // ragged with packed GQA tiles (pack_gqa.h)
  paged_packed,   // paged with packed GQA tiles
};
constexpr bool kernel_features(Kernel k) { return int(k) >= int(Kernel::feature); }
constexpr bool kernel_ragged(Kernel k) { return int(k) >= int(Kernel::ragged); }
constexpr bool kernel_paged(Kernel k) { return k == Kernel::paged || k == Kernel::paged_packed; }
constexpr bool kernel_packed(Kernel k) { return k == Kernel::ragged_packed || k == Kernel::paged_packed; }
constexpr bool kernel_dense(Kernel k) { return k == Kernel::dense || k == Kernel::dense_vt; }  // plain attention

// Zigzag context parallelism (params.h cp_chunk) compiled in: the dense and feature kinds,
// not the 24-register hdim-256 feature producer (its K/V coordinates spilled 16 bytes there),
// nor fp8 above head dim 128 (the host upcasts or refuses those: forward_sm90.cpp).
constexpr bool cp_compiled(Kernel k, const TileConfig& t, bool fp8, int head_dim_v) {
  if (fp8 && head_dim_v > 128) return false;
  return kernel_dense(k) || (k == Kernel::feature && t.producer_regs >= 32);
}

// Dynamic tile assignment (scheduler.cuh DynamicTiles, used when FwdParams::tile_counter is
// set) compiled in: 16-bit kernels with the sectioned LPT schedule and two consumer
// warpgroups. The host plans with it too (plan.cpp: windows and chunks on kernels where it is
// not compiled take every pair in one section). NOTES: not the three-warpgroup
// hdim-64 tile (consumers at 160 registers spilled 4 bytes), nor the hdim-64 paged kernel (it
// spilled 8 bytes); not fp8 yet (its V transposer would have to follow the published ids too).
constexpr bool dynamic_compiled(Kernel k, const TileConfig& t, int head_dim, bool fp8) {
  return !fp8 && t.lpt_sections && t.consumer_wgs == 2 && !(kernel_paged(k) && head_dim <= 64);
}

// O through shared memory and TMA stores (consumer.cuh; FwdParams::o_tma, set by
// launch_args.cpp encode_out_map where the output allows it) compiled in:
// - 16-bit dense and feature kinds with two Q buffers, O no wider than Q: O goes into the
//   tile's own Q buffer (the ragged kinds keep direct stores, which clip rows at their
//   sequence's end and scatter packed rows). Two Q buffers: the last arrival on a buffer's
//   q_empty comes during the next tile, so with one the next tile's Q could never load.
// - O in a buffer of its own (o_own_buffer; kBlockM x dv x 2 bytes, smem_layout.cuh kOBytes):
//   the fp8 dense kinds at head dim 128 (a 16-bit O is twice the e4m3 Q buffer), and the
//   16-bit dense kind up to head dim 128 (its Q buffer is then free at the tile's last Q.K^T,
//   so the producer's next Q load does not wait for the previous tile's O store; hdim 128:
//   192 + 32 KB of shared memory).
constexpr bool o_own_buffer(Kernel k, bool fp8, int head_dim, int head_dim_v) {
  if (fp8) return kernel_dense(k) && head_dim == 128 && head_dim_v == 128;
  return k == Kernel::dense && head_dim <= 128 && head_dim_v == head_dim;
}
constexpr bool o_tma_compiled(Kernel k, const TileConfig& t, bool fp8, int head_dim, int head_dim_v) {
  if (fp8) return o_own_buffer(k, fp8, head_dim, head_dim_v);
  return (k == Kernel::dense || k == Kernel::feature) && head_dim_v <= head_dim && t.q_stages >= 2;
}

constexpr TileConfig kernel_tile(Kernel k, int head_dim, int head_dim_v) {
  switch (k) {
    case Kernel::dense:
    case Kernel::dense_vt: return dense_tile(head_dim);  // (dense_vt: fp8 alone, fp8_tile)
    case Kernel::feature: return feature_tile(head_dim);
    case Kernel::ragged:
    case Kernel::ragged_packed: return ragged_tile(head_dim, head_dim_v);
    default: return paged_tile(head_dim, head_dim_v);
  }
}

// The fp8 (e4m3) kernels' tile: 128 x 128 (Vt rows are 128 keys: one 128-byte swizzle row,
// fp8.cuh).
// The kinds with the in-kernel V transposer (every kind but dense_vt, hdim 128): three K / V / Vt
// stages, the transpose between V's arrival and its P V. Shared memory: 2 Q + 3 x (K + V + Vt)
// of 16 KB = 176 KB. Registers: S 64 + P 16 + O 64 per consumer thread, so the split favours
// the producer warpgroup, whose warps 1..3 transpose V (fp8.cuh; two steps in flight spilled
// at 40): 56 / 224.
// dense_vt (V pre-transposed in global memory, kernel_config.cuh kVtGlobal): no
// transposer warps, so 24 / 240 and the global schedule (the 24-register producer has no room
// for the sectioned snake). hdim 128: three K / Vt stages (2 Q + 3 x (K + Vt) of 16 KB = 128
// KB), S one block ahead and no GEMM turns (consumer.cuh kLookahead: S 2 x 64 + P 16 + O 64).
// hdim 256: as the 16-bit hdim-256 tile (S 64 + P 16 + O 128), 32 KB Q + 2 x (K + Vt) of 32 KB = 160 KB.
constexpr TileConfig fp8_tile(Kernel k, int head_dim, int) {
  if (k != Kernel::dense_vt) return TileConfig{128, 128, 3, 2, 56, 224, 2};
  return head_dim <= 128 ? TileConfig{128, 128, 3, 2, 24, 240, 2, false} : TileConfig{128, 128, 2, 2, 24, 240, 1, false};
}

// fp8 kernels whose V comes transposed from global memory (kernel_config.cuh kVtGlobal,
// fp8_vt.h) instead of the in-kernel transposer: dense_vt (hdim 256: the only fp8 kind).
constexpr bool fp8_vt_global(Kernel k) { return k == Kernel::dense_vt; }

// fp8 plain attention at head dim 128 (plan.cpp): dense_vt where a query row sees at least this
// many keys on average (a causal row about half of them), else the dense kind. dense_vt runs
// its key blocks faster but pays a pre-pass over V and more per tile (its prologue issues two
// Q K^T), which short rows do not earn back (docs/history/PERFORMANCE-sessions-16-33.md,
// "FP8 hdim 128: Q.K^T one block ahead").
constexpr int64_t kFp8VtMinKeys = 4096;
constexpr bool fp8_vt_worth(int64_t mean_visible_keys) { return mean_visible_keys >= kFp8VtMinKeys; }

// The compiled head dims (launch_<dtype>_hdim<d>.cu) that serve q / k dim d and v dim dv: the
// cheapest (qk + v) with qk >= d and v >= dv. Narrower dims run there on column-addressed
// tensor maps whose missing columns TMA fills with zeros (tensor_map.h col_chunks): Q K^T
// and P V over zero columns add nothing, and the epilogue stores dv columns. {0, 0}: none.
struct HeadDims {
  int qk = 0, v = 0;
};
// fp8: 128 (narrower dims zero-filled) and exactly 256 / 256 (the dense kind only: the host
// runs other fp8 calls at these dims on the f16 kernels, forward_sm90.cpp fp8_upcast_needed).
constexpr HeadDims kernel_dims(int d, int dv, bool fp8) {
  if (fp8) return d <= 128 && dv <= 128 ? HeadDims{128, 128} : d == 256 && dv == 256 ? HeadDims{256, 256} : HeadDims{};
  constexpr HeadDims kCompiled[] = {{64, 64}, {128, 128}, {192, 128}, {192, 192}, {256, 256}};
  for (const HeadDims& k : kCompiled)
    if (d <= k.qk && dv <= k.v) return k;
  return {};
}

constexpr bool operator==(const TileConfig& a, const TileConfig& b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.stages == b.stages &&
         a.consumer_wgs == b.consumer_wgs && a.producer_regs == b.producer_regs &&
         a.consumer_regs == b.consumer_regs && a.q_stages == b.q_stages &&
         a.lpt_sections == b.lpt_sections;
}

}  // namespace longattn::cuda::sm90

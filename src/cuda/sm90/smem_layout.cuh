// Shared-memory layout of the forward kernel: Q tile, K/V rings, mbarriers; fp8 kernels add
// the transposed-V ring that P V reads (fp8.cuh); some kinds a buffer for O (tile_size.h
// o_own_buffer).
// NOTES: every tile starts 1024-byte aligned (128B swizzle atoms; descriptor base offset 0).
#pragma once

#include <cstdint>

namespace longattn::cuda::sm90 {

// kHeadDim: q / k head dim; kHeadDimV: v's (192 / 128 for DeepSeek-style heads); kElemBytes:
// 2 (bf16 / f16) or 1 (e4m3). kVt: a Vt ring (kHeadDimV rows x kBlockN keys) beside the V ring,
// which the fp8 kernels' transposer fills; without it (16-bit, or fp8 with V transposed in
// global memory: kernel_config.cuh kVtGlobal) P V reads the V ring itself. kOBytes_: a buffer
// for O of its own (kernel_config.cuh kOBuf), else none.
template <int kHeadDim, int kBlockM, int kBlockN, int kStages, int kQStages, int kHeadDimV = kHeadDim,
          int kElemBytes = 2, bool kVtRing = kElemBytes == 1, int kOBytes_ = 0>
struct SmemLayout {
  static constexpr bool kVt = kVtRing;
  static constexpr int kQBytes = kBlockM * kHeadDim * kElemBytes;
  static constexpr int kKBytes = kBlockN * kHeadDim * kElemBytes;   // one K stage
  static constexpr int kVBytes = kBlockN * kHeadDimV * kElemBytes;  // one V stage (and one Vt stage)
  static constexpr int kQOff = 0;
  static constexpr int kKOff = kQOff + kQStages * kQBytes;
  static constexpr int kVOff = kKOff + kStages * kKBytes;
  static constexpr int kVtOff = kVOff + kStages * kVBytes;
  static constexpr int kOBytes = kOBytes_;
  static constexpr int kOOff = kVtOff + (kVt ? kStages * kVBytes : 0);
  static constexpr int kBarOff = kOOff + kOBytes;
  static constexpr int kNumBars = 2 * kQStages + (kVt ? 6 : 4) * kStages;  // q, k, v (and vt) rings
  static constexpr int kBytes = kBarOff + 8 * kNumBars;
  static_assert(kQBytes % 1024 == 0 && kKBytes % 1024 == 0 && kVBytes % 1024 == 0 && kOBytes % 1024 == 0,
                "tiles must stay 1024-aligned");

  uint8_t* base;
  __device__ uint8_t* q(int s) const { return base + kQOff + s * kQBytes; }
  __device__ uint8_t* k(int s) const { return base + kKOff + s * kKBytes; }
  __device__ uint8_t* v(int s) const { return base + kVOff + s * kVBytes; }
  __device__ uint8_t* o() const { return base + kOOff; }
  __device__ uint64_t* bars() const { return reinterpret_cast<uint64_t*>(base + kBarOff); }
  __device__ uint64_t* q_full(int s) const { return bars() + s; }
  __device__ uint64_t* q_empty(int s) const { return bars() + kQStages + s; }
  __device__ uint64_t* k_full(int s) const { return bars() + 2 * kQStages + s; }
  __device__ uint64_t* k_empty(int s) const { return bars() + 2 * kQStages + kStages + s; }
  __device__ uint64_t* v_full(int s) const { return bars() + 2 * kQStages + 2 * kStages + s; }
  __device__ uint64_t* v_empty(int s) const { return bars() + 2 * kQStages + 3 * kStages + s; }
  // The operand P V reads and its ring: V itself (16-bit kernels: MN-major; fp8 kVtGlobal: the
  // pre-transposed Vt), or the transposed copy Vt (fp8: the B operand of an fp8 wgmma must be
  // K-major).
  __device__ uint8_t* pv(int s) const { return kVt ? base + kVtOff + s * kVBytes : v(s); }
  __device__ uint64_t* pv_full(int s) const { return kVt ? bars() + 2 * kQStages + 4 * kStages + s : v_full(s); }
  __device__ uint64_t* pv_empty(int s) const { return kVt ? bars() + 2 * kQStages + 5 * kStages + s : v_empty(s); }
};

}  // namespace longattn::cuda::sm90

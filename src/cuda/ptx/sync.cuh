// Warp-specialization primitives: setmaxnreg and named barriers.
#pragma once

#include <cstdint>

namespace longattn::cuda::ptx {

// Give registers back (producer) / take them (consumers). Must be executed by all warps of
// a warpgroup; needs a register cap at kernel entry (__launch_bounds__(threads, 1)).
template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// Named barriers (ids 1..15; 0 is __syncthreads). `threads` is a multiple of 32.
// Ids 1..kWGs: the consumers' ping-pong turns (kernel.cuh); kBarClearTail: all consumers
// after clearing a sequence's last V tile (mainloop.cuh clear_tail_rows).
constexpr uint32_t kBarClearTail = 15;
__device__ __forceinline__ void named_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 2^x on the FMA pipe (no MUFU): 2^x = 2^n * 2^f, n = round(x) by the 1.5 * 2^23 trick, f in
// [-0.5, 0.5], 2^f by its degree-4 Taylor polynomial (relative error <= 4.3e-5, under the
// bf16 / f16 rounding of P). Exactly 0 for x < -126 (masked logits are -inf).
// Used for half of the softcapped logits, whose tanh already occupies the MUFU.
__device__ __forceinline__ float exp2_poly(float x) {
  const float xc = fmaxf(x, -127.f);
  const float j = __fadd_rn(xc, 12582912.f);
  const float f = xc - __fsub_rn(j, 12582912.f);
  float y = fmaf(0.0096181291f, f, 0.0555041087f);
  y = fmaf(y, f, 0.2402265070f);
  y = fmaf(y, f, 0.6931471806f);
  y = fmaf(y, f, 1.f);
  const int bits = __float_as_int(y) + (__float_as_int(j) << 23);
  return x < -126.f ? 0.f : __int_as_float(bits);
}

}  // namespace longattn::cuda::ptx

// Warp-specialization primitives: setmaxnreg and named barriers; the MUFU math of the softmax
// (ex2, tanh). NOTES: tanh.approx.f16x2 is two MUFU.TANH.F16 ops on sm_90a (cuobjdump), so
// it saves nothing over two f32 tanhs.
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
// Ids 1..kWGs: the consumers' ping-pong turns, or (fp8 dense_vt) 1 and 2 their tile stagger
// (consumer.cuh PingPong, TileStagger); kBarOStore + wg: one consumer
// warpgroup's O written to shared memory before its TMA store (consumer.cuh, o_tma);
// kBarClearTail: all consumers after clearing a sequence's last V tile (tail_rows.cuh).
constexpr uint32_t kBarOStore = 4;
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

// x, with a data dependency on y that ptxas keeps (max(x, min(y, -inf)) is x for every y, NaN
// included, and every x but NaN): work seeded with it is scheduled after y is known. For
// ordering independent chains (softmax.cuh: row 1's max after row 0's).
__device__ __forceinline__ float after(float x, float y) {
  float r;
  asm("{\n .reg .f32 t;\n min.f32 t, %2, 0fFF800000;\n max.f32 %0, %1, t;\n}" : "=f"(r) : "f"(x), "f"(y));
  return r;
}

// %globaltimer (ns, the clock CUPTI's timestamps come from) and %smid: the diagnostic probe's
// reads (params.h cta_clock).
__device__ __forceinline__ uint64_t global_timer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint32_t sm_id() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

// tanh.approx.f32: MUFU.TANH, max relative error 2^-11 (PTX ISA).
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace longattn::cuda::ptx

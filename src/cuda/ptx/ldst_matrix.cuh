// ldmatrix / stmatrix (sm_90): a warp moves four 8 x 8 matrices of 16-bit elements between
// shared memory and registers in one instruction. Lane 8 m + r gives the address of row r of
// matrix m (16 contiguous bytes); register m of lane T holds matrix m's elements
// (T / 4, 2 (T % 4)) and (T / 4, 2 (T % 4) + 1), low half first. With .trans, lane T's
// register m holds (2 (T % 4), T / 4) and (2 (T % 4) + 1, T / 4) instead: two rows, one column.
// Volatile with a memory clobber: they must stay between the mbarrier waits and fences around
// them (fp8.cuh's V transposer).
#pragma once

#include <cstdint>

namespace longattn::cuda::ptx {

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

}  // namespace longattn::cuda::ptx

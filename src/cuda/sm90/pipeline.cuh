// Pipeline state of the shared-memory rings (Q buffers, K and V stages): which stage is next
// and the parity of its mbarrier phase. Producer and consumers advance their own copies in
// lockstep (both walk the same loads in the same order; producer.cuh, consumer.cuh).
#pragma once

#include <cstdint>

namespace longattn::cuda::sm90 {

// Stage index + phase parity of a ring, advanced in lockstep by producer and consumers.
template <int kStages>
struct PipeState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

}  // namespace longattn::cuda::sm90

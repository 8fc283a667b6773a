// Host-side entry into the sm90 forward kernels (plain C++; implemented in launch_*.cu,
// one translation unit per (dtype, head dims) so the build parallelizes).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda/sm90/params.h"
#include "cuda/sm90/tile_size.h"

namespace longattn::cuda::sm90 {

enum class InType : int { bf16 = 0, f16 = 1, e4m3 = 2 };

struct LaunchArgs {
  CUtensorMap tm_q, tm_k, tm_v;
  CUtensorMap tm_o;  // FwdParams::o_tma: the output, boxes of 64 rows x one 128-byte chunk
  FwdParams p;
  Kernel kernel = Kernel::dense;  // which kernel (tile_size.h); its tile is kernel_tile(kernel, ...)
  int num_sms = 132;
  cudaStream_t stream = nullptr;
  bool tile_list = false;  // ragged kinds: the tile list built on the device (tile_list.cuh)
  int64_t list_items = 0;  // its capacity in items: a host bound on the live (sequence, q-block) items
  bool dynamic = false;    // LPT problems: atomic-counter tile assignment where compiled (KernelConfig kDynamic)
  bool section_list = false;  // dense kinds without the sectioned snake: its order as a device list (kSectionList)
  // That list deals each section from a rotating first CTA (TileScheduler::section_list_entry):
  // -1 where TileScheduler::rotation_rule holds, 0 never, 1 always.
  int8_t section_rotate = -1;
};

// Launches kernel a.kernel for (dtype, head dims). Instantiated for q / k / v head dims 64,
// 128, 192, 256, and q / k 192 with v 128 (DeepSeek-style heads; ragged and paged kinds only); e4m3
// for 128 (dense, ragged, paged and the packed kinds: the feature kind runs as ragged) and
// 256 / 256 (the dense kind). Each kind with features (feature, ragged, paged and their packed
// forms) is compiled twice, with and without the softcap (KernelConfig kCap).
template <InType kIn, int kHeadDim, int kHeadDimV>
cudaError_t launch_fwd(const LaunchArgs& a);

}  // namespace longattn::cuda::sm90

// Host-side entry into the sm90 forward kernels (plain C++; implemented in launch_*.cu,
// one translation unit per (dtype, head dim) so the build parallelizes).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda/sm90/params.h"
#include "cuda/sm90/tile_size.h"

namespace longattn::cuda::sm90 {

enum class InType : int { bf16 = 0, f16 = 1 };

struct LaunchArgs {
  CUtensorMap tm_q, tm_k, tm_v;
  FwdParams p;
  int num_sms = 132;
  cudaStream_t stream = nullptr;
  int tile_variant = 0;  // tile_config variant (measurements only; 0 = the table's choice)
  bool features = false;  // sinks / softcap / window / chunk: the feature kernel (kernel.cuh kFeat)
  bool ragged = false;    // with features: ragged q / k or seqused_k (kernel.cuh kRagged)
  bool paged = false;     // with ragged: paged K/V, TMA per page (kernel.cuh kPaged)
  bool tile_list = false;  // with ragged: tile list built on the device (tile_list.cuh)
  bool cost_order = false;  // that list in the cost-sorted item order instead of sequence-major (A/B)
  int64_t list_items = 0;  // its capacity in items: a host bound on the live (sequence, q-block) items
  bool dynamic = false;    // LPT problems: atomic-counter tile assignment where compiled (kernel.cuh kDynamic)
};

// Launches the kernel for (dtype, head dim); tile sizes come from
// tile_config(D, p.causal, tile_variant).
template <InType kIn, int kHeadDim>
cudaError_t launch_fwd(const LaunchArgs& a);

// q / k head dim kHeadDim, v head dim kHeadDimV != kHeadDim (192 / 128): the ragged feature
// kernel (paged when a.paged), whatever the features.
template <InType kIn, int kHeadDim, int kHeadDimV>
cudaError_t launch_fwd_split(const LaunchArgs& a);

}  // namespace longattn::cuda::sm90

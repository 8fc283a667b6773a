// The kernel's inputs for one call: TMA tensor maps and the plain params struct, built from
// the validated problem and its plan (plan.h).
#pragma once

#include <string>

#include "common/problem.h"
#include "cuda/plan.h"
#include "cuda/sm90/launch.h"

namespace longattn::cuda {

// Encodes the Q / K / V tensor maps of `plan` into la->tm_*; "" on success, else a message.
std::string encode_maps(const Args& a, const detail::Problem& p, const ForwardPlan& plan, sm90::LaunchArgs* la);

// The output's tensor map for the dense kernels' TMA stores (FwdParams::o_tma; boxes of 64
// rows x one 128-byte chunk) into la->tm_o. True when it applies: the dense or feature kind
// with two Q buffers (KernelConfig kOTma), 16-bit
// inputs and an output of the same type with a 16-byte aligned base and strides (TMA's
// rule). False: the kernel stores O directly (call it after any split-KV redirect: the f32
// partials never take it).
bool encode_out_map(const Args& a, const detail::Problem& p, const ForwardPlan& plan, sm90::LaunchArgs* la);

// fp8 kernels with V from global memory (KernelConfig kVtGlobal): la->tm_v over `vt`, the
// transposed copy (fp8_vt.h: batch x heads_kv x dim x keys_pad bytes, contiguous), column-
// addressed with boxes of one 128-key chunk of all `dim` rows. "" on success, else a message.
std::string encode_vt_map(const void* vt, int64_t batch, int64_t heads_kv, int64_t dim, int64_t keys_pad,
                          sm90::LaunchArgs* la);

// Fills every FwdParams field from the problem and the plan (out / lse point at the caller's
// tensors; split-KV redirects them afterwards, forward_sm90.cpp).
void fill_params(const Args& a, const detail::Problem& p, const ForwardPlan& plan, sm90::FwdParams* fp);

}  // namespace longattn::cuda

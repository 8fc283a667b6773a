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

// Fills every FwdParams field from the problem and the plan (out / lse point at the caller's
// tensors; split-KV redirects them afterwards, forward_sm90.cpp).
void fill_params(const Args& a, const detail::Problem& p, const ForwardPlan& plan, sm90::FwdParams* fp);

}  // namespace longattn::cuda

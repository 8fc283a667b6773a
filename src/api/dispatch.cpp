// Public entry points: validate once, then hand the normalized Problem to one backend.
#include "api/check.h"
#include "common/overrides.h"
#include "common/problem.h"

namespace longattn {
namespace {

// Host backends dereference every pointer; refuse device memory before they touch it.
Status require_host(Backend b, const Device& d) {
  if (d.kind == DeviceKind::cpu) return Status::Ok();
  return Status::NotSupported(std::string("backend ") + backend_name(b) +
                              ": needs host (cpu) tensors, but they are on " +
                              detail::device_str(d));
}

Status require_cuda(const Device& d) {
  if (d.kind == DeviceKind::cuda) return Status::Ok();
  return Status::NotSupported("backend cuda: needs tensors on a CUDA device, but they are on cpu");
}

// Device tensors under Backend::automatic: say plainly why they cannot run here.
Status require_cuda_device(const Device& d) {
#ifndef LONGATTN_WITH_CUDA
  (void)d;
  return Status::NotSupported("not supported: this build has no CUDA backend");
#else
  if (cuda_available()) return Status::Ok();
  return Status::NotSupported("tensors are on " + detail::device_str(d) +
                              " but no CUDA device of compute capability 9.0 is visible");
#endif
}

// Args::cpu_isa names a kernel this machine must be able to run.
Status require_cpu_isa(CpuIsa isa) {
  if (cpu_isa_available(isa)) return Status::Ok();
  std::string have;
  for (CpuIsa i : {CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::amx})
    if (cpu_isa_available(i)) have += std::string(have.empty() ? "" : ", ") + cpu_isa_name(i);
  return Status::NotSupported(std::string("cpu_isa: ") + cpu_isa_name(isa) +
                              " is not available on this CPU (available: " + have + ")");
}

// A host backend: with kvcache's append / rotary, those run first on the host (into the
// caller's cache; the rotated q into a copy), then the backend attends over the cache.
Status run_host(Backend b, const Args& a, const detail::Problem& p) {
  if (b == Backend::cpu) LONGATTN_TRY(require_cpu_isa(a.cpu_isa));  // refused before the cache is written
  auto attend = [b](const Args& x, const detail::Problem& y) {
    return b == Backend::reference ? detail::reference_forward(x, y) : detail::cpu_forward(x, y);
  };
  if (!p.kvc.append && !p.kvc.rotary) return attend(a, p);
  detail::HostKvcache h;
  LONGATTN_TRY(detail::host_kvcache_apply(a, p, &h));
  return attend(h.attn, h.problem);
}

}  // namespace

Status forward(const Args& a) { return detail::forward_with(a, detail::Overrides{}); }

Status detail::forward_with(const Args& a, const Overrides& ov) {
  detail::Problem p;
  LONGATTN_TRY(detail::build_problem(a, &p));
  switch (a.backend) {
    case Backend::reference:
    case Backend::cpu:
      LONGATTN_TRY(require_host(a.backend, p.device));
      return run_host(a.backend, a, p);
    case Backend::cuda:
      LONGATTN_TRY(require_cuda(p.device));
      return detail::cuda_forward(a, p, ov);
    case Backend::automatic:
      // Tensors decide: host memory goes to the CPU backend; device memory can only be
      // served by the CUDA backend, and only where one exists.
      if (p.device.kind == DeviceKind::cpu) return run_host(Backend::cpu, a, p);
      LONGATTN_TRY(require_cuda_device(p.device));
      return detail::cuda_forward(a, p, ov);
  }
  return Status::Invalid("backend: unknown value " + std::to_string(int(a.backend)));
}

Status combine(const CombineArgs& a) {
  LONGATTN_TRY(detail::validate_combine(a));
  const Device d = a.out_partial.device;
  switch (a.backend) {
    case Backend::reference:
    case Backend::cpu:
      // The float64 combine is already memory-bound and cheap; it serves the CPU as well.
      LONGATTN_TRY(require_host(a.backend, d));
      return detail::reference_combine(a);
    case Backend::cuda:
      LONGATTN_TRY(require_cuda(d));
      return detail::cuda_combine(a);
    case Backend::automatic:
      if (d.kind == DeviceKind::cpu) return detail::reference_combine(a);
      LONGATTN_TRY(require_cuda_device(d));
      return detail::cuda_combine(a);
  }
  return Status::Invalid("backend: unknown value " + std::to_string(int(a.backend)));
}

#ifndef LONGATTN_WITH_CUDA
// This build has no CUDA backend: the entry points exist so dispatch links, and say why.
bool cuda_available() { return false; }
namespace detail {
Status cuda_forward(const Args&, const Problem&, const Overrides&) {
  return Status::NotSupported("not supported: this build has no CUDA backend");
}
Status cuda_combine(const CombineArgs&) {
  return Status::NotSupported("not supported: this build has no CUDA backend");
}
}  // namespace detail
#endif

}  // namespace longattn

// Turns logical inputs into a longattn::Args call: storage layout (dense, ragged, paged),
// metadata tensors, poisoned outputs, and device copies for the CUDA backend.
#pragma once

#include <memory>
#include <vector>

#include "cli_options.h"
#include "device_memory.h"
#include "host_array.h"
#include "inputs.h"

namespace longattn::tools {

/// auto -> cuda when longattn::cuda_available(), else cpu. Throws UsageError for cuda when
/// it is not available.
Backend resolve_backend(Backend b);

class Launch {
 public:
  /// Builds host storage and `args` (host views). Never fails: bad combinations are reported
  /// by validate().
  Launch(const RunOptions& o, const Inputs& in, Backend backend);
  Launch(const Launch&) = delete;  // slots point into this object
  Launch& operator=(const Launch&) = delete;

  /// longattn::validate on the call as it will run.
  Status validate() const { return longattn::validate(args_); }
  /// Copies every tensor to the device when the backend is cuda (outputs poisoned there too).
  /// Large tensors (q, k, v, out, lse) get extra device copies that run() rotates through,
  /// so that together they exceed twice the L2 cache: a timed run never finds its K/V left
  /// in L2 by the previous run (STYLE.md: rotate inputs larger than L2).
  void prepare();
  /// Device copies run() rotates through (1 on the host).
  int rotations() const { return rotations_; }
  /// One forward. With `wait`, also waits for the device (CUDA) so results are ready.
  Status run(bool wait = true);
  /// Brings outputs back to the host arrays below.
  void fetch();

  const Args& args() const { return args_; }
  Backend backend() const { return backend_; }
  HostArray out;  // q's layout with dim_v, out dtype; NaN until written
  HostArray lse;  // float32 dense (batch, heads_q, seq_q) / ragged (heads_q, total_q), or empty

 private:
  struct Slot {
    Tensor* tensor;
    const HostArray* host;
    DeviceBuffer dev;
    std::vector<DeviceBuffer> extra;  // rotation copies 1..rotations_-1 (large tensors)
  };
  void add(Tensor* t, const HostArray* h);
  Tensor view(const HostArray& h) const;

  Backend backend_;
  int device_ = 0;
  Args args_;
  HostArray k_pages_, v_pages_, cu_q_, cu_k_, seqused_k_, page_table_, sinks_;
  HostArray q_desc_, k_desc_, v_desc_;
  std::vector<Slot> slots_;
  bool on_device_ = false;
  int rotations_ = 1;
  int64_t runs_ = 0;
};

}  // namespace longattn::tools

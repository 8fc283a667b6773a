// Timing of repeated forwards: warmup runs, then the median of timed runs.
#pragma once

#include "launch.h"

namespace longattn::tools {

struct Timing {
  double median_ms = 0, min_ms = 0;
  int runs = 0;
};

/// Default timed runs for a backend (the reference and CPU are slow at long context).
int default_repeat(Backend b);

/// Runs `warmup` untimed then `repeat` timed forwards (each waited for). Stops at the first
/// failing Status and returns it.
Status time_forward(Launch& l, int warmup, int repeat, Timing* t);

/// Process exit code for a failed Status: 2 for caller errors and unsupported requests
/// (the command line asked for something longattn refuses), 1 for runtime failures.
int exit_code_for(const Status& s);

}  // namespace longattn::tools

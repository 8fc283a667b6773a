#include "timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace longattn::tools {

int default_repeat(Backend b) { return b == Backend::cuda ? 20 : 3; }

Status time_forward(Launch& l, int warmup, int repeat, Timing* t) {
  for (int i = 0; i < warmup; ++i) {
    Status s = l.run();
    if (!s.ok()) return s;
  }
  std::vector<double> ms;
  if (l.backend() == Backend::cuda) {
    // Events on the launch stream: a short kernel's time is not swamped by host overheads
    // (a cudaDeviceSynchronize round trip per run would be a visible share of it).
    DeviceTimer timer;
    for (int i = 0; i < repeat; ++i) {
      timer.start();
      Status s = l.run(/*wait=*/false);
      if (!s.ok()) return s;
      ms.push_back(timer.stop_ms());
    }
  } else {
    for (int i = 0; i < repeat; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      Status s = l.run();
      auto t1 = std::chrono::steady_clock::now();
      if (!s.ok()) return s;
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
  }
  std::sort(ms.begin(), ms.end());
  t->runs = repeat;
  t->min_ms = ms.empty() ? 0 : ms.front();
  // Even count: the lower middle, a time that was actually measured.
  t->median_ms = ms.empty() ? 0 : ms[(ms.size() - 1) / 2];
  return Status::Ok();
}

int exit_code_for(const Status& s) {
  return s.code() == Status::Code::runtime_error ? 1 : 2;
}

}  // namespace longattn::tools

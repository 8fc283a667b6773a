// `longattn bench`: sweeps sequence lengths (and backends side by side) and prints a table
// of time and mask-aware TFLOP/s. A progress bar goes to stderr only when it is a terminal.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "commands.h"
#include "json_line.h"
#include "launch.h"
#include "row_check.h"
#include "timing.h"

namespace longattn::tools {
namespace {

class Progress {
 public:
  explicit Progress(int total) : total_(total), on_(isatty(STDERR_FILENO) == 1) {}
  void show(int done, const std::string& what) {
    if (!on_) return;
    constexpr int kWidth = 30;
    const int fill = total_ ? done * kWidth / total_ : kWidth;
    std::fprintf(stderr, "\r[%s%s] %d/%d %-28s", std::string(size_t(fill), '#').c_str(),
                 std::string(size_t(kWidth - fill), ' ').c_str(), done, total_, what.c_str());
    std::fflush(stderr);
  }
  void clear() {
    if (on_) std::fprintf(stderr, "\r%80s\r", "");
  }

 private:
  int total_;
  bool on_;
};

std::vector<int64_t> default_seqs(const std::vector<Backend>& backends) {
  for (Backend b : backends)
    if (b == Backend::cuda) return {1024, 2048, 4096, 8192, 16384};
  return {512, 1024, 2048, 4096};
}

}  // namespace

int bench_command(const std::vector<std::string>& args) {
  BenchOptions bo = parse_bench_options(args);
  if (bo.backends.empty()) bo.backends = {resolve_backend(Backend::automatic)};
  for (Backend& b : bo.backends) {
    b = resolve_backend(b);
    if (b == Backend::cuda) set_device(bo.base.device);
  }
  if (bo.seqs.empty()) bo.seqs = default_seqs(bo.backends);

  const bool json = bo.base.json;
  if (!json) {
    RunOptions first = bo.base;
    first.seq_q = first.seq_k = bo.seqs.front();
    Inputs probe = make_inputs(first);
    std::printf("bench: %s\n", describe_problem(first, probe).c_str());
    for (Backend b : bo.backends)
      std::printf("backend: %s\n", describe_backend(b, bo.base.threads, bo.base.cpu_isa).c_str());
    std::printf("%8s %6s", "seq", "batch");
    for (Backend b : bo.backends)
      std::printf(" | %12s %17s", (std::string(backend_name(b)) + " ms").c_str(),
                  (std::string(backend_name(b)) + " TFLOP/s").c_str());
    if (bo.check) std::printf(" | check");
    std::printf("\n");
    std::fflush(stdout);
  }

  Progress progress(static_cast<int>(bo.seqs.size() * bo.backends.size()));
  int done = 0, status = 0;
  for (int64_t seq : bo.seqs) {
    RunOptions o = bo.base;
    o.seq_q = o.seq_k = seq;
    if (bo.tokens > 0) o.batch = std::max<int64_t>(1, bo.tokens / seq);
    const Inputs in = make_inputs(o);
    const double flops = problem_flops(o, in);
    std::string line;
    char buf[128];
    std::snprintf(buf, sizeof buf, "%8lld %6lld", static_cast<long long>(seq), static_cast<long long>(o.batch));
    line += buf;
    bool all_pass = true;
    for (Backend b : bo.backends) {
      progress.show(done, "seq " + std::to_string(seq) + " " + backend_name(b));
      Launch launch(o, in, b);
      const Args host_args = launch.args();
      Status st = launch.validate();
      Timing t;
      if (st.ok()) {
        launch.prepare();
        st = time_forward(launch, o.warmup, o.repeat > 0 ? o.repeat : default_repeat(b), &t);
      }
      if (!st.ok()) {
        progress.clear();
        std::fprintf(stderr, "longattn: seq %lld, %s: %s\n", static_cast<long long>(seq),
                     backend_name(b), st.message().c_str());
        std::snprintf(buf, sizeof buf, " | %12s %17s", "-", "-");
        line += buf;
        status = exit_code_for(st);
        ++done;
        continue;
      }
      bool pass = true;
      if (bo.check) {
        launch.fetch();
        const CheckResult c = check_rows(host_args, in, launch.out, nullptr, o.check_rows, o.seed);
        pass = c.pass;
        all_pass = all_pass && c.pass;
        if (!c.pass) status = 1;
      }
      if (json) {
        JsonLine j;
        j.str("command", "bench")
            .str("problem", describe_problem(o, in))
            .str("backend", describe_backend(b, o.threads, o.cpu_isa))
            .num("seq", double(seq))
            .num("batch", double(o.batch))
            .num("median_ms", t.median_ms)
            .num("min_ms", t.min_ms)
            .num("tflops", flops / (t.median_ms * 1e-3) / 1e12)
            .num("rotations", launch.rotations());
        if (bo.check) j.boolean("pass", pass);
        j.print();
        std::fflush(stdout);
      }
      std::snprintf(buf, sizeof buf, " | %12.3f %17.3f", t.median_ms,
                    flops / (t.median_ms * 1e-3) / 1e12);
      line += buf;
      ++done;
    }
    if (bo.check) line += all_pass ? " | PASS" : " | FAIL";
    progress.clear();
    if (!json) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  progress.clear();
  return status;
}

}  // namespace longattn::tools

// The subcommands of the `longattn` tool. Each returns the process exit code and throws
// UsageError for a bad command line.
#pragma once

#include <string>
#include <vector>

#include "cli_options.h"
#include "inputs.h"

namespace longattn::tools {

int run_command(const std::vector<std::string>& args);
int bench_command(const std::vector<std::string>& args);

/// One line describing the problem ("bf16->bf16 batch 1 seq 4096/4096 heads 32/8 dim 128 causal").
std::string describe_problem(const RunOptions& o, const Inputs& in);
/// "cpu (2 threads, avx512)", "reference (2 threads)", "cuda (<device name>)", ...
std::string describe_backend(Backend b, int threads, CpuIsa isa);
/// Mask-aware FLOPs of the problem.
double problem_flops(const RunOptions& o, const Inputs& in);

}  // namespace longattn::tools

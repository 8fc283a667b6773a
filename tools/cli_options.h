// Command-line options of `longattn run` and `longattn bench`, and their parser.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/mask_rule.h"
#include "longattn/longattn.h"

namespace longattn::tools {

/// A bad command line: main prints "longattn: <what>" and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Everything `longattn run` can be asked (defaults: the "meaningful" default run).
struct RunOptions {
  int64_t batch = 1, seq_q = 4096, seq_k = 4096;
  int64_t heads_q = 32, heads_kv = 8, dim = 128, dim_v = 0;  // dim_v 0: same as dim
  DType dtype = DType::bf16;
  bool dtype_set = false;            // --dtype given (converts .npy inputs)
  std::optional<DType> out_dtype;    // unset: input dtype (bf16 for e4m3)
  Mask mask{.causal = true};
  float softcap = 0.0f;
  std::optional<float> scale;
  bool sinks = false, lse = false;
  std::vector<int64_t> ragged_q, ragged_k;  // per-sequence lengths; empty: dense
  int64_t page_size = 0;                    // > 0: paged K/V
  Backend backend = Backend::automatic;
  int threads = 0;                       // Args::num_threads
  int sm_margin = 0;                     // Args::sm_margin
  CpuIsa cpu_isa = CpuIsa::automatic;    // Args::cpu_isa
  int device = 0;  // CUDA device ordinal
  int repeat = 0;  // timed runs; 0: backend default
  int warmup = 1;
  int64_t check_rows = 128;  // sampled (row, head) pairs checked against the reference (0: skip)
  uint64_t seed = 1;
  std::string q_file, k_file, v_file, out_file, lse_out_file, save_inputs_dir;
  bool quiet = false;
  bool json = false;  // one JSON line per result instead of text
  std::string corrupt;  // hidden, tests only: "value" or "nan" damages the output

  bool ragged() const { return !ragged_q.empty(); }
  int64_t dim_v_or_dim() const { return dim_v > 0 ? dim_v : dim; }
  DType resolved_out_dtype() const {
    return out_dtype ? *out_dtype : (dtype == DType::e4m3 ? DType::bf16 : dtype);
  }
  detail::MaskRule mask_rule() const;
};

/// `longattn bench`: a base configuration swept over sequence lengths and backends.
struct BenchOptions {
  RunOptions base;
  std::vector<int64_t> seqs;         // empty: backend default sweep
  std::vector<Backend> backends;     // empty: the best available
  int64_t tokens = 0;                // > 0: batch = tokens / seq (constant batch*seq)
  bool check = false;                // also run the sampled-row check
};

/// Parse `run` options (argv after the subcommand). Throws UsageError.
RunOptions parse_run_options(const std::vector<std::string>& args);
/// Parse `bench` options. Throws UsageError.
BenchOptions parse_bench_options(const std::vector<std::string>& args);

/// Help text of the whole tool.
std::string usage_text();

/// Parsers shared with tests ("bf16" -> DType::bf16, "auto" -> Backend::automatic,
/// "avx512" -> CpuIsa::avx512...).
DType parse_dtype(const std::string& opt, const std::string& v);
Backend parse_backend(const std::string& opt, const std::string& v);
CpuIsa parse_cpu_isa(const std::string& opt, const std::string& v);

}  // namespace longattn::tools

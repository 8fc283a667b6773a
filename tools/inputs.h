// The logical inputs of one run: q, k, v in dense or ragged layout (never paged: paging is a
// storage choice made later by the launch), random or read from .npy files.
#pragma once

#include <cstdint>
#include <vector>

#include "cli_options.h"
#include "host_array.h"

namespace longattn::tools {

struct Inputs {
  // Dense: q (batch, seq_q, heads_q, dim), k/v (batch, seq_k, heads_kv, dim/dim_v).
  // Ragged: q (total_q, heads_q, dim), k/v (total_k, heads_kv, dim/dim_v).
  HostArray q, k, v;
  bool ragged = false;
  std::vector<int64_t> q_lens, k_lens;  // per sequence
  int64_t batch = 0, heads_q = 0, heads_kv = 0, dim = 0, dim_v = 0;
  std::vector<float> sinks;                // heads_q logits, or empty
  float q_descale = 1, k_descale = 1, v_descale = 1;  // e4m3 only: value = stored * descale

  int64_t max_q() const;
  int64_t max_k() const;
  int64_t q_start(int64_t b) const;  // first token of sequence b (ragged), 0 (dense)
  int64_t k_start(int64_t b) const;
};

/// Random inputs (Gaussian; quantized with a descale for e4m3) or the --q/--k/--v files,
/// whose shapes override the shape options. Throws UsageError on inconsistent files.
Inputs make_inputs(RunOptions& o);

/// Writes q.npy, k.npy, v.npy into `dir` (created if missing), in the inputs' dtype.
void save_inputs(const Inputs& in, const std::string& dir);

}  // namespace longattn::tools

// Chunked attention (Mask::chunk_size, llama4) as a batch of its chunks. Where seq_q = seq_k
// is a multiple of the chunk and no window cuts inside one, each query sees the keys of its own
// chunk only (those before it, causal), so the call is plain attention over batch x
// (seq / chunk) sequences of `chunk` rows. Views of the same q / k / v / out memory express
// that batch where the tensors' batches follow each other (batch stride = seq x seq stride, or
// one batch), and the dense kind then runs it: no chunk mask, and short sequences' tile order.
// The LSE's (batch, heads, seq) layout is no view of (batch x chunks, heads, chunk): it goes
// through scratch and one copy (util_kernels.h launch_lse_from_chunks). So do fp8's descales
// ((batch, heads_kv) rows repeated for each chunk: launch_repeat_rows).
#pragma once

#include <cstdint>

#include "common/problem.h"
#include "longattn/longattn.h"

namespace longattn::cuda {

// The call's chunks as sequences (0: the rule does not apply). Dense q / k / v / out, no
// seqused / ragged / paged / context parallelism, no window, seq_q = seq_k a multiple of the
// chunk (a chunk of at least seq_q: one sequence).
int64_t chunk_batch_rows(const Args& a, const detail::Problem& p);

// `a` with q / k / v / out viewed as (batch x seq / rows, rows, heads, dim), no chunk; the LSE
// (if `a` has one) as `lse_scratch`: (batch x seq / rows, heads, rows) contiguous floats; fp8's
// three descales as descale_scratch + i x (batch x seq / rows x heads_kv): contiguous rows.
Args chunk_batch_args(const Args& a, int64_t rows, float* lse_scratch, float* descale_scratch);

}  // namespace longattn::cuda

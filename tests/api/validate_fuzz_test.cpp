// Randomly corrupted arguments never crash: validation either rejects them, or accepts a
// problem whose every access stays inside the caller's buffers. Mutations keep each view
// within its allocation (shrinking shapes and strides, rewriting metadata *contents*), so
// an out-of-bounds read after a passing validation is a validation gap (run this under
// -fsanitize=address to see it; without it the test still catches crashes and NaN leaks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "support/testing.h"

namespace longattn::testing {
namespace {

struct Mutator {
  std::mt19937_64 rng;
  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
  bool coin(int in) { return pick(0, in - 1) == 0; }

  void shrink(Tensor& t) {
    if (!t.present() || t.rank == 0) return;
    const int d = int(pick(0, t.rank - 1));
    if (coin(2)) t.shape[d] = pick(0, t.shape[d]);
    else if (t.stride[d] > 0) t.stride[d] = pick(0, t.stride[d]);
  }
  void scribble(Tensor& t) {  // rewrite one int32 metadata entry
    if (!t.present() || t.numel() == 0) return;
    int64_t off = 0;
    for (int i = 0; i < t.rank; ++i) off += pick(0, t.shape[i] - 1) * t.stride[i];
    static_cast<int32_t*>(t.data)[off] = int32_t(pick(-3, 60));
  }
};

TEST(ValidateFuzz, CorruptedArgumentsNeverCrash) {
  int accepted = 0, rejected = 0;
  for (uint64_t iter = 0; iter < 1500; ++iter) {
    Mutator m{std::mt19937_64(iter)};
    CaseSpec s;
    s.batch = m.pick(1, 3), s.seq_q = m.pick(1, 9), s.seq_k = m.pick(1, 11);
    s.heads_kv = m.pick(1, 2), s.heads_q = s.heads_kv * m.pick(1, 3);
    s.dim_qk = m.pick(1, 9), s.dim_v = m.pick(1, 9);
    s.ragged_q = m.coin(2), s.ragged_k = m.coin(3);
    if (!s.ragged_k && m.coin(2)) s.page_size = m.pick(1, 4);
    s.seqused_k = m.coin(2), s.seqused_q = m.coin(3), s.sinks = m.coin(3), s.lse = m.coin(2);
    s.dtype = m.coin(4) ? DType::e4m3 : DType::bf16;
    s.seed = iter;
    Case c = make_case(s);
    Args a = c.args;
    for (int n = int(m.pick(1, 3)); n > 0; --n) {
      switch (m.pick(0, 9)) {
        case 0: m.shrink(a.q); break;
        case 1: m.shrink(m.coin(2) ? a.k : a.v); break;
        case 2: m.shrink(m.coin(2) ? a.out : a.lse); break;
        case 3: m.scribble(a.cu_seqlens_q); break;
        case 4: m.scribble(a.cu_seqlens_k); break;
        case 5: m.scribble(m.coin(2) ? a.seqused_k : a.seqused_q); break;
        case 6: m.scribble(a.page_table); break;
        case 7: m.shrink(m.coin(2) ? a.page_table : a.seqused_k); break;
        case 8:
          a.mask.causal = m.coin(2), a.mask.window_left = m.pick(-2, 6), a.mask.window_right = m.pick(-2, 6);
          a.mask.chunk_size = m.coin(2) ? 0 : m.pick(-1, 5);
          break;
        case 9: m.shrink(m.coin(2) ? a.cu_seqlens_q : a.cu_seqlens_k); break;
      }
    }
    const Status v = validate(a);
    if (!v.ok()) {
      ++rejected;
      EXPECT_EQ(v.code(), Status::Code::invalid_argument);
      EXPECT_NE(v.message().find(':'), std::string::npos) << v.message();
      continue;
    }
    ++accepted;
    // Accepted: the backends read and write only inside the views, and their results obey
    // the oracle rule (which also proves every output element was written).
    for (Backend b : {Backend::reference, Backend::cpu}) {
      a.backend = b;
      OracleResult r = run_and_check(a);
      ASSERT_TRUE(r.failure.empty()) << "iteration " << iter << ": " << r.failure;
    }
  }
  std::printf("accepted %d, rejected %d\n", accepted, rejected);
  // Both outcomes must be common, or the fuzzer is not exploring anything.
  EXPECT_GT(accepted, 200);
  EXPECT_GT(rejected, 200);
}

}  // namespace
}  // namespace longattn::testing

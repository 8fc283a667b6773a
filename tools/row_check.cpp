#include "row_check.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "common/problem.h"
#include "random.h"
#include "reference/reference.h"

namespace longattn::tools {
namespace {

constexpr int64_t kBlock = 8;

struct Block {
  int64_t b, h, i0, i1;
};

std::vector<Block> sample_blocks(const Inputs& in, int64_t rows, uint64_t seed) {
  std::vector<Block> blocks;
  const int64_t batch = static_cast<int64_t>(in.q_lens.size());
  int64_t longest = 0;
  for (int64_t b = 1; b < batch; ++b)
    if (in.q_lens[b] > in.q_lens[longest]) longest = b;
  const int64_t L = batch ? in.q_lens[longest] : 0;
  if (L == 0 || rows <= 0) return blocks;
  // First and last rows: the ends of the mask (no or all keys visible) are where bugs live.
  blocks.push_back({longest, 0, 0, std::min<int64_t>(1, L)});
  blocks.push_back({longest, in.heads_q - 1, L - 1, L});
  Rng rng(seed ^ 0xC0FFEEull);
  int64_t have = 2;
  while (have < rows) {
    const int64_t b = rng.below(batch);
    if (in.q_lens[b] == 0) continue;
    const int64_t h = rng.below(in.heads_q);
    const int64_t n = std::min({kBlock, in.q_lens[b], rows - have});
    const int64_t i0 = rng.below(in.q_lens[b] - n + 1);
    blocks.push_back({b, h, i0, i0 + n});
    have += n;
  }
  return blocks;
}

}  // namespace

CheckResult check_rows(const Args& host_args, const Inputs& in, const HostArray& out,
                       const HostArray* lse, int64_t rows, uint64_t seed) {
  CheckResult r;
  for (int64_t i = 0; i < out.numel(); ++i) r.nan_out += std::isnan(out.get(i)) ? 1 : 0;
  if (lse)
    for (int64_t i = 0; i < lse->numel(); ++i) r.nan_lse += std::isnan(lse->get(i)) ? 1 : 0;

  detail::Problem p;
  Status st = detail::build_problem(host_args, &p);
  if (!st.ok()) {
    r.pass = false;
    r.failure = "reference: " + st.message();
    return r;
  }
  const int64_t dv = p.dim_v;
  double lse_naive_err = 0;
  bool lse_inf_mismatch = false;
  for (const Block& bl : sample_blocks(in, rows, seed)) {
    const int64_t n = bl.i1 - bl.i0;
    std::vector<double> ref(size_t(n * dv)), ref_lse(static_cast<size_t>(n));
    std::vector<float> naive(size_t(n * dv)), naive_lse(static_cast<size_t>(n));
    detail::reference_rows(host_args, p, bl.b, bl.h, bl.i0, bl.i1, ref.data(), ref_lse.data());
    detail::emulated_rows(host_args, p, bl.b, bl.h, bl.i0, bl.i1, naive.data(), naive_lse.data());
    const detail::SeqInfo s = detail::seq_info(host_args, p, bl.b);
    for (int64_t r_i = 0; r_i < n; ++r_i) {
      const int64_t i = bl.i0 + r_i;
      const int64_t oo = detail::out_offset(host_args, p, bl.b, s, i, bl.h);
      for (int64_t d = 0; d < dv; ++d) {
        const double ref_v = ref[size_t(r_i * dv + d)];
        const double got = out.get(oo + d);
        // NaN compares false: count it as an infinite error.
        const double e = std::isnan(got) ? INFINITY : std::fabs(got - ref_v);
        r.max_err = std::max(r.max_err, e);
        r.naive_err = std::max(r.naive_err, std::fabs(double(naive[size_t(r_i * dv + d)]) - ref_v));
      }
      if (lse) {
        const double want = ref_lse[size_t(r_i)];
        const double got = lse->get(detail::lse_offset(host_args, p, bl.b, s, i, bl.h));
        if (std::isinf(want) || std::isinf(got)) {
          if (!(std::isinf(want) && std::isinf(got) && (want < 0) == (got < 0))) lse_inf_mismatch = true;
        } else {
          r.lse_err = std::max(r.lse_err, std::isnan(got) ? INFINITY : std::fabs(got - want));
          lse_naive_err = std::max(lse_naive_err, std::fabs(double(naive_lse[size_t(r_i)]) - want));
        }
      }
    }
    r.rows += n;
  }
  r.bound = 2.0 * r.naive_err + kCheckAtol;
  r.lse_bound = 2.0 * lse_naive_err + kCheckAtol;

  std::ostringstream why;
  if (r.nan_out) why << r.nan_out << " output elements are NaN (unwritten or wrong); ";
  if (r.nan_lse) why << r.nan_lse << " LSE elements are NaN; ";
  if (!(r.max_err <= r.bound)) why << "max error " << r.max_err << " > bound " << r.bound << "; ";
  if (lse && !(r.lse_err <= r.lse_bound))
    why << "LSE error " << r.lse_err << " > bound " << r.lse_bound << "; ";
  if (lse_inf_mismatch) why << "LSE -inf where the reference is finite or vice versa; ";
  r.failure = why.str();
  if (!r.failure.empty()) r.failure.resize(r.failure.size() - 2);
  r.pass = r.failure.empty();
  return r;
}

}  // namespace longattn::tools

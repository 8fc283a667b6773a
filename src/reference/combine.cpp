// Reference merge of partial attention results (longattn::combine), in float64.
#include <cmath>
#include <limits>
#include <vector>

#include "common/problem.h"

namespace longattn::detail {

Status reference_combine(const CombineArgs& a) {
  const Tensor &op = a.out_partial, &lp = a.lse_partial;
  const int64_t splits = op.shape[0], tokens = op.shape[1], heads = op.shape[2], dim = op.shape[3];
  const double neg_inf = -std::numeric_limits<double>::infinity();
  std::vector<double> acc(static_cast<size_t>(dim)), lses(static_cast<size_t>(splits));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      double m = neg_inf;
      for (int64_t s = 0; s < splits; ++s) {
        lses[size_t(s)] = load_as_double(lp.data, DType::f32, s * lp.stride[0] + h * lp.stride[1] + t * lp.stride[2]);
        if (lses[size_t(s)] > m || std::isnan(lses[size_t(s)])) m = lses[size_t(s)];
      }
      for (int64_t d = 0; d < dim; ++d) acc[size_t(d)] = 0.0;
      double sum = 0.0;
      if (m != neg_inf) {
        for (int64_t s = 0; s < splits; ++s) {
          // An empty partial (lse -inf) contributes nothing -- its output is never read, so
          // whatever it holds (even NaN) cannot leak into the result.
          if (lses[size_t(s)] == neg_inf) continue;
          const double w = std::exp(lses[size_t(s)] - m);
          sum += w;
          const int64_t base = s * op.stride[0] + t * op.stride[1] + h * op.stride[2];
          for (int64_t d = 0; d < dim; ++d) acc[size_t(d)] += w * load_as_double(op.data, op.dtype, base + d);
        }
      }
      const double inv = sum > 0.0 ? 1.0 / sum : 0.0;
      const int64_t ob = t * a.out.stride[0] + h * a.out.stride[1];
      for (int64_t d = 0; d < dim; ++d) store_from_float(a.out.data, a.out.dtype, ob + d, float(acc[size_t(d)] * inv));
      if (a.lse.present()) {
        const double lse = m == neg_inf ? neg_inf : m + std::log(sum);
        store_from_float(a.lse.data, DType::f32, h * a.lse.stride[0] + t * a.lse.stride[1], float(lse));
      }
    }
  return Status::Ok();
}

}  // namespace longattn::detail

// Downstream use of the installed package: one forward on small random float32 inputs,
// checked against a direct float64 evaluation, and one invalid call that must be rejected.
#include <longattn/longattn.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  // Odd sizes and GQA (4 query heads over 2 kv heads), causal bottom-right (seq_q < seq_k).
  const int64_t b = 2, sq = 5, sk = 9, hq = 4, hk = 2, d = 16;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  std::vector<float> q(b * sq * hq * d), k(b * sk * hk * d), v(b * sk * hk * d);
  for (auto* x : {&q, &k, &v})
    for (float& e : *x) e = normal(gen);
  std::vector<float> out(b * sq * hq * d, NAN);

  longattn::Args args;
  args.q = longattn::make_tensor(q.data(), longattn::DType::f32, {b, sq, hq, d});
  args.k = longattn::make_tensor(k.data(), longattn::DType::f32, {b, sk, hk, d});
  args.v = longattn::make_tensor(v.data(), longattn::DType::f32, {b, sk, hk, d});
  args.out = longattn::make_tensor(out.data(), longattn::DType::f32, {b, sq, hq, d});
  args.mask.causal = true;
  longattn::Status s = longattn::forward(args);
  if (!s.ok()) {
    std::printf("forward failed: %s\n", s.message().c_str());
    return 1;
  }

  double max_err = 0;
  const double scale = 1.0 / std::sqrt(double(d));
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t i = 0; i < sq; ++i) {
        const int64_t visible = i + sk - sq + 1;  // bottom-right causal
        const float* qr = &q[((bi * sq + i) * hq + h) * d];
        std::vector<double> p(visible);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < visible; ++j) {
          const float* kr = &k[((bi * sk + j) * hk + h / (hq / hk)) * d];
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += double(qr[e]) * kr[e];
          p[j] = dot * scale;
          mx = std::fmax(mx, p[j]);
        }
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < visible; ++j) acc += p[j] * v[((bi * sk + j) * hk + h / (hq / hk)) * d + e];
          const double got = out[((bi * sq + i) * hq + h) * d + e];
          max_err = std::isnan(got) ? INFINITY : std::fmax(max_err, std::fabs(got - acc / sum));
        }
      }
  std::printf("longattn %s: max error %.3g\n", longattn::version(), max_err);
  if (!(max_err < 1e-4)) return 1;

  // Invalid input: rejected with a message naming the argument.
  args.softcap = -1.0f;
  s = longattn::forward(args);
  if (s.ok() || s.message().rfind("softcap:", 0) != 0) {
    std::printf("bad softcap was not rejected properly: '%s'\n", s.message().c_str());
    return 1;
  }
  std::printf("downstream OK\n");
  return 0;
}

// K/V beyond 2^31 elements (issue 5: 64-bit offsets). One K and one V buffer of
// S = 2^21 + 336 tokens x 8 kv heads x 128 (2^31 + 344,064 elements each, 4 GiB in bf16) serve
// three layouts of the same bytes: dense (1, S, 8, 128), a paged cache of 16-token pages
// under a reversed page table (the path of small pages: 16-row TMA boxes), and a packed
// ragged batch of two sequences. 256 queries at the end (bottom-right causal: each row sees
// ~2M keys), 16 query heads. "Needle" keys beyond element 2^31 (a key equal to a checked
// query row, logit ~34 against ~5 for the best random key) make each checked row's output
// and LSE depend on memory past 2^31 elements, so an offset that wraps at 32 bits changes
// them. Rows sampled at both ends of both sequences, first and last heads, against the
// float64 reference under the oracle rule; every output element must be written.
// Needs ~9 GiB of device memory and ~30 GiB of host memory; runs alone as HugeKV.*.
// HugeKVLogic.* runs the same problem with S = 4432 on the CPU backend (host only): the
// check passes for a correct backend and fails for one that misses the needles.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "common/problem.h"
#include "reference/gather.h"
#include "reference/reference.h"

namespace longattn {
namespace {

constexpr int64_t kHkv = 8, kHq = 16, kD = 128, kSq = 256, kPage = 16;
constexpr int64_t kHugeS = (int64_t(1) << 21) + 336;
static_assert(kHugeS * kHkv * kD > (int64_t(1) << 31), "K and V must each exceed 2^31 elements");

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer: counter-based, so filling is parallel
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// bf16 values uniform in [-amp, amp), element i of stream `seed`.
void fill(std::vector<uint16_t>& v, uint64_t seed, float amp) {
  const int64_t n = int64_t(v.size()), chunk = int64_t(1) << 22;
  detail::parallel_for((n + chunk - 1) / chunk, 0, [&](int64_t c) {
    for (int64_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i) {
      const float u = float(mix64(seed * 0x100000001B3ull + uint64_t(i)) >> 40) * (1.f / 16777216.f);
      detail::store_from_float(v.data(), DType::bf16, i, amp * (2.f * u - 1.f));
    }
  });
}

// Checked rows (packed query index) and heads; needles for them at physical key rows
// S - 256 + i - 2 (h % 2) (visible to row i; distinct for these rows; for the huge S all past
// element 2^31).
const int64_t kRows[] = {0, 1, 100, 199, 200, 254, 255};
const int64_t kHeads[] = {0, 7, 14, 15};

struct Layout {
  const char* name;
  bool paged, ragged;
};
const Layout kLayouts[] = {{"dense", false, false}, {"paged16", true, false}, {"ragged", false, true}};

// Host inputs of the problem with S keys (S a multiple of the page size).
struct HugeInputs {
  int64_t s;
  std::vector<uint16_t> q, k, v;
  std::vector<int32_t> pt, cu_q, cu_k;
  explicit HugeInputs(int64_t s_) : s(s_), q(static_cast<size_t>(kSq * kHq * kD)), k(static_cast<size_t>(s_ * kHkv * kD)),
                                    v(static_cast<size_t>(s_ * kHkv * kD)), pt(static_cast<size_t>(s_ / kPage)) {
    fill(q, 1, 3.f);
    fill(k, 2, 1.f);
    fill(v, 3, 1.f);
    for (int64_t i : kRows)
      for (int64_t h : kHeads)  // needle: K row of kv head h / 2 = query row (i, h)
        std::memcpy(&k[size_t(((s - kSq + i - 2 * (h % 2)) * kHkv + h / 2) * kD)], &q[size_t((i * kHq + h) * kD)], kD * 2);
    const int64_t n = s / kPage;
    for (int64_t i = 0; i < n; ++i) pt[size_t(i)] = int32_t(n - 1 - i);
    cu_q = {0, 200, int32_t(kSq)};
    cu_k = {0, int32_t(s - 1000), int32_t(s)};
  }
};

// Args of layout L over the given buffers (device or host), out / lse included.
Args layout_args(const Layout& L, int64_t s, void* q, void* k, void* v, void* out, void* lse, void* pt, void* cq,
                 void* ck, Device dev) {
  Args a;
  if (L.ragged) {
    a.q = make_tensor(q, DType::bf16, {kSq, kHq, kD}, dev);
    a.out = make_tensor(out, DType::bf16, {kSq, kHq, kD}, dev);
    a.lse = make_tensor(lse, DType::f32, {kHq, kSq}, dev);
    a.k = make_tensor(k, DType::bf16, {s, kHkv, kD}, dev);
    a.v = make_tensor(v, DType::bf16, {s, kHkv, kD}, dev);
    a.cu_seqlens_q = make_tensor(cq, DType::i32, {3}, dev);
    a.cu_seqlens_k = make_tensor(ck, DType::i32, {3}, dev);
    a.max_seqlen_q = 200;
    a.max_seqlen_k = s - 1000;
  } else {
    a.q = make_tensor(q, DType::bf16, {1, kSq, kHq, kD}, dev);
    a.out = make_tensor(out, DType::bf16, {1, kSq, kHq, kD}, dev);
    a.lse = make_tensor(lse, DType::f32, {1, kHq, kSq}, dev);
    if (L.paged) {
      a.k = make_tensor(k, DType::bf16, {s / kPage, kPage, kHkv, kD}, dev);
      a.v = make_tensor(v, DType::bf16, {s / kPage, kPage, kHkv, kD}, dev);
      a.page_table = make_tensor(pt, DType::i32, {1, s / kPage}, dev);
    } else {
      a.k = make_tensor(k, DType::bf16, {1, s, kHkv, kD}, dev);
      a.v = make_tensor(v, DType::bf16, {1, s, kHkv, kD}, dev);
    }
  }
  a.mask.causal = true;  // bottom-right: the queries are the last positions
  return a;
}

// Checks out / lse (computed by some backend for layout L) on the sampled rows against the
// float64 reference on the host inputs; returns "" or the failures. Prints one line per
// (sequence, head).
std::string check_rows(const Layout& L, HugeInputs& in, const std::vector<uint16_t>& out, const std::vector<float>& lse) {
  std::ostringstream fail;
  int64_t nan_out = 0, nan_lse = 0;
  for (size_t i = 0; i < out.size(); ++i) nan_out += std::isnan(detail::load_as_float(out.data(), DType::bf16, int64_t(i)));
  for (float x : lse) nan_lse += std::isnan(x);
  if (nan_out || nan_lse) fail << nan_out << " NaN outputs, " << nan_lse << " NaN LSEs (unwritten?); ";
  std::vector<uint16_t> scratch(out.size());
  std::vector<float> lscratch(lse.size());
  Args h = layout_args(L, in.s, in.q.data(), in.k.data(), in.v.data(), scratch.data(), lscratch.data(), in.pt.data(),
                       in.cu_q.data(), in.cu_k.data(), Device{});
  h.backend = Backend::reference;
  detail::Problem p;
  if (Status st = detail::build_problem(h, &p); !st.ok()) return "reference problem: " + st.message();
  struct Item {
    int64_t b, h;
    std::vector<int64_t> rows;  // within sequence b
    double err = 0, naive = 0, lse_err = 0, lse_naive = 0;
  };
  std::vector<Item> items;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t hh : kHeads) {
      Item it{b, hh, {}};
      const detail::SeqInfo si = detail::seq_info(h, p, b);
      for (int64_t i : kRows)
        if (i >= si.q_start && i < si.q_start + si.q_len) it.rows.push_back(i - si.q_start);
      if (!it.rows.empty()) items.push_back(it);
    }
  // One K/V gather (4 GiB in float64 at the huge size) per item: 4 at a time.
  detail::parallel_for(int64_t(items.size()), 4, [&](int64_t k) {
    Item& it = items[size_t(k)];
    const int64_t n = int64_t(it.rows.size());
    const detail::SeqInfo si = detail::seq_info(h, p, it.b);
    std::vector<double> ref(static_cast<size_t>(n * kD)), rl(static_cast<size_t>(n));
    std::vector<float> emu(static_cast<size_t>(n * kD)), el(static_cast<size_t>(n));
    detail::reference_rows_at(h, p, it.b, it.h, it.rows.data(), n, ref.data(), rl.data());
    detail::emulated_rows_at(h, p, it.b, it.h, it.rows.data(), n, emu.data(), el.data());
    for (int64_t r = 0; r < n; ++r) {
      const int64_t i = it.rows[size_t(r)];
      const int64_t oo = detail::out_offset(h, p, it.b, si, i, it.h);
      for (int64_t d = 0; d < kD; ++d) {
        const double e = std::fabs(double(detail::load_as_float(out.data(), DType::bf16, oo + d)) - ref[size_t(r * kD + d)]);
        it.err = std::max(it.err, std::isnan(e) ? INFINITY : e);
        it.naive = std::max(it.naive, std::fabs(double(emu[size_t(r * kD + d)]) - ref[size_t(r * kD + d)]));
      }
      const double g = lse[size_t(detail::lse_offset(h, p, it.b, si, i, it.h))];
      it.lse_err = std::max(it.lse_err, std::isnan(g) ? INFINITY : std::fabs(g - rl[size_t(r)]));
      it.lse_naive = std::max(it.lse_naive, std::fabs(double(el[size_t(r)]) - rl[size_t(r)]));
    }
  });
  for (const Item& it : items) {
    printf("%-8s S %lld b%lld h%-2lld rows %zu: err %.2e naive %.2e, lse err %.2e naive %.2e\n", L.name,
           (long long)in.s, (long long)it.b, (long long)it.h, it.rows.size(), it.err, it.naive, it.lse_err, it.lse_naive);
    if (!(it.err <= 2 * it.naive + 1e-3)) fail << "b" << it.b << " h" << it.h << " out err " << it.err << "; ";
    if (!(it.lse_err <= 2 * it.lse_naive + 1e-3)) fail << "b" << it.b << " h" << it.h << " lse err " << it.lse_err << "; ";
  }
  return fail.str();
}

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t n) {
    if (cudaMalloc(&p, n) != cudaSuccess) p = nullptr;
  }
  ~Dev() { cudaFree(p); }
};

TEST(HugeKV, Above2e31ElementsDensePagedRagged) {
  int ndev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
      prop.major < 9)
    GTEST_SKIP() << "no sm_90 device";
  if (prop.totalGlobalMem < (size_t(12) << 30)) GTEST_SKIP() << "needs 12 GiB of device memory";
  HugeInputs in(kHugeS);
  const size_t ob = size_t(kSq * kHq * kD * 2), lb = size_t(kSq * kHq * 4);
  Dev dq(in.q.size() * 2), dk(in.k.size() * 2), dv(in.v.size() * 2), dout(ob), dlse(lb), dpt(in.pt.size() * 4), dcq(12),
      dck(12);
  ASSERT_TRUE(dq.p && dk.p && dv.p && dout.p && dlse.p && dpt.p && dcq.p && dck.p) << "cudaMalloc";
  ASSERT_EQ(cudaMemcpy(dq.p, in.q.data(), in.q.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dk.p, in.k.data(), in.k.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv.p, in.v.data(), in.v.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dpt.p, in.pt.data(), in.pt.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dcq.p, in.cu_q.data(), 12, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dck.p, in.cu_k.data(), 12, cudaMemcpyHostToDevice), cudaSuccess);
  for (const Layout& L : kLayouts) {
    SCOPED_TRACE(L.name);
    Args a = layout_args(L, in.s, dq.p, dk.p, dv.p, dout.p, dlse.p, dpt.p, dcq.p, dck.p, Device{DeviceKind::cuda, 0});
    a.backend = Backend::cuda;
    ASSERT_EQ(cudaMemset(dout.p, 0xFF, ob), cudaSuccess);  // NaN
    ASSERT_EQ(cudaMemset(dlse.p, 0xFF, lb), cudaSuccess);
    Status st = forward(a);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> out(ob / 2);
    std::vector<float> lse(lb / 4);
    ASSERT_EQ(cudaMemcpy(out.data(), dout.p, ob, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(lse.data(), dlse.p, lb, cudaMemcpyDeviceToHost), cudaSuccess);
    const std::string f = check_rows(L, in, out, lse);
    EXPECT_TRUE(f.empty()) << f;
  }
}

// Host only: the same problem at S = 4432 (277 pages) on the CPU backend passes the check,
// and an output that ignores the needles (V of the needle rows replaced) fails it.
TEST(HugeKVLogic, SmallProblemOnCpuBackend) {
  HugeInputs in(4432);
  for (const Layout& L : kLayouts) {
    SCOPED_TRACE(L.name);
    std::vector<uint16_t> out(static_cast<size_t>(kSq * kHq * kD), 0xFFFF);
    std::vector<float> lse(static_cast<size_t>(kSq * kHq), NAN);
    Args a = layout_args(L, in.s, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(), in.pt.data(),
                         in.cu_q.data(), in.cu_k.data(), Device{});
    a.backend = Backend::cpu;
    ASSERT_TRUE(forward(a).ok());
    EXPECT_EQ(check_rows(L, in, out, lse), "");
  }
  // A backend that read other rows than the needles' (here: V of needle rows changed after
  // the run) must fail: the needles dominate the checked rows.
  std::vector<uint16_t> out(static_cast<size_t>(kSq * kHq * kD), 0xFFFF);
  std::vector<float> lse(static_cast<size_t>(kSq * kHq), NAN);
  Args a = layout_args(kLayouts[0], in.s, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(), in.pt.data(),
                       in.cu_q.data(), in.cu_k.data(), Device{});
  a.backend = Backend::cpu;
  ASSERT_TRUE(forward(a).ok());
  for (int64_t i : kRows)
    for (int64_t h : kHeads)
      for (int64_t d = 0; d < kD; ++d) {
        const size_t e = size_t(((in.s - kSq + i - 2 * (h % 2)) * kHkv + h / 2) * kD + d);
        detail::store_from_float(in.v.data(), DType::bf16, int64_t(e), -detail::load_as_float(in.v.data(), DType::bf16, int64_t(e)) + 0.5f);
      }
  EXPECT_NE(check_rows(kLayouts[0], in, out, lse), "");
}

}  // namespace
}  // namespace longattn

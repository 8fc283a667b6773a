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
// Needs ~9 GiB of device memory and ~20 GiB of host memory; runs alone as HugeKV.*.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/problem.h"
#include "reference/gather.h"
#include "reference/reference.h"

namespace longattn {
namespace {

constexpr int64_t kS = (int64_t(1) << 21) + 336, kHkv = 8, kHq = 16, kD = 128, kSq = 256, kPage = 16;
constexpr int64_t kKvElems = kS * kHkv * kD;
static_assert(kKvElems > (int64_t(1) << 31), "K and V must each exceed 2^31 elements");
static_assert(kS % kPage == 0, "the buffer is a whole number of pages");

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

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t n) {
    if (cudaMalloc(&p, n) != cudaSuccess) p = nullptr;
  }
  ~Dev() { cudaFree(p); }
};

// Checked rows (packed query index) and heads; needles for them at physical key rows
// S - 256 + i - 2 (h % 2) (visible to row i; distinct for these rows; all past element 2^31).
const int64_t kRows[] = {0, 1, 100, 199, 200, 254, 255};
const int64_t kHeads[] = {0, 7, 14, 15};
int64_t needle_row(int64_t i, int64_t h) { return kS - kSq + i - 2 * (h % 2); }

struct Layout {
  const char* name;
  bool paged, ragged;
};

TEST(HugeKV, Above2e31ElementsDensePagedRagged) {
  int ndev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
      prop.major < 9)
    GTEST_SKIP() << "no sm_90 device";
  if (prop.totalGlobalMem < (size_t(12) << 30)) GTEST_SKIP() << "needs 12 GiB of device memory";

  std::vector<uint16_t> hq(size_t(kSq * kHq * kD)), hk(static_cast<size_t>(kKvElems)), hv(static_cast<size_t>(kKvElems));
  fill(hq, 1, 3.f);
  fill(hk, 2, 1.f);
  fill(hv, 3, 1.f);
  for (int64_t i : kRows)
    for (int64_t h : kHeads)  // needle: K row of kv head h / 2 = query row (i, h)
      std::memcpy(&hk[size_t((needle_row(i, h) * kHkv + h / 2) * kD)], &hq[size_t((i * kHq + h) * kD)], kD * 2);
  const int64_t num_pages = kS / kPage;
  std::vector<int32_t> pt(static_cast<size_t>(num_pages));
  for (int64_t i = 0; i < num_pages; ++i) pt[size_t(i)] = int32_t(num_pages - 1 - i);
  const std::vector<int32_t> cu_q = {0, 200, int32_t(kSq)}, cu_k = {0, int32_t(kS - 1000), int32_t(kS)};

  Dev dq(hq.size() * 2), dk(hk.size() * 2), dv(hv.size() * 2), dout(size_t(kSq * kHq * kD * 2)), dlse(size_t(kSq * kHq * 4)),
      dpt(pt.size() * 4), dcq(12), dck(12);
  ASSERT_TRUE(dq.p && dk.p && dv.p && dout.p && dlse.p && dpt.p && dcq.p && dck.p) << "cudaMalloc";
  ASSERT_EQ(cudaMemcpy(dq.p, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dk.p, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv.p, hv.data(), hv.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dpt.p, pt.data(), pt.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dcq.p, cu_q.data(), 12, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dck.p, cu_k.data(), 12, cudaMemcpyHostToDevice), cudaSuccess);

  const Device g{DeviceKind::cuda, 0};
  for (const Layout& L : {Layout{"dense", false, false}, Layout{"paged16", true, false}, Layout{"ragged", false, true}}) {
    SCOPED_TRACE(L.name);
    Args a;
    if (L.ragged) {
      a.q = make_tensor(dq.p, DType::bf16, {kSq, kHq, kD}, g);
      a.out = make_tensor(dout.p, DType::bf16, {kSq, kHq, kD}, g);
      a.lse = make_tensor(dlse.p, DType::f32, {kHq, kSq}, g);
      a.k = make_tensor(dk.p, DType::bf16, {kS, kHkv, kD}, g);
      a.v = make_tensor(dv.p, DType::bf16, {kS, kHkv, kD}, g);
      a.cu_seqlens_q = make_tensor(dcq.p, DType::i32, {3}, g);
      a.cu_seqlens_k = make_tensor(dck.p, DType::i32, {3}, g);
      a.max_seqlen_q = 200;
      a.max_seqlen_k = kS - 1000;
    } else {
      a.q = make_tensor(dq.p, DType::bf16, {1, kSq, kHq, kD}, g);
      a.out = make_tensor(dout.p, DType::bf16, {1, kSq, kHq, kD}, g);
      a.lse = make_tensor(dlse.p, DType::f32, {1, kHq, kSq}, g);
      if (L.paged) {
        a.k = make_tensor(dk.p, DType::bf16, {num_pages, kPage, kHkv, kD}, g);
        a.v = make_tensor(dv.p, DType::bf16, {num_pages, kPage, kHkv, kD}, g);
        a.page_table = make_tensor(dpt.p, DType::i32, {1, num_pages}, g);
      } else {
        a.k = make_tensor(dk.p, DType::bf16, {1, kS, kHkv, kD}, g);
        a.v = make_tensor(dv.p, DType::bf16, {1, kS, kHkv, kD}, g);
      }
    }
    a.mask.causal = true;  // bottom-right: the queries are the last positions
    a.backend = Backend::cuda;
    ASSERT_EQ(cudaMemset(dout.p, 0xFF, size_t(kSq * kHq * kD * 2)), cudaSuccess);
    ASSERT_EQ(cudaMemset(dlse.p, 0xFF, size_t(kSq * kHq * 4)), cudaSuccess);
    Status st = forward(a);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> out(size_t(kSq * kHq * kD));
    std::vector<float> lse(size_t(kSq * kHq));
    ASSERT_EQ(cudaMemcpy(out.data(), dout.p, out.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(lse.data(), dlse.p, lse.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    int64_t nan_out = 0, nan_lse = 0;
    for (size_t i = 0; i < out.size(); ++i) nan_out += std::isnan(detail::load_as_float(out.data(), DType::bf16, int64_t(i)));
    for (float x : lse) nan_lse += std::isnan(x);
    EXPECT_EQ(nan_out, 0) << "unwritten or NaN outputs";
    EXPECT_EQ(nan_lse, 0) << "unwritten or NaN LSEs";

    // The same problem on host copies: float64 reference and the naive bf16 computation.
    Args h = a;
    std::vector<uint16_t> scratch(out.size());
    std::vector<float> lscratch(lse.size());
    h.q.data = hq.data();
    h.k.data = hk.data();
    h.v.data = hv.data();
    h.out.data = scratch.data();
    h.lse.data = lscratch.data();
    h.page_table.data = L.paged ? pt.data() : nullptr;
    h.cu_seqlens_q.data = L.ragged ? const_cast<int32_t*>(cu_q.data()) : nullptr;
    h.cu_seqlens_k.data = L.ragged ? const_cast<int32_t*>(cu_k.data()) : nullptr;
    for (Tensor* t : {&h.q, &h.k, &h.v, &h.out, &h.lse, &h.page_table, &h.cu_seqlens_q, &h.cu_seqlens_k})
      t->device = Device{};
    h.backend = Backend::reference;
    detail::Problem p;
    ASSERT_TRUE(detail::build_problem(h, &p).ok());
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
        items.push_back(it);
      }
    // One K/V gather (4 GiB in float64) per item: 4 at a time.
    detail::parallel_for(int64_t(items.size()), 4, [&](int64_t k) {
      Item& it = items[size_t(k)];
      const int64_t n = int64_t(it.rows.size());
      if (n == 0) return;
      const detail::SeqInfo si = detail::seq_info(h, p, it.b);
      std::vector<double> ref(size_t(n * kD)), rl(static_cast<size_t>(n));
      std::vector<float> emu(size_t(n * kD)), el(static_cast<size_t>(n));
      detail::reference_rows_at(h, p, it.b, it.h, it.rows.data(), n, ref.data(), rl.data());
      detail::emulated_rows_at(h, p, it.b, it.h, it.rows.data(), n, emu.data(), el.data());
      for (int64_t r = 0; r < n; ++r) {
        const int64_t i = it.rows[size_t(r)];
        const int64_t oo = detail::out_offset(h, p, it.b, si, i, it.h);
        for (int64_t d = 0; d < kD; ++d) {
          double e = std::fabs(double(detail::load_as_float(out.data(), DType::bf16, oo + d)) - ref[size_t(r * kD + d)]);
          it.err = std::max(it.err, std::isnan(e) ? INFINITY : e);
          it.naive = std::max(it.naive, std::fabs(double(emu[size_t(r * kD + d)]) - ref[size_t(r * kD + d)]));
        }
        const double g = lse[size_t(detail::lse_offset(h, p, it.b, si, i, it.h))];
        it.lse_err = std::max(it.lse_err, std::isnan(g) ? INFINITY : std::fabs(g - rl[size_t(r)]));
        it.lse_naive = std::max(it.lse_naive, std::fabs(double(el[size_t(r)]) - rl[size_t(r)]));
      }
    });
    for (const Item& it : items) {
      printf("%-8s b%lld h%-2lld rows %zu: err %.2e naive %.2e, lse err %.2e naive %.2e\n", L.name, (long long)it.b,
             (long long)it.h, it.rows.size(), it.err, it.naive, it.lse_err, it.lse_naive);
      EXPECT_LE(it.err, 2 * it.naive + 1e-3) << "b " << it.b << " head " << it.h;
      EXPECT_LE(it.lse_err, 2 * it.lse_naive + 1e-3) << "b " << it.b << " head " << it.h;
    }
  }
}

}  // namespace
}  // namespace longattn

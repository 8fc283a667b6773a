// Paged K/V on the GPU (the ragged feature kernel with KernelConfig kPaged): problems from
// tests/support make_case (shuffled page table, spare pages), copied to the device, checked
// against the float64 reference on every row, with every key no output reads set to NaN /
// Inf. Page sizes of every kind: 1, 3, powers of two below, at and above the kernel's K/V
// tile (block_n: 128 for head dims 64 / 128, 64 for 256), and multiples of none of them;
// Args::check_page_table reports a bad entry.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/overrides.h"
#include "cuda/sm90/page_math.h"
#include "cuda/sm90/tile_size.h"
#include "device_case.h"
#include "gpu_case.h"
#include "support/testing.h"

namespace longattn {
namespace {

using gputest::DeviceCase;
using gputest::have_sm90;
using gputest::to_device;
using testing::Case;
using testing::CaseSpec;

CaseSpec P(int64_t batch, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, int64_t page, bool causal,
           bool used, uint64_t seed) {
  CaseSpec s;
  s.batch = batch;
  s.seq_q = sq;
  s.seq_k = sk;
  s.heads_q = hq;
  s.heads_kv = hkv;
  s.dim_qk = s.dim_v = d;
  s.page_size = page;
  s.mask.causal = causal;
  s.seqused_k = used;
  s.amp = 1.5f;
  s.seed = seed;
  return s;
}

std::vector<CaseSpec> paged_cases() {
  std::vector<CaseSpec> v;
  v.push_back(P(3, 300, 700, 4, 2, 128, 128, true, true, 1));    // page = block_n, GQA, seqused_k
  v.push_back(P(2, 257, 1000, 4, 4, 128, 256, false, false, 2));  // page = 2 block_n
  v.push_back(P(3, 517, 389, 4, 1, 128, 512, false, true, 3));    // one page per sequence, MQA
  v.push_back(P(2, 333, 555, 6, 2, 64, 128, true, true, 4));
  v.push_back(P(2, 129, 901, 4, 2, 64, 256, false, false, 5));
  v.push_back(P(3, 200, 450, 4, 2, 256, 64, true, true, 6));
  v.push_back(P(2, 77, 333, 4, 4, 256, 256, false, false, 7));
  {
    CaseSpec s = P(2, 400, 400, 4, 2, 128, 128, true, false, 8);  // top-left causal
    s.mask.align = CausalAlign::top_left;
    v.push_back(s);
  }
  {
    CaseSpec s = P(4, 300, 600, 4, 2, 128, 128, true, true, 9);  // ragged q + paged k
    s.ragged_q = true;
    v.push_back(s);
  }
  {
    CaseSpec s = P(2, 260, 900, 4, 2, 128, 256, true, true, 10);  // f16 -> f32, sinks, softcap, window
    s.dtype = DType::f16;
    s.out_dtype = DType::f32;
    s.sinks = true;
    s.softcap = 15.f;
    s.mask.window_left = 200;
    v.push_back(s);
  }
  // Any page size (boxes of the largest power of two dividing the page, mainloop.cuh
  // load_paged): 1, 3 (single-row boxes), 16 (the vLLM default), 24, 48, 64 (below the
  // 128-key tile), 100, 200, 384 (3 tiles per page); every head dim, seqused_k, ragged q,
  // both alignments, windows, chunks, sinks, softcap.
  v.push_back(P(3, 200, 450, 4, 2, 128, 16, true, true, 11));
  v.push_back(P(2, 300, 517, 4, 2, 128, 16, false, false, 12));
  v.push_back(P(2, 100, 300, 4, 2, 128, 1, true, true, 13));
  v.push_back(P(2, 150, 400, 4, 1, 128, 3, false, true, 14));
  v.push_back(P(3, 250, 700, 6, 2, 64, 48, true, true, 15));
  v.push_back(P(2, 333, 555, 4, 2, 256, 100, false, true, 16));
  v.push_back(P(2, 200, 1000, 4, 2, 128, 384, true, true, 17));
  v.push_back(P(2, 129, 900, 4, 2, 64, 200, false, true, 18));
  v.push_back(P(2, 140, 333, 4, 2, 128, 64, true, true, 19));
  v.push_back(P(2, 90, 250, 4, 2, 256, 24, true, true, 22));
  v.push_back(P(2, 77, 190, 2, 2, 64, 1, false, true, 23));
  {
    CaseSpec s = P(4, 300, 600, 4, 2, 128, 16, true, true, 24);  // ragged q + page 16
    s.ragged_q = true;
    v.push_back(s);
    s = P(2, 400, 300, 4, 2, 128, 3, true, false, 25);  // top-left, rows without keys
    s.mask.align = CausalAlign::top_left;
    v.push_back(s);
    s = P(2, 260, 900, 4, 2, 128, 16, true, true, 26);  // f16 -> f32, sinks, softcap, window
    s.dtype = DType::f16;
    s.out_dtype = DType::f32;
    s.sinks = true;
    s.softcap = 15.f;
    s.mask.window_left = 200;
    v.push_back(s);
    s = P(2, 500, 500, 4, 2, 64, 48, true, true, 27);  // chunked attention
    s.mask.chunk_size = 100;
    v.push_back(s);
    for (int64_t page : {16, 256, 3}) {  // q / k head dim 192, v 128
      s = P(2, 200, 600, 4, 2, 192, page, true, true, 28 + uint64_t(page));
      s.dim_v = 128;
      v.push_back(s);
    }
    // Narrow head dims (issue 16; tile_size.h kernel_dims): column-addressed boxes per chunk,
    // whole-page and short boxes.
    for (int64_t page : {128, 16, 3}) {
      s = P(2, 200, 600, 4, 2, 96, page, true, true, 60 + uint64_t(page));
      v.push_back(s);
    }
    s = P(2, 150, 500, 4, 2, 160, 64, false, true, 70);
    s.dim_v = 128;
    v.push_back(s);
    for (int64_t page : {16, 128, 3}) {  // head dim 192 (its paged tile: 128 x 64)
      s = P(2, 200, 600, 4, 2, 192, page, true, true, 80 + uint64_t(page));
      v.push_back(s);
    }
    s = P(2, 150, 500, 4, 2, 40, 256, true, true, 71);
    v.push_back(s);
    // Head dims on the hdim-256 kernel other than 256 / 256: the pages gathered into dense
    // copies (paged_gather.h), with and without seqused_k, ragged q, odd pages, features.
    s = P(2, 100, 300, 4, 2, 200, 64, true, true, 72);
    v.push_back(s);
    s = P(3, 150, 333, 4, 2, 64, 16, true, false, 73);  // FA3's 64 / 256
    s.dim_v = 256;
    v.push_back(s);
    s = P(4, 200, 500, 4, 2, 224, 3, true, true, 74);
    s.ragged_q = true;
    v.push_back(s);
    s = P(2, 150, 400, 4, 2, 64, 16, true, true, 76);  // FA3's 64 / 512: one gather, then the v split
    s.dim_v = 512;
    v.push_back(s);
    s = P(2, 260, 700, 4, 1, 232, 48, true, true, 75);  // f16 -> f32, sinks, softcap, window
    s.dtype = DType::f16;
    s.out_dtype = DType::f32;
    s.sinks = true;
    s.softcap = 15.f;
    s.mask.window_left = 200;
    v.push_back(s);
    // seqused_q (issue 16): dense q (rows past it keep their poison) and ragged q; chunk with
    // a window.
    s = P(3, 300, 700, 4, 2, 128, 128, true, true, 50);
    s.used_q = {300, 0, 129};
    v.push_back(s);
    s = P(4, 300, 600, 4, 2, 128, 16, true, true, 51);
    s.ragged_q = true;
    s.seqused_q = true;
    v.push_back(s);
    s = P(2, 260, 900, 4, 2, 64, 48, true, true, 52);
    s.used_q = {100, 260};
    s.mask.window_left = 100;
    s.mask.chunk_size = 128;
    v.push_back(s);
    s = P(2, 300, 500, 4, 2, 128, 64, false, true, 53);  // chunk with a two-sided window
    s.mask.window_left = 40;
    s.mask.window_right = 25;
    s.mask.chunk_size = 100;
    v.push_back(s);
  }
  return v;
}

class GpuPaged : public ::testing::TestWithParam<CaseSpec> {};

void check_paged(const CaseSpec& s, const detail::Overrides& ov = {}) {
  Case c = testing::make_case(s);
  // Keys no output reads (rows past seqused_k in a sequence's pages, the last page's tail,
  // spare pages) hold NaN (Inf for odd seeds): a sequence's last K/V tile fetches some of
  // them and must not let them reach the output.
  ASSERT_GT(gputest::poison_unread_kv(c.args, s.seed % 2 ? INFINITY : NAN), 0);
  DeviceCase d = to_device(c);
  ASSERT_EQ(d.bufs.size() > 0, true);
  Status st = detail::forward_with(d.args, ov);
  // v above 256 runs as two column slices, the first (the wider) of 256 for v = 512.
  const cuda::sm90::HeadDims kd = cuda::sm90::kernel_dims(int(s.dim_qk), int(std::min<int64_t>(s.dim_v, 256)), false);
  const int block_n = cuda::sm90::paged_tile(kd.qk, kd.v).block_n;
  const bool gathered = kd.qk == 256 && (s.dim_qk != 256 || s.dim_v != 256);  // dense copies: any page size
  if (!gathered && cuda::sm90::box_shift_for(s.page_size, block_n) < cuda::sm90::kMinBoxShift) {
    // Page sizes the build refuses (page_math.h kMinBoxShift): named, nothing written.
    EXPECT_EQ(st.code(), Status::Code::not_supported) << st.message();
    EXPECT_NE(st.message().find("page_table"), std::string::npos) << st.message();
    d.download(c.out, d.args.out);
    EXPECT_EQ(testing::count_nan(c.out), c.out.t.numel()) << "out written for a refused page size";
    return;
  }
  ASSERT_TRUE(st.ok()) << testing::describe(s) << ": " << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  d.download(c.out, d.args.out);
  d.download(c.lse, d.args.lse);
  // Softcap runs tanh.approx (2^-11 relative): widen atol by cap * 2^-11 (forward_cases.h atol_for).
  const double atol = 1e-3 + (s.softcap > 0 ? double(s.softcap) / 2048.0 : 0.0);
  testing::OracleResult r = testing::check_against_reference(c.args, atol);
  printf("%-60s err %.2e naive %.2e lse %.2e\n", testing::describe(s).c_str(), r.max_err, r.naive_err, r.lse_err);
  EXPECT_TRUE(r.failure.empty()) << testing::describe(s) << ": " << r.failure;
}

TEST_P(GpuPaged, MatchesReference) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  check_paged(GetParam());
}

// Grouped V (the default; here with the producer mode forced to tma, then lanes): V boxes of 16 .. block_n / 2 rows carry every 64-column chunk into the grouped V layout (params.h v_group_shift, gemm_pv). Pages
// giving such boxes at every head dim (hdim 256: block_n 64), with seqused_k, ragged q,
// windows, sinks, softcap, 192 / 128, and sizes the switch leaves alone (3, 24, 128).
std::vector<CaseSpec> vgroup_cases() {
  std::vector<CaseSpec> v;
  v.push_back(P(3, 200, 450, 4, 2, 128, 16, true, true, 51));
  v.push_back(P(2, 300, 517, 4, 2, 128, 32, false, false, 52));
  v.push_back(P(2, 250, 700, 6, 2, 64, 48, true, true, 53));
  v.push_back(P(2, 140, 333, 4, 2, 128, 64, true, true, 54));
  v.push_back(P(2, 90, 250, 4, 2, 256, 16, true, true, 55));
  v.push_back(P(2, 333, 555, 4, 2, 256, 32, false, true, 56));
  v.push_back(P(2, 100, 300, 4, 2, 128, 3, true, true, 57));
  v.push_back(P(2, 90, 250, 4, 2, 256, 24, true, true, 58));
  v.push_back(P(2, 300, 700, 4, 2, 128, 128, true, true, 59));
  CaseSpec s = P(4, 300, 600, 4, 2, 128, 16, true, true, 60);
  s.ragged_q = true;
  v.push_back(s);
  s = P(2, 260, 900, 4, 2, 128, 16, true, true, 61);
  s.dtype = DType::f16;
  s.out_dtype = DType::f32;
  s.sinks = true;
  s.softcap = 15.f;
  s.mask.window_left = 200;
  v.push_back(s);
  s = P(2, 200, 600, 4, 2, 192, 16, true, true, 62);
  s.dim_v = 128;
  v.push_back(s);
  return v;
}

class GpuPagedVGroup : public ::testing::TestWithParam<CaseSpec> {};

// check_paged with the producer mode `fill` (grouped layouts where they apply).
void check_vgroup(const CaseSpec& c, detail::PagedFill fill) {
  detail::Overrides ov;
  ov.paged_fill = fill;
  check_paged(c, ov);
}

// The grouped layout made by one thread's TMA boxes (the gather, default below 16-row boxes,
// fills the plain tile and turns it off).
TEST_P(GpuPagedVGroup, MatchesReference) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  check_vgroup(GetParam(), detail::PagedFill::tma);
}

// The grouped layouts from the lanes' TMAs.
TEST_P(GpuPagedVGroup, MatchesReferenceLanes) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  check_vgroup(GetParam(), detail::PagedFill::lanes);
}

// The paged producer modes (page_math.h PagedMode), each forced (Overrides::paged_fill):
// tma (one thread's TMA boxes), lanes (the producer warp's lanes issue the boxes), gather
// (cp.async by the producer warpgroup into the swizzled tile; the default for boxes under 16
// rows). Page 16 at every
// head dim (hdim 256 has no team modes: forced modes fall back to
// tma there), seqused_k ending mid-page, causal bottom-right / top-left, ragged q, GQA / MQA,
// padded (non-contiguous) K / V rows, f16 -> f32 with sinks / softcap / window, chunks,
// 192 / 128, pages 1, 3, 24, 32, 48, 64, 100 and 200 (boxes of 1..64 rows), and a single
// key block per sequence. Every unread K / V row is NaN / Inf (check_paged).
// The tma cases run with the plain K and V layouts (paged_group_v off), the lanes cases with
// grouped V and plain K (paged_group_k off), the others with the default (grouped K and V
// where they take TMA boxes of 16+ rows).
struct ModeCase {
  CaseSpec s;
  const char* mode;
};

std::vector<ModeCase> mode_cases() {
  std::vector<CaseSpec> v;
  v.push_back(P(3, 200, 450, 4, 2, 128, 16, true, true, 71));
  v.push_back(P(2, 300, 517, 4, 2, 128, 16, false, false, 72));
  v.push_back(P(3, 250, 700, 6, 2, 64, 16, true, true, 73));
  v.push_back(P(2, 90, 250, 4, 2, 256, 16, true, true, 74));
  v.push_back(P(2, 333, 601, 4, 1, 128, 16, false, true, 75));  // MQA
  v.push_back(P(2, 100, 300, 4, 2, 128, 1, true, true, 76));
  v.push_back(P(2, 150, 400, 4, 2, 128, 3, false, true, 77));
  v.push_back(P(2, 180, 389, 4, 2, 64, 24, true, true, 78));
  v.push_back(P(2, 300, 517, 4, 2, 128, 32, true, true, 79));
  v.push_back(P(2, 200, 611, 4, 2, 128, 48, false, true, 80));
  v.push_back(P(2, 140, 333, 4, 2, 128, 64, true, true, 81));
  v.push_back(P(2, 133, 555, 4, 2, 64, 100, false, true, 82));
  v.push_back(P(2, 129, 700, 4, 2, 128, 200, true, true, 83));
  v.push_back(P(3, 60, 97, 4, 2, 128, 16, true, true, 84));  // one key block per sequence
  CaseSpec s = P(2, 400, 400, 4, 2, 128, 16, true, false, 85);  // top-left, seq_q > seq_k
  s.seq_q = 430;
  s.mask.align = CausalAlign::top_left;
  v.push_back(s);
  s = P(4, 300, 600, 4, 2, 128, 16, true, true, 86);  // ragged q
  s.ragged_q = true;
  v.push_back(s);
  s = P(2, 211, 460, 4, 2, 128, 16, true, true, 87);  // padded rows: row / head strides not dim
  s.padded = true;
  v.push_back(s);
  s = P(2, 260, 900, 4, 2, 128, 16, true, true, 88);  // f16 -> f32, sinks, softcap, window
  s.dtype = DType::f16;
  s.out_dtype = DType::f32;
  s.sinks = true;
  s.softcap = 15.f;
  s.mask.window_left = 200;
  v.push_back(s);
  s = P(2, 500, 500, 4, 2, 64, 16, true, true, 89);  // chunked attention
  s.mask.chunk_size = 100;
  v.push_back(s);
  s = P(2, 200, 600, 4, 2, 192, 16, true, true, 90);  // q / k head dim 192, v 128
  s.dim_v = 128;
  v.push_back(s);
  std::vector<ModeCase> out;
  for (const char* mode : {"gather", "lanes", "tma"})
    for (const CaseSpec& c : v) out.push_back({c, mode});
  return out;
}

void PrintTo(const ModeCase& c, std::ostream* os) { *os << c.mode << " " << testing::describe(c.s); }

class GpuPagedMode : public ::testing::TestWithParam<ModeCase> {};

TEST_P(GpuPagedMode, MatchesReference) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  const std::string mode = GetParam().mode;
  detail::Overrides ov;
  ov.paged_fill = mode == "tma" ? detail::PagedFill::tma : mode == "lanes" ? detail::PagedFill::lanes
                                                                            : detail::PagedFill::gather;
  if (mode == "tma") ov.paged_group_v = false;
  if (mode == "lanes") ov.paged_group_k = false;
  check_paged(GetParam().s, ov);
}

std::string spec_name(const ::testing::TestParamInfo<CaseSpec>& i) {
  const CaseSpec& s = i.param;
  return "b" + std::to_string(s.batch) + "_sq" + std::to_string(s.seq_q) + "_sk" + std::to_string(s.seq_k) + "_h" +
         std::to_string(s.heads_q) + "x" + std::to_string(s.heads_kv) + "_d" + std::to_string(s.dim_qk) +
         (s.dim_v != s.dim_qk ? "x" + std::to_string(s.dim_v) : "") + "_page" +
         std::to_string(s.page_size) + "_s" + std::to_string(s.seed);
}

INSTANTIATE_TEST_SUITE_P(Paged, GpuPaged, ::testing::ValuesIn(paged_cases()), spec_name);
INSTANTIATE_TEST_SUITE_P(PagedVGroup, GpuPagedVGroup, ::testing::ValuesIn(vgroup_cases()), spec_name);
INSTANTIATE_TEST_SUITE_P(PagedMode, GpuPagedMode, ::testing::ValuesIn(mode_cases()),
                         [](const ::testing::TestParamInfo<ModeCase>& i) {
                           return std::string(i.param.mode) + "_" +
                                  spec_name(::testing::TestParamInfo<CaseSpec>(i.param.s, i.index));
                         });

// Host-only: every case above is a valid problem (a case the API refuses would test
// nothing on the device), and its host reference runs (CPU backend) within the oracle.
TEST(GpuPagedSpecs, ValidOnHost) {
  std::vector<CaseSpec> all = paged_cases(), vg = vgroup_cases();
  all.insert(all.end(), vg.begin(), vg.end());
  for (const ModeCase& m : mode_cases()) all.push_back(m.s);
  for (const CaseSpec& s : all) {
    Case c = testing::make_case(s);
    Status st = validate(c.args);
    EXPECT_TRUE(st.ok()) << testing::describe(s) << ": " << st.message();
  }
}

// Host-only: poison_unread_kv sets only keys the reference never reads (its outputs stay
// free of NaN) and does set some (a poisoning that hits nothing tests nothing): paged with
// seqused_k, packed k with empty-query sequences, dense with seqused_k.
TEST(GpuUnreadPoison, OnlyUnreadKeysOnHost) {
  std::vector<CaseSpec> specs = {P(3, 40, 100, 4, 2, 64, 16, true, true, 40), P(2, 30, 70, 2, 2, 64, 3, false, true, 41)};
  {
    CaseSpec s = P(4, 50, 90, 4, 2, 64, 0, false, true, 42);
    s.ragged_q = s.ragged_k = true;
    s.seqlens_q = {50, 0, 20, 0};
    s.seqlens_k = {90, 40, 33, 7};
    specs.push_back(s);
    s = P(3, 50, 90, 4, 2, 64, 0, true, true, 43);
    specs.push_back(s);
  }
  for (const CaseSpec& s : specs) {
    Case c = testing::make_case(s);
    const int64_t n = gputest::poison_unread_kv(c.args, NAN);
    EXPECT_GT(n, 0) << testing::describe(s);
    EXPECT_EQ(testing::count_nan(c.k) + testing::count_nan(c.v), n) << testing::describe(s);
    ASSERT_TRUE(forward(c.args).ok()) << testing::describe(s);
    EXPECT_EQ(testing::count_nan(c.out), 0) << testing::describe(s) << ": the reference read a poisoned key";
  }
}

// Args::check_page_table: an out-of-range entry among the pages a sequence reads is an
// error naming page_table (nothing written); without the check a valid table still runs.
TEST(GpuPagedCheck, OutOfRangeEntryReported) {
  if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  Case c = testing::make_case(P(3, 100, 500, 4, 2, 128, 128, false, false, 21));
  DeviceCase d = to_device(c);
  d.args.check_page_table = true;
  Status ok = forward(d.args);
  ASSERT_TRUE(ok.ok()) << ok.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // Corrupt entry [1, 2] (sequence 1 reads all 4 pages) and re-poison out.
  const int64_t num_pages = c.k.t.shape[0];
  int32_t* pt = static_cast<int32_t*>(c.page_table.t.data);
  pt[1 * c.page_table.t.stride[0] + 2 * c.page_table.t.stride[1]] = int32_t(num_pages + 5);
  testing::poison(c.out);
  DeviceCase bad = to_device(c);
  bad.args.check_page_table = true;
  Status st = forward(bad.args);
  EXPECT_EQ(st.code(), Status::Code::invalid_argument) << st.message();
  EXPECT_NE(st.message().find("page_table: entry [1, 2]"), std::string::npos) << st.message();
  bad.download(c.out, bad.args.out);
  EXPECT_EQ(testing::count_nan(c.out), c.out.t.numel());
}

}  // namespace
}  // namespace longattn

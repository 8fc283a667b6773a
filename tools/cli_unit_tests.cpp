// Unit tests of the CLI's own pieces: .npy header parsing and I/O, FLOP counting, options.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli_options.h"
#include "flop_count.h"
#include "npy_io.h"

namespace longattn::tools {
namespace {

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("longattn_cli_") + name)).string();
}

TEST(Npy, ParsesHeaders) {
  std::string descr;
  bool fortran = true;
  std::vector<int64_t> shape;
  ASSERT_TRUE(parse_npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 5), }",
                               &descr, &fortran, &shape));
  EXPECT_EQ(descr, "<f4");
  EXPECT_FALSE(fortran);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 3, 5}));
  ASSERT_TRUE(parse_npy_header("{'shape': (7,), 'fortran_order': True, 'descr': '|V2'}", &descr,
                               &fortran, &shape));
  EXPECT_TRUE(fortran);
  EXPECT_EQ(shape, (std::vector<int64_t>{7}));
  ASSERT_TRUE(parse_npy_header("{'descr': '<f2', 'fortran_order': False, 'shape': ()}", &descr,
                               &fortran, &shape));
  EXPECT_TRUE(shape.empty());
  EXPECT_FALSE(parse_npy_header("{'descr': [('a', '<f4')], 'shape': (1,)}", &descr, &fortran, &shape));
  EXPECT_FALSE(parse_npy_header("{'descr': '<f4', 'shape': (1, x)}", &descr, &fortran, &shape));
}

TEST(Npy, RoundTripsEveryDtype) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::e4m3}) {
    HostArray a(t, {3, 1, 4});
    for (int64_t i = 0; i < a.numel(); ++i) a.set(i, 0.25f * float(i) - 1.3f);
    const std::string p = temp_path("rt.npy");
    write_npy(p, a);
    HostArray b = read_npy(p);
    EXPECT_EQ(b.dtype, t);
    EXPECT_EQ(b.shape, a.shape);
    EXPECT_EQ(b.bytes, a.bytes) << dtype_name(t);
    std::remove(p.c_str());
  }
}

// A float64 file as numpy writes it (version 1 header padded to a multiple of 64 bytes) reads as f32.
TEST(Npy, ConvertsFloat64AndRejectsBadFiles) {
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  const std::string p = temp_path("f8.npy");
  {
    std::ofstream f(p, std::ios::binary);
    f.write("\x93NUMPY\x01\x00", 8);
    const char len[2] = {char(header.size()), 0};
    f.write(len, 2);
    f.write(header.data(), std::streamsize(header.size()));
    const double v[3] = {1.5, -2.25, 1e10};
    f.write(reinterpret_cast<const char*>(v), sizeof v);
  }
  HostArray a = read_npy(p);
  EXPECT_EQ(a.dtype, DType::f32);
  ASSERT_EQ(a.numel(), 3);
  EXPECT_EQ(a.get(0), 1.5f);
  EXPECT_EQ(a.get(1), -2.25f);
  EXPECT_EQ(a.get(2), 1e10f);
  // Truncated data is an error naming the file, not a crash.
  std::filesystem::resize_file(p, 128 + 8);
  EXPECT_THROW(read_npy(p), std::runtime_error);
  std::remove(p.c_str());
  EXPECT_THROW(read_npy(temp_path("does_not_exist.npy")), std::runtime_error);
}

TEST(Flops, VisiblePairsMatchClosedForms) {
  detail::MaskRule none;
  EXPECT_EQ(visible_pairs(none, 37, 53), 37 * 53);
  detail::MaskRule causal;
  causal.causal = true;
  EXPECT_EQ(visible_pairs(causal, 100, 100), 100 * 101 / 2);
  // Bottom-right with more keys: query i sees i + (sk - sq) + 1 keys.
  EXPECT_EQ(visible_pairs(causal, 10, 30), 10 * 20 + 10 * 11 / 2);
  // More queries than keys: the first sq - sk queries see nothing.
  EXPECT_EQ(visible_pairs(causal, 30, 10), 10 * 11 / 2);
  causal.top_left = true;
  EXPECT_EQ(visible_pairs(causal, 30, 10), 10 * 11 / 2 + 20 * 10);
  // Sliding window (left 3, right 0) with causal: min(i, 3) + 1 keys.
  detail::MaskRule win;
  win.causal = true;
  win.window_left = 3;
  EXPECT_EQ(visible_pairs(win, 50, 50), (1 + 2 + 3) + 47 * 4);
  // Chunked causal, chunk 8 over 32 tokens: 4 chunks of 8*9/2.
  detail::MaskRule chunk;
  chunk.causal = true;
  chunk.chunk = 8;
  EXPECT_EQ(visible_pairs(chunk, 32, 32), 4 * 36);
  // Brute force agrees on an odd mix.
  detail::MaskRule mix;
  mix.window_left = 5;
  mix.window_right = 2;
  int64_t brute = 0;
  for (int64_t i = 0; i < 41; ++i)
    for (int64_t j = 0; j < 29; ++j) brute += detail::key_visible(mix, i + mix.offset(41, 29), j);
  EXPECT_EQ(visible_pairs(mix, 41, 29), brute);
  // 4 * d per pair and head.
  EXPECT_DOUBLE_EQ(attention_flops(none, {3, 5}, {7, 2}, 4, 64, 64), (21.0 + 10.0) * 4 * 4 * 64);
}

TEST(Options, DefaultsAndErrors) {
  RunOptions o = parse_run_options({});
  EXPECT_EQ(o.seq_q, 4096);
  EXPECT_EQ(o.heads_q, 32);
  EXPECT_EQ(o.heads_kv, 8);
  EXPECT_EQ(o.dim, 128);
  EXPECT_TRUE(o.mask.causal);
  EXPECT_EQ(o.dtype, DType::bf16);
  o = parse_run_options({"--seq=100", "--window", "-1,4", "--ragged", "3,5:9", "--no-causal"});
  EXPECT_EQ(o.seq_q, 100);
  EXPECT_EQ(o.mask.window_left, -1);
  EXPECT_EQ(o.mask.window_right, 4);
  EXPECT_EQ(o.ragged_k, (std::vector<int64_t>{3, 9}));
  EXPECT_EQ(o.batch, 2);
  EXPECT_FALSE(o.mask.causal);
  EXPECT_THROW(parse_run_options({"--heads-kv", "6"}), UsageError);
  EXPECT_THROW(parse_run_options({"--window", "3"}), UsageError);
  EXPECT_THROW(parse_run_options({"--causal=1"}), UsageError);
  EXPECT_THROW(parse_run_options({"--seq", "-4"}), UsageError);
  EXPECT_THROW(parse_run_options({"--q", "a.npy"}), UsageError);
  EXPECT_THROW(parse_bench_options({"--seq", "128"}), UsageError);
  EXPECT_EQ(o.cpu_isa, CpuIsa::automatic);
  EXPECT_EQ(parse_run_options({"--cpu-isa", "avx2"}).cpu_isa, CpuIsa::avx2);
  EXPECT_EQ(parse_run_options({"--cpu-isa=portable"}).cpu_isa, CpuIsa::portable);
  EXPECT_EQ(parse_cpu_isa("--cpu-isa", "amx"), CpuIsa::amx);
  EXPECT_THROW(parse_run_options({"--cpu-isa", "sse"}), UsageError);
  EXPECT_EQ(o.sm_margin, 0);
  EXPECT_EQ(parse_run_options({"--sm-margin", "8"}).sm_margin, 8);
  EXPECT_EQ(parse_run_options({"--sm-margin", "99999999999"}).sm_margin, INT32_MAX);  // every SM but one
  EXPECT_THROW(parse_run_options({"--sm-margin", "-1"}), UsageError);
  BenchOptions b = parse_bench_options({"--seqs", "128,256", "--backends", "cpu,reference"});
  EXPECT_EQ(b.seqs, (std::vector<int64_t>{128, 256}));
  EXPECT_EQ(b.backends.size(), 2u);
}

}  // namespace
}  // namespace longattn::tools

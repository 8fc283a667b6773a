// Invalid combine inputs return Invalid naming the argument, and write nothing.
#include <gtest/gtest.h>

#include "api/invalid_fixture.h"

namespace longattn::testing {
namespace {

class BadCombine : public ::testing::Test {
 protected:
  void SetUp() override {
    op = random_tensor(DType::f32, {2, 5, 3, 8}, 1);
    lp = random_tensor(DType::f32, {2, 3, 5}, 2);
    out = empty_tensor(DType::bf16, {5, 3, 8});
    lse = empty_tensor(DType::f32, {3, 5});
    fill_pattern(out);
    fill_pattern(lse);
    a.out_partial = op.t, a.lse_partial = lp.t, a.out = out.t, a.lse = lse.t;
  }
  void expect_invalid(const CombineArgs& args, const std::string& arg, const std::string& detail) {
    std::vector<std::vector<uint8_t>> before = {op.bytes, lp.bytes, out.bytes, lse.bytes};
    Status s = combine(args);
    EXPECT_EQ(s.code(), Status::Code::invalid_argument) << s.message();
    EXPECT_EQ(s.message().rfind(arg + ":", 0), 0u) << s.message();
    EXPECT_NE(s.message().find(detail), std::string::npos) << s.message();
    EXPECT_TRUE(op.bytes == before[0] && lp.bytes == before[1]);
    EXPECT_TRUE(out.bytes == before[2]) << "out was written";
    EXPECT_TRUE(lse.bytes == before[3]) << "lse was written";
  }
  HostTensor op, lp, out, lse;
  CombineArgs a;
};

TEST_F(BadCombine, BaselineIsValid) { EXPECT_TRUE(combine(a).ok()) << combine(a).message(); }
TEST_F(BadCombine, NullOutPartial) {
  CombineArgs b = a;
  b.out_partial.data = nullptr;
  expect_invalid(b, "out_partial", "null");
}
TEST_F(BadCombine, OutPartialRank3) {
  CombineArgs b = a;
  b.out_partial.rank = 3;
  expect_invalid(b, "out_partial", "rank 3");
}
TEST_F(BadCombine, LsePartialWrongShape) {
  CombineArgs b = a;
  b.lse_partial.shape[2] = 4;
  expect_invalid(b, "lse_partial", "(splits, heads, tokens)");
}
TEST_F(BadCombine, LsePartialNotF32) {
  CombineArgs b = a;
  b.lse_partial.dtype = DType::bf16;
  expect_invalid(b, "lse_partial", "f32");
}
TEST_F(BadCombine, OutWrongHeadDim) {
  CombineArgs b = a;
  b.out.shape[2] = 4;
  expect_invalid(b, "out", "(tokens, heads, dim_v)");
}
TEST_F(BadCombine, OutFp8) {
  CombineArgs b = a;
  b.out.dtype = DType::e4m3;
  expect_invalid(b, "out", "e4m3");
}
TEST_F(BadCombine, LseWrongShape) {
  CombineArgs b = a;
  b.lse.shape[0] = 5, b.lse.shape[1] = 3;
  expect_invalid(b, "lse", "(heads, tokens)");
}
TEST_F(BadCombine, ZeroSplits) {
  CombineArgs b = a;
  b.out_partial.shape[0] = 0;
  b.lse_partial.shape[0] = 0;
  expect_invalid(b, "out_partial", "0 splits");
}
TEST_F(BadCombine, OutOverlapsPartial) {
  CombineArgs b = a;
  b.out.data = b.out_partial.data;
  b.out.dtype = DType::f32;
  expect_invalid(b, "out", "overlaps out_partial");
}
TEST_F(BadCombine, OutElementsOverlap) {
  CombineArgs b = a;
  b.out.stride[0] = 8;  // tokens step 8 but each token spans 3 heads x 8
  expect_invalid(b, "out", "overlap");
}
TEST_F(BadCombine, MixedDevices) {
  CombineArgs b = a;
  b.lse.device = Device{DeviceKind::cuda, 0};
  expect_invalid(b, "lse", "one device");
}

}  // namespace
}  // namespace longattn::testing

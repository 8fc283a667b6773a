// Fixture for invalid-input tests: a valid problem whose every buffer is filled with a byte
// pattern; expect_invalid() asserts the error names the argument and that no byte changed.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/testing.h"

namespace longattn::testing {

inline void fill_pattern(HostTensor& x) {
  for (size_t i = 0; i < x.bytes.size(); ++i) x.bytes[i] = uint8_t(0xA5 ^ (i * 7));
}

class InvalidInput : public ::testing::Test {
 protected:
  // Builds the valid starting point; tests mutate a copy of c.args.
  void make(const CaseSpec& spec) {
    c = make_case(spec);
    for (HostTensor* x : {&c.out, &c.lse}) fill_pattern(*x);
  }
  void SetUp() override {
    CaseSpec s;
    s.batch = 2, s.seq_q = 5, s.seq_k = 7, s.heads_q = 4, s.heads_kv = 2, s.dim_qk = 8, s.dim_v = 8;
    make(s);
  }
  std::vector<HostTensor*> buffers() {
    return {&c.q, &c.k, &c.v, &c.out, &c.lse, &c.cu_seqlens_q, &c.cu_seqlens_k, &c.seqused_q,
            &c.seqused_k, &c.page_table, &c.sinks, &c.q_descale, &c.k_descale, &c.v_descale};
  }
  // forward(a) and validate(a) must both fail with Invalid, the message must start with
  // "<arg>:" and contain `detail`, and no byte of any buffer (nor of `extra`) may change.
  void expect_invalid(const Args& a, const std::string& arg, const std::string& detail = "",
                      std::vector<HostTensor*> extra = {}) {
    std::vector<HostTensor*> all = buffers();
    all.insert(all.end(), extra.begin(), extra.end());
    std::vector<std::vector<uint8_t>> before;
    for (HostTensor* x : all) before.push_back(x->bytes);
    Status v = validate(a);
    Status f = forward(a);
    EXPECT_EQ(f.code(), Status::Code::invalid_argument) << f.message();
    EXPECT_EQ(v.code(), f.code());
    EXPECT_EQ(v.message(), f.message());
    EXPECT_EQ(f.message().rfind(arg + ":", 0), 0u) << "message does not start with '" << arg
                                                     << ":': " << f.message();
    if (!detail.empty()) {
      EXPECT_NE(f.message().find(detail), std::string::npos)
          << "message lacks '" << detail << "': " << f.message();
    }
    for (size_t i = 0; i < all.size(); ++i)
      EXPECT_TRUE(all[i]->bytes == before[i]) << "buffer " << i << " was modified";
  }
  Case c;
};

}  // namespace longattn::testing

// FNV-1a-64/128 self-checks (SPEC 6.1) and Crockford base32 rendering.
#include <gtest/gtest.h>

#include <string>

#include "grit/fnv.h"
#include "test_util.h"

namespace {

TEST(Fnv, Fnv1a64SpecSelfCheck) {
  EXPECT_EQ(grit::fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  // The empty input hashes to the offset basis.
  EXPECT_EQ(grit::fnv1a64("", 0), 0xcbf29ce484222325ull);
}

TEST(Fnv, Fnv1a128SpecSelfCheck) {
  EXPECT_EQ(gt::hexs(grit::fnv1a128("a", 1)), "d228cb696f1a8caf78912b704e4a8964");
  EXPECT_EQ(gt::hexs(grit::fnv1a128("", 0)), "6c62272e07bb014262b821756295c58d");
}

TEST(Fnv, Fnv128StreamingEqualsOneShot) {
  const std::string text = "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)";
  grit::Fnv128 h;
  h.update(text.data(), 10);
  h.update(text.data() + 10, text.size() - 10);
  EXPECT_EQ(h.digest(), grit::fnv1a128(text.data(), text.size()));

  // update_u64le is exactly the 8 little-endian bytes.
  grit::Fnv128 a, b;
  a.update_u64le(0x0102030405060708ull);
  const uint8_t le[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  b.update(le, 8);
  EXPECT_EQ(a.digest(), b.digest());
}

TEST(Fnv, Crockford32Shape) {
  const std::string s = grit::crockford32(grit::fnv1a128("a", 1));
  EXPECT_EQ(s, "6J535PJVRTHJQQH49BE174N2B4");
  ASSERT_EQ(s.size(), 26u);
  EXPECT_GE(s[0], '0');
  EXPECT_LE(s[0], '7');  // 130 bits zero-extended on the left: 3 bits in symbol 0
  for (char c : s) {
    EXPECT_EQ(std::string("ILOU").find(c), std::string::npos) << c;
    EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z')) << c;
  }
}

TEST(Fnv, Crockford32Extremes) {
  std::array<uint8_t, 16> zero{}, ones{};
  ones.fill(0xFF);
  EXPECT_EQ(grit::crockford32(zero), std::string(26, '0'));
  EXPECT_EQ(grit::crockford32(ones), "7" + std::string(25, 'Z'));
}

TEST(Fnv, Crockford32OfAGid) {
  // MXFP4 reference descriptor, shape (64,): the oracle's gid and its base32.
  std::array<uint8_t, 16> gid{};
  const auto b = gt::unhex("b1f713354c0f9792a65ddd9b132af02d");
  std::copy(b.begin(), b.end(), gid.begin());
  EXPECT_EQ(grit::crockford32(gid), "5HYW9KAK0FJY9ACQEXKC9JNW1D");
}

TEST(Fnv, Hex) {
  const uint8_t b[] = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(grit::hex(b, 4), "000fa5ff");
  EXPECT_EQ(grit::hex(b, 0), "");
}

}  // namespace

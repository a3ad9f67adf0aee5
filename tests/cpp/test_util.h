// Small helpers shared by the GoogleTest files (header-only).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "grit/grit.h"

namespace gt {

inline std::vector<uint8_t> unhex(const std::string& h) {
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::vector<uint8_t> out;
  EXPECT_EQ(h.size() % 2, 0u) << h;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    const int hi = nib(h[i]), lo = nib(h[i + 1]);
    EXPECT_GE(hi, 0);
    EXPECT_GE(lo, 0);
    out.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return out;
}

inline std::string hexs(const std::vector<uint8_t>& v) { return grit::hex(v.data(), v.size()); }
template <size_t N>
inline std::string hexs(const std::array<uint8_t, N>& v) { return grit::hex(v.data(), v.size()); }

// Raw binary32 bits, NaN payload and sign kept (unlike grit::f32_bits).
inline uint32_t raw_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline float from_raw(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline const grit::Grade& ref(const char* name) {
  const grit::ReferenceGrade* r = grit::reference_grade(name);
  if (r == nullptr) {
    ADD_FAILURE() << "no reference grade " << name;
    static grit::Grade empty;
    return empty;
  }
  return *r->grade;
}

inline grit::Grade parse_ok(const std::string& text) {
  grit::Grade g;
  const grit::Status s = grit::grade_parse(text, &g);
  EXPECT_TRUE(s.ok()) << text << ": " << s.message;
  return g;
}

// Owns four plane buffers and hands out grit::Plane views of them.
struct Planes {
  std::vector<uint8_t> p[4];
  grit::Plane view[4];
  Planes() = default;
  Planes(std::vector<uint8_t> a, std::vector<uint8_t> b, std::vector<uint8_t> c,
         std::vector<uint8_t> d) {
    p[0] = std::move(a);
    p[1] = std::move(b);
    p[2] = std::move(c);
    p[3] = std::move(d);
  }
  const grit::Plane* planes() {
    for (int i = 0; i < 4; ++i) view[i] = grit::Plane{p[i].empty() ? nullptr : p[i].data(), p[i].size()};
    return view;
  }
};

}  // namespace gt

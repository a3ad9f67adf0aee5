// Helpers shared by the nibble kernel tests (header-only): four planes held
// by value (random ones too), a PackedWeight over them, and activations
// that are normal values, optionally rounded to bfloat16 (the pair path's x).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "grit/grit.h"
#include "kernels/cpu/packed_linear_cpu.h"

namespace nibble_test {

struct Planes {
  std::vector<uint8_t> p[4];
};

// A reference grade by its name, else the canonical string parsed into *parsed.
inline const grit::Grade* grade_named(const char* name, grit::Grade* parsed) {
  if (const auto* r = grit::reference_grade(name)) return r->grade;
  EXPECT_TRUE(grit::grade_parse(name, parsed).ok()) << name;
  return parsed;
}

// Whether rows of k columns hold whole groups of g, and n rows whole level-1 groups.
inline bool whole_groups(const grit::Grade& g, int64_t n, int64_t k) {
  return k % g.k0 == 0 && (n * k) % (static_cast<int64_t>(g.k0) * (g.k1 > 0 ? g.k1 : 1)) == 0;
}

// Uniformly random bytes in each plane (sized by the grade's equations).
inline Planes random_planes(const grit::Grade& g, int64_t n, int64_t k, uint32_t seed) {
  uint64_t bytes[4];
  EXPECT_TRUE(grit::grade_plane_bytes(g, static_cast<uint64_t>(n * k), bytes).ok());
  std::mt19937 rng(seed);
  Planes out;
  for (int i = 0; i < 4; ++i) {
    out.p[i].resize(bytes[i]);
    for (auto& b : out.p[i]) b = static_cast<uint8_t>(rng());
  }
  return out;
}

inline grit::cpu::PackedWeight packed(const grit::Grade& g, const Planes& pl, int64_t n, int64_t k) {
  grit::cpu::PackedWeight w;
  w.grade = &g;
  w.n = n;
  w.k = k;
  for (int i = 0; i < 4; ++i) w.planes[i] = grit::Plane{pl.p[i].data(), pl.p[i].size()};
  return w;
}

inline std::vector<float> activations(int64_t count, bool bf16, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(count));
  for (auto& e : x) {
    e = normal(rng);
    if (bf16) {
      uint32_t u;
      std::memcpy(&u, &e, 4);
      u &= 0xFFFF0000u;
      std::memcpy(&e, &u, 4);
    }
  }
  return x;
}

}  // namespace nibble_test

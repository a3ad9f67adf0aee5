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
#include "kernels/cpu/packed_linear_ref.h"

namespace nibble_test {

struct Planes {
  std::vector<uint8_t> p[4];
};

// One grade of each fast decoder kind: the reference grades, ggml Q8_0's,
// GPTQ/AWQ's u4 with zero points, compressed-tensors' s4 groups.
inline constexpr const char* kFastGrades[] = {"MXFP4", "NVF4", "Q4KS", "I8S24",
                                              "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)",
                                              "grit1(e=u4,k0=128,s0=binary16,zp=u4,esr=affineminmax)",
                                              "grit1(e=s4,k0=64,s0=binary16,esr=ratiomaxabs)"};

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

// f(name, grade, n, k, w, decoded) for every grade of kFastGrades and each
// shape {n, k} that holds its whole groups: uniformly random planes (seeded
// n * seed_mul + k) and their reference decode, row-major.
template <size_t S, class F>
void for_each_random_weight(const int64_t (&shapes)[S][2], uint32_t seed_mul, F&& f) {
  for (const char* name : kFastGrades) {
    grit::Grade parsed;
    const grit::Grade* g = grade_named(name, &parsed);
    for (const auto& sh : shapes) {
      const int64_t n = sh[0], k = sh[1];
      if (!whole_groups(*g, n, k)) continue;
      const Planes pl = random_planes(*g, n, k, static_cast<uint32_t>(n) * seed_mul + static_cast<uint32_t>(k));
      const grit::cpu::PackedWeight w = packed(*g, pl, n, k);
      std::vector<float> decoded(static_cast<size_t>(n * k));
      uint64_t cursor = 0;
      ASSERT_TRUE(grit::cpu::decode_rows(w, 0, n, &cursor, decoded.data()).ok()) << name;
      f(name, *g, n, k, w, decoded);
    }
  }
}

}  // namespace nibble_test

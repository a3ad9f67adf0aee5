// Test helpers for the exact integer mode's kernel tests: a float's bits,
// and a scale or bias that is now and then zero, NaN, infinite, subnormal or
// huge instead of the usual value.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

inline uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

inline float special_or(std::mt19937& rng, float usual) {
  switch (rng() % 16) {
    case 0: return 0.0f;
    case 1: return std::numeric_limits<float>::quiet_NaN();
    case 2: return std::numeric_limits<float>::infinity();
    case 3: return -std::numeric_limits<float>::infinity();
    case 4: return std::numeric_limits<float>::denorm_min() * static_cast<float>(1 + rng() % 1000);
    case 5: return std::ldexp(1.0f, 100 + static_cast<int>(rng() % 27));
    default: return usual;
  }
}

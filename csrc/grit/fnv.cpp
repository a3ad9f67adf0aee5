#include "fnv.h"

namespace grit {
namespace {
constexpr uint64_t kFnv64Basis = 0xCBF29CE484222325ull;
constexpr uint64_t kFnv64Prime = 0x00000100000001B3ull;
// 128-bit basis 0x6C62272E07BB014262B821756295C58D, prime 2^88 + 0x13B.
constexpr unsigned __int128 kFnv128Basis =
    (static_cast<unsigned __int128>(0x6C62272E07BB0142ull) << 64) | 0x62B821756295C58Dull;
}  // namespace

uint64_t fnv1a64(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = kFnv64Basis;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnv64Prime;
  return h;
}

Fnv128::Fnv128() : h_(kFnv128Basis) {}

void Fnv128::update(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  unsigned __int128 h = h_;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    // h * (2^88 + 0x13B) mod 2^128, as a shift and a small multiply.
    h = (h << 88) + h * 0x13Bu;
  }
  h_ = h;
}

void Fnv128::update_u64le(uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
  update(b, 8);
}

std::array<uint8_t, 16> Fnv128::digest() const {
  std::array<uint8_t, 16> out{};
  for (int i = 0; i < 16; ++i) out[i] = static_cast<uint8_t>(h_ >> (8 * (15 - i)));
  return out;
}

std::array<uint8_t, 16> fnv1a128(const void* data, size_t n) {
  Fnv128 f;
  f.update(data, n);
  return f.digest();
}

std::string crockford32(const std::array<uint8_t, 16>& v) {
  static const char kAlphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  unsigned __int128 x = 0;
  for (uint8_t b : v) x = (x << 8) | b;
  std::string s(26, '0');
  // 130 bits, zero-extended on the left: the first symbol carries 3 bits.
  for (int i = 0; i < 26; ++i) s[i] = kAlphabet[static_cast<unsigned>((x >> (5 * (25 - i))) & 31u)];
  return s;
}

std::string hex(const uint8_t* p, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kHex[p[i] >> 4];
    s[2 * i + 1] = kHex[p[i] & 15];
  }
  return s;
}

}  // namespace grit

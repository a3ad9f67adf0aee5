// FNV-1a fingerprints and Crockford base32 (GRIT SPEC 6). FNV defends
// against drift and mislabelling, not against an adversary.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace grit {

uint64_t fnv1a64(const void* data, size_t n);

// 128-bit FNV-1a, streamed. The digest is rendered big-endian (byte 0 is the
// most significant), as the contract prints it.
class Fnv128 {
 public:
  Fnv128();
  void update(const void* data, size_t n);
  void update_u64le(uint64_t v);
  std::array<uint8_t, 16> digest() const;

 private:
  unsigned __int128 h_;
};

std::array<uint8_t, 16> fnv1a128(const void* data, size_t n);

// 26 symbols, MSB first, alphabet without I, L, O, U.
std::string crockford32(const std::array<uint8_t, 16>& v);

std::string hex(const uint8_t* p, size_t n);

}  // namespace grit

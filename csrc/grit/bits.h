// Bit-field reads and writes on byte planes, shared by decode and encode.
#pragma once

#include <cstdint>

namespace grit {

// `w` bits (1..32) at bit offset `off`, least significant bit first.
inline uint32_t read_bits_lsb(const uint8_t* p, uint64_t off, int w) {
  uint64_t v = 0;
  int got = 0;
  while (got < w) {
    const uint64_t byte = (off + got) >> 3;
    const int shift = static_cast<int>((off + got) & 7);
    const int take = (8 - shift) < (w - got) ? (8 - shift) : (w - got);
    v |= static_cast<uint64_t>((p[byte] >> shift) & ((1u << take) - 1)) << got;
    got += take;
  }
  return static_cast<uint32_t>(v);
}

// `w` bits at bit offset `off` of an MSB-first stream (the first value sits
// in the high bits of byte 0), most significant bit first.
inline uint32_t read_bits_msb(const uint8_t* p, uint64_t off, int w) {
  uint64_t v = 0;
  for (int k = 0; k < w; ++k) {
    const uint64_t b = off + k;
    v = (v << 1) | ((p[b >> 3] >> (7 - (b & 7))) & 1u);
  }
  return static_cast<uint32_t>(v);
}

inline void write_bits_lsb(uint8_t* p, uint64_t off, int w, uint32_t v) {
  for (int k = 0; k < w; ++k) {
    const uint64_t b = off + k;
    if ((v >> k) & 1u) p[b >> 3] |= static_cast<uint8_t>(1u << (b & 7));
  }
}

inline void write_bits_msb(uint8_t* p, uint64_t off, int w, uint32_t v) {
  for (int k = 0; k < w; ++k) {
    const uint64_t b = off + k;
    if ((v >> (w - 1 - k)) & 1u) p[b >> 3] |= static_cast<uint8_t>(1u << (7 - (b & 7)));
  }
}

}  // namespace grit

// libFuzzer: any bytes -> a descriptor, a shape and plane lengths -> the
// level-1 check, describe(), explain() and (with enough bytes) the level-2
// check. The contract promises no undefined behaviour on any 64 bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "grit/grit.h"

namespace {
uint64_t take_u64(const uint8_t*& p, size_t& n) {
  uint64_t v = 0;
  const size_t k = n < 8 ? n : 8;
  std::memcpy(&v, p, k);
  p += k;
  n -= k;
  return v;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 64) return 0;
  const grit::Descriptor d = grit::from_bytes(data);
  const uint8_t* p = data + 64;
  size_t n = size - 64;
  const size_t rank = n ? (*p++ % 9) : 1;
  if (n) --n;
  std::vector<int64_t> dims(rank);
  for (auto& x : dims) {
    const uint64_t raw = take_u64(p, n);
    // Mostly small extents (so the size equations can pass), sometimes huge or negative.
    x = (raw >> 63) ? static_cast<int64_t>(raw) : static_cast<int64_t>(raw % 4097);
  }
  uint64_t lens[4];
  for (auto& l : lens) l = take_u64(p, n);
  const grit::CheckResult r = grit::check_level1(d, dims.data(), dims.size(), lens);
  const std::string why = grit::describe(r, d);
  if (why.empty()) __builtin_trap();
  const std::string diff = grit::explain(d, grit::Descriptor{});
  (void)diff;

  // Level 2 over the remaining bytes cut into four planes of the expected sizes.
  grit::PlaneSizes ps;
  if (grit::expected_plane_bytes(d, dims.data(), dims.size(), &ps).ok()) {
    uint64_t total = 0;
    bool fits = true;
    for (uint64_t b : ps.bytes) {
      if (b > n || total > n - b) fits = false;
      else total += b;
    }
    if (fits) {
      grit::Plane planes[4];
      uint64_t off = 0;
      for (int i = 0; i < 4; ++i) {
        planes[i].data = p + off;
        planes[i].size = ps.bytes[i];
        off += ps.bytes[i];
      }
      grit::check(d, dims.data(), dims.size(), planes, 2, nullptr, nullptr);
      const grit::Id128 dg = grit::digest_of(planes);
      const grit::CheckResult r2 = grit::check(d, dims.data(), dims.size(), planes, 2, &dg, nullptr);
      // The digest of the planes themselves can never mismatch.
      if (r2.field == grit::CheckField::kDigest) __builtin_trap();
    }
  }
  return 0;
}

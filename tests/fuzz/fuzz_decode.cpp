// libFuzzer: the reference decode over arbitrary planes for a set of grades
// (the reference grades and others the grammar expresses: zero points,
// msb packing, pad8, u4 sparsity metadata). Decoding never reads out of
// bounds, and decoding in two quad-aligned halves equals decoding at once.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "grit/grit.h"

namespace {
const std::vector<grit::Grade>& grades() {
  static const std::vector<grit::Grade> g = [] {
    const char* specs[] = {
        "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)",
        "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)",
        "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)",
        "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:asclsb,esr=ratiomaxabs)",
        "grit1(e=u4,k0=8,s0=binary16,zp=u4,zpc=minus1,esr=affineminmax)",
        "grit1(e=u6,k0=4,s0=e8m0,po=msb,esr=exp2floormaxabs)",
        "grit1(e=s4,k0=4,s0=binary32,ct=pad8,esr=ratiomaxabs)",
        "grit1(e=e4m3,k0=8,s0=e8m0,sp=3:8:u4:unord,esr=ratiomaxabs)",
        "grit1(e=u2,k0=16,s0=u8,k1=2,s1=binary16,zp=u8,zps=l1,esr=affineminmax)",
    };
    std::vector<grit::Grade> out;
    for (const char* s : specs) {
      grit::Grade gr;
      if (!grit::grade_parse(s, &gr).ok()) __builtin_trap();
      out.push_back(gr);
    }
    return out;
  }();
  return g;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const grit::Grade& g = grades()[data[0] % grades().size()];
  // numel: a multiple of every block the grade needs (k0, k0*k1, M), up to 64 blocks.
  uint64_t unit = g.k0 * (g.has_l1 && g.k1 ? g.k1 : 1);
  if (g.has_sp) unit = unit % g.sp_m == 0 ? unit : unit * g.sp_m;
  const uint64_t numel = unit * (1 + data[1] % 64);
  uint64_t want[4];
  if (!grit::grade_plane_bytes(g, numel, want).ok()) __builtin_trap();
  std::vector<std::vector<uint8_t>> planes(4);
  const uint8_t* p = data + 2;
  size_t n = size - 2;
  grit::Plane pl[4];
  for (int i = 0; i < 4; ++i) {
    planes[i].assign(want[i], 0);
    const size_t k = n < want[i] ? n : want[i];
    if (k) std::memcpy(planes[i].data(), p, k);
    p += k;
    n -= k;
    pl[i].data = planes[i].data();
    pl[i].size = planes[i].size();
  }
  std::vector<float> all(numel), halves(numel);
  if (!grit::decode(g, pl, numel, all.data()).ok()) __builtin_trap();
  const uint64_t mid = (numel / 2 / unit) * unit;
  uint64_t cursor = 0;
  if (!grit::decode_range(g, pl, numel, 0, mid, &cursor, halves.data()).ok()) __builtin_trap();
  if (g.has_sp && cursor != grit::sparse_cursor(g, pl, mid)) __builtin_trap();
  if (!grit::decode_range(g, pl, numel, mid, numel, &cursor, halves.data() + mid).ok()) __builtin_trap();
  if (std::memcmp(all.data(), halves.data(), numel * sizeof(float)) != 0) __builtin_trap();
  // A plane one byte short is refused, never read past.
  if (want[0] > 0) {
    grit::Plane shorter[4] = {pl[0], pl[1], pl[2], pl[3]};
    shorter[0].size -= 1;
    if (grit::decode(g, shorter, numel, all.data()).ok()) __builtin_trap();
  }
  return 0;
}

// libFuzzer: any bytes as a grade string. Parsing never crashes; a parsed
// grade's canonical string parses back to itself (canonicalisation is a
// fixed point) with the same id and decode projection.
#include <cstddef>
#include <cstdint>
#include <string>

#include "grit/grit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  grit::Grade g;
  const grit::Status s = grit::grade_parse(text, &g);
  if (!s.ok()) {
    if (s.message.empty()) __builtin_trap();
    return 0;
  }
  grit::Grade again;
  if (!grit::grade_parse(g.canonical, &again).ok()) __builtin_trap();
  if (again.canonical != g.canonical || again.id != g.id) __builtin_trap();
  if (grit::decode_projection(again) != grit::decode_projection(g)) __builtin_trap();
  const grit::Descriptor d = grit::descriptor_for(g, grit::default_placements(g));
  if (grit::frame_mismatch(d, grit::frame_of(g)) != -1) __builtin_trap();
  return 0;
}

// What every AMX kernel needs before its first tile instruction: the tile
// configuration record (palette 1) and Linux's permission for this process
// to use the tile state. x86-64 Linux only; torch-free.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace grit {
namespace cpu {

// The 64-byte record ldtilecfg reads: per tile its rows and bytes per row.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Asks Linux for the tile state (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA);
// true when granted. Asking again is harmless.
inline bool request_tile_state() {
  constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
}

}  // namespace cpu
}  // namespace grit

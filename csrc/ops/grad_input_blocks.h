// grad_x = grad_y W for the CPU impls of packed_linear_grad_input (every
// grade, INT4G included): W is decoded block_rows rows at a time, never
// whole; threads own disjoint column ranges of grad_x (every batch row), and
// each element adds its n products in ascending n, so the result does not
// depend on the thread count, the block size or how the columns are split.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/op_args.h"

namespace grit_ops {

// decode(r0, r1, rows) writes rows [r0, r1) of W (row-major, k columns);
// accumulate(r0, r1, rows, c0, c1) adds their products into columns
// [c0, c1) of grad_x for every batch row.
template <class W, class Decode, class Accumulate>
void grad_input_blocks(int64_t n, int64_t k, int64_t m, int64_t block_rows, Decode&& decode,
                       Accumulate&& accumulate) {
  std::vector<W> rows(static_cast<size_t>(std::min(n, block_rows) * k));
  for (int64_t r0 = 0; r0 < n; r0 += block_rows) {
    const int64_t r1 = std::min(n, r0 + block_rows);
    decode(r0, r1, rows.data());
    const int64_t column_work = std::max<int64_t>(1, m * (r1 - r0));
    const int64_t grain = std::max<int64_t>(64, kLinearTaskWork / column_work);
    at::parallel_for(0, k, grain, [&](int64_t c0, int64_t c1) { accumulate(r0, r1, rows.data(), c0, c1); });
  }
}

}  // namespace grit_ops

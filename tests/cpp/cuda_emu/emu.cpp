// The CPU emulator's scheduler (emu.h): a block's threads are fibers on one
// OS thread, run round-robin; a fiber runs until it exits or reaches a
// barrier, and a barrier opens when every fiber it waits for (the block's,
// or the warp's, that have not exited) has reached it. A fiber starts on its
// own stack through makecontext/setcontext; every later switch is an
// _setjmp/_longjmp pair (no signal-mask system call, unlike swapcontext).
#include "emu.h"

#include "kernels/cuda/launch.cuh"  // GRIT_MAX_GRID_Y

#include <setjmp.h>
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

namespace grit_emu {
namespace {

constexpr size_t kStack = 256 * 1024;
enum class State { kRunnable, kBlockBarrier, kWarpBarrier, kDone };

struct Fiber {
  ucontext_t ctx;
  jmp_buf jb;
  bool started = false;
  std::unique_ptr<char[]> stack;
  dim3 tid;
  State state = State::kRunnable;
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<uint64_t> slots;  // one per thread: the shuffle mailbox
  jmp_buf main;
  int current = -1;
  const std::function<void()>* body = nullptr;
};

Block g_block;
int g_error = 0;

void fiber_entry() {
  (*g_block.body)();
  g_block.fibers[g_block.current].state = State::kDone;
  _longjmp(g_block.main, 1);
}

void wait(State s) {
  Fiber& f = g_block.fibers[g_block.current];
  f.state = s;
  if (!_setjmp(f.jb)) _longjmp(g_block.main, 1);
}

void resume(int t) {
  g_block.current = t;
  Fiber& f = g_block.fibers[t];
  if (_setjmp(g_block.main)) return;
  if (!f.started) {
    f.started = true;
    setcontext(&f.ctx);
  }
  _longjmp(f.jb, 1);
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "cuda_emu: %s (block %u,%u)\n", what, blockIdx.x, blockIdx.y);
  std::abort();
}

// Opens the barriers whose waiters are all there; false when none can open
// and no fiber can run (a deadlock: a barrier some thread never reaches).
bool release() {
  const int n = static_cast<int>(g_block.fibers.size());
  bool any_runnable = false, opened = false;
  int waiting_block = 0, alive = 0;
  for (auto& f : g_block.fibers) {
    if (f.state == State::kDone) continue;
    ++alive;
    if (f.state == State::kRunnable) any_runnable = true;
    if (f.state == State::kBlockBarrier) ++waiting_block;
  }
  if (alive > 0 && waiting_block == alive) {
    for (auto& f : g_block.fibers)
      if (f.state == State::kBlockBarrier) f.state = State::kRunnable;
    opened = true;
  }
  for (int w0 = 0; w0 < n; w0 += 32) {
    int warp_alive = 0, warp_waiting = 0;
    for (int i = w0; i < n && i < w0 + 32; ++i) {
      if (g_block.fibers[i].state == State::kDone) continue;
      ++warp_alive;
      if (g_block.fibers[i].state == State::kWarpBarrier) ++warp_waiting;
    }
    if (warp_alive > 0 && warp_waiting == warp_alive) {
      for (int i = w0; i < n && i < w0 + 32; ++i)
        if (g_block.fibers[i].state == State::kWarpBarrier) g_block.fibers[i].state = State::kRunnable;
      opened = true;
    }
  }
  return any_runnable || opened || alive == 0;
}

void run_block(unsigned threads) {
  if (g_block.fibers.size() < threads) {
    g_block.fibers.resize(threads);
    g_block.slots.resize(threads);
  }
  for (unsigned t = 0; t < threads; ++t) {
    Fiber& f = g_block.fibers[t];
    if (!f.stack) f.stack.reset(new char[kStack]);
    f.tid = dim3(t, 0, 0);
    f.state = State::kRunnable;
    f.started = false;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.get();
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_entry, 0);
  }
  for (;;) {
    bool ran = false;
    for (unsigned t = 0; t < threads; ++t) {
      if (g_block.fibers[t].state != State::kRunnable) continue;
      resume(static_cast<int>(t));
      ran = true;
    }
    bool done = true;
    for (unsigned t = 0; t < threads; ++t) done = done && g_block.fibers[t].state == State::kDone;
    if (done) break;
    if (!release() && !ran) fail("deadlock: a barrier that some thread never reaches");
  }
  g_block.current = -1;
}

}  // namespace

const dim3& thread_index() {
  if (g_block.current < 0) fail("threadIdx read outside a kernel");
  return g_block.fibers[g_block.current].tid;
}

void sync_block() { wait(State::kBlockBarrier); }

uint64_t exchange(uint64_t mine, int lane_xor) {
  const int t = g_block.current;
  g_block.slots[t] = mine;
  wait(State::kWarpBarrier);  // every lane has written
  const int partner = (t & ~31) | ((t & 31) ^ (lane_xor & 31));
  if (partner >= static_cast<int>(blockDim.x)) fail("shuffle with a lane outside the block");
  const uint64_t theirs = g_block.slots[partner];
  wait(State::kWarpBarrier);  // every lane has read
  return theirs;
}

void run_grid(dim3 grid, dim3 block, const std::function<void()>& body) {
  if (block.x == 0 || block.x > 1024 || block.y != 1 || block.z != 1 || grid.x == 0 || grid.y == 0 ||
      grid.y > GRIT_MAX_GRID_Y || grid.z != 1) {
    g_error = 9;  // cudaErrorInvalidConfiguration
    return;
  }
  gridDim = grid;
  blockDim = block;
  g_block.body = &body;
  for (unsigned y = 0; y < grid.y; ++y)
    for (unsigned x = 0; x < grid.x; ++x) {
      blockIdx = dim3(x, y, 0);
      run_block(block.x);
    }
  g_block.body = nullptr;
}

int take_last_error() {
  const int e = g_error;
  g_error = 0;
  return e;
}

}  // namespace grit_emu

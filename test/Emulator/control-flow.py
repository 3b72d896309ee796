# Divergence and reconvergence: nested branches, loops with a trip count per
# lane, a loop whose latch is laid out before the divergent branch it joins
# (as LLVM places it; lanes must meet at the join, not run ahead into the
# next iteration's shuffles), guarded and early returns, and bar.sync across
# warps, in a loop, with shared memory. Each kernel ends in a full-warp
# shuffle, which the emulator accepts only from converged lanes.
#
# REQUIRES: numpy
# RUN: %python %s %emulator | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from cudadriver import Driver
from emulatortest import Checks, module

driver = Driver(sys.argv[1])
checks = Checks()
THREADS = 128


def run(body, shared=""):
    """Runs `body` over one block of 128 threads; %tid holds the thread
    index and %v the value each thread stores (untouched memory reads as
    0xffffffff)."""
    ptx = module(f"""
.visible .entry kernel(.param .u64 out)
{{
  .reg .pred %p, %q;
  .reg .b32 %tid, %lane, %v, %t, %i, %n;
  .reg .b64 %address, %offset;
  {shared}
  mov.u32 %tid, %tid.x;
  mov.u32 %lane, %laneid;
  ld.param.u64 %address, [out];
  mul.wide.u32 %offset, %tid, 4;
  add.s64 %address, %address, %offset;
{body}
  st.global.b32 [%address], %v;
  ret;
}}""")
    out = driver.alloc(4 * THREADS)
    driver.launch(driver.function(driver.load(ptx), "kernel"), (1,), (THREADS,), ctypes.c_uint64(out))
    return driver.download(out, (THREADS,), np.uint32)


def butterfly(values, mask=1):
    """What a converged shfl.sync.bfly adds: each lane's partner's value."""
    values = np.asarray(values, np.int64)
    return np.array([values[t] + values[t ^ mask] for t in range(len(values))], np.int64) & 0xFFFFFFFF


# if (t & 1) { if (t & 2) v = 1; else v = 2; } else v = 3; then a shuffle.
got = run("""
  and.b32 %t, %tid, 1;
  setp.eq.u32 %p, %t, 0;
  @%p bra EVEN;
  and.b32 %t, %tid, 2;
  setp.eq.u32 %q, %t, 0;
  @%q bra ODD_LOW;
  mov.u32 %v, 1;
  bra.uni JOIN;
ODD_LOW:
  mov.u32 %v, 2;
  bra.uni JOIN;
EVEN:
  mov.u32 %v, 3;
JOIN:
  shfl.sync.bfly.b32 %t, %v, 1, 31, -1;
  add.u32 %v, %v, %t;""")
inner = [3 if t % 2 == 0 else (1 if t & 2 else 2) for t in range(THREADS)]
checks.equal(got, butterfly(inner), "nested if/else, then a shuffle")

# v = sum of i for i < lane: a loop of `lane` iterations.
got = run("""
  mov.u32 %v, 0;
  mov.u32 %i, 0;
  setp.eq.u32 %p, %lane, 0;
  @%p bra DONE;
LOOP:
  add.u32 %v, %v, %i;
  add.u32 %i, %i, 1;
  setp.lt.u32 %p, %i, %lane;
  @%p bra LOOP;
DONE:
  shfl.sync.bfly.b32 %t, %v, 16, 31, -1;
  add.u32 %v, %v, %t;""")
sums = [sum(range(t % 32)) for t in range(THREADS)]
checks.equal(got, butterfly(sums, 16), "loop with a trip count per lane")

# The latch comes first: lanes >= 9 jump back to it, the others add 100
# first. The shuffle at the top of the next iteration needs all lanes.
got = run("""
  mov.u32 %v, %lane;
  mov.u32 %i, 0;
  bra.uni HEAD;
LATCH:
  add.u32 %i, %i, 1;
  setp.lt.u32 %p, %i, 3;
  @%p bra HEAD;
  bra.uni DONE;
HEAD:
  shfl.sync.bfly.b32 %t, %v, 1, 31, -1;
  add.u32 %v, %v, %t;
  setp.ge.u32 %q, %lane, 9;
  @%q bra LATCH;
  add.u32 %v, %v, 100;
  bra.uni LATCH;
DONE:""")
v = np.array([t % 32 for t in range(THREADS)], np.int64)
for _ in range(3):
    v = butterfly(v).astype(np.int64)
    v = v + np.where(np.arange(THREADS) % 32 < 9, 100, 0)
checks.equal(got, v & 0xFFFFFFFF, "latch before the branch it joins")

# Odd lanes return early (guarded ret); the even ones shuffle among
# themselves with a matching membermask.
got = run("""
  and.b32 %t, %lane, 1;
  setp.ne.u32 %p, %t, 0;
  @%p ret;
  mov.u32 %v, %tid;
  shfl.sync.bfly.b32 %t, %v, 2, 31, 0x55555555;
  add.u32 %v, %v, %t;""")
expected = [t + (t ^ 2) if t % 2 == 0 else 0xFFFFFFFF for t in range(THREADS)]
checks.equal(got, expected, "guarded ret, then a shuffle among the remaining lanes")

# Lanes above 19 leave through a branch to a ret; the shuffle clamps at 19.
got = run("""
  setp.gt.u32 %p, %lane, 19;
  @%p bra LEAVE;
  mov.u32 %v, %tid;
  shfl.sync.down.b32 %t, %v, 1, 19, 0xfffff;
  add.u32 %v, %v, %t;
  bra.uni STORE;
LEAVE:
  ret;
STORE:""")
expected = [(t + (t + 1 if t % 32 < 19 else t)) if t % 32 <= 19 else 0xFFFFFFFF for t in range(THREADS)]
checks.equal(got, expected, "early exit through a branch")

# Barriers across four warps, reused in a loop: each round, every thread
# publishes its value and reads its neighbour's (in another warp for lane
# 31), which only barriers order.
got = run("""
  mov.u32 %v, %tid;
  mov.u32 %i, 0;
  mov.u64 %offset, buffer;
  cvt.u64.u32 %address, %tid;
  shl.b64 %address, %address, 2;
  add.s64 %address, %address, %offset;
  add.u32 %n, %tid, 1;
  and.b32 %n, %n, 127;
ROUND:
  st.shared.b32 [%address], %v;
  bar.sync 0;
  cvt.u64.u32 %offset, %n;
  shl.b64 %offset, %offset, 2;
  mov.u64 %address, buffer;
  add.s64 %offset, %offset, %address;
  ld.shared.b32 %t, [%offset];
  bar.sync 0;
  add.u32 %v, %t, 1;
  cvt.u64.u32 %address, %tid;
  shl.b64 %address, %address, 2;
  mov.u64 %offset, buffer;
  add.s64 %address, %address, %offset;
  add.u32 %i, %i, 1;
  setp.lt.u32 %p, %i, 3;
  @%p bra ROUND;
  ld.param.u64 %address, [out];
  mul.wide.u32 %offset, %tid, 4;
  add.s64 %address, %address, %offset;""", shared=".shared .align 4 .b8 buffer[512];")
checks.equal(got, [((t + 3) % THREADS) + 3 for t in range(THREADS)], "bar.sync rounds through shared memory")

checks.finish()

# shfl.sync in its four modes against CUDA's __shfl*_sync semantics: widths
# 32 down to 4 (the segment mask in c), up's lower bound, down's and bfly's
# upper bounds, idx within segments, lane offsets from registers, and the
# optional predicate that says whether the source lane was in range; plus a
# clamp value no CUDA intrinsic produces.
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
values = np.arange(64, dtype=np.uint32) * 1000 + 7


def shuffle(mode, b, c):
    """Runs shfl.sync.<mode>.b32 over two warps; returns (values, predicates)."""
    ptx = module(f"""
.visible .entry shuffle(.param .u64 out, .param .u64 in, .param .u64 predicates)
{{
  .reg .pred %p;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  mov.u32 %r0, %tid.x;
  mov.u32 %r5, %laneid;
  mul.wide.u32 %rd0, %r0, 4;
  ld.param.u64 %rd1, [in];
  add.s64 %rd2, %rd1, %rd0;
  ld.global.b32 %r1, [%rd2];
  mul.lo.u32 %r6, %r5, 7;
  shfl.sync.{mode}.b32 %r2|%p, %r1, {b}, {c}, -1;
  selp.b32 %r3, 1, 0, %p;
  ld.param.u64 %rd3, [out];
  add.s64 %rd4, %rd3, %rd0;
  st.global.b32 [%rd4], %r2;
  ld.param.u64 %rd5, [predicates];
  add.s64 %rd6, %rd5, %rd0;
  st.global.b32 [%rd6], %r3;
  ret;
}}""")
    function = driver.function(driver.load(ptx), "shuffle")
    out, predicates = driver.alloc(256), driver.alloc(256)
    driver.launch(function, (1,), (64,), ctypes.c_uint64(out), ctypes.c_uint64(driver.upload(values)),
                  ctypes.c_uint64(predicates))
    return driver.download(out, (64,), np.uint32), driver.download(predicates, (64,), np.uint32)


def expect(source_of):
    """Values and predicates when thread t reads source_of(lane) (None: its own,
    out of range) within its warp."""
    result, predicates = [], []
    for thread in range(64):
        lane, base = thread % 32, thread - thread % 32
        source = source_of(lane)
        result.append(values[base + (lane if source is None else source)])
        predicates.append(0 if source is None else 1)
    return np.array(result, np.uint32), np.array(predicates, np.uint32)


for width in (32, 16, 8, 4):
    segment = lambda lane: lane - lane % width
    c_up = (32 - width) << 8
    c_other = c_up | 0x1F
    for delta in (1, 2, 3, width // 2, width, 17, 32):
        # PTX uses b[4:0]: an offset of 32 reads the lane itself, in range.
        delta_bits = delta % 32
        up = lambda lane: lane - delta_bits if lane - delta_bits >= segment(lane) else None
        down = lambda lane: lane + delta_bits if lane + delta_bits < segment(lane) + width else None
        bfly = lambda lane: lane ^ delta_bits if lane ^ delta_bits < segment(lane) + width else None
        idx = lambda lane: segment(lane) + delta_bits % width
        for mode, c, reference in (("up", c_up, up), ("down", c_other, down), ("bfly", c_other, bfly),
                                   ("idx", c_other, idx)):
            got, got_predicates = shuffle(mode, delta, c)
            expected, expected_predicates = expect(reference)
            checks.equal(got, expected, f"shfl.sync.{mode} by {delta}, width {width}")
            checks.equal(got_predicates, expected_predicates, f"shfl.sync.{mode} by {delta}, width {width}: p")

# The source lane from a register: idx by 7 * lane, modulo the warp.
got, _ = shuffle("idx", "%r6", 0x1F)
checks.equal(got, expect(lambda lane: (7 * lane) % 32)[0], "shfl.sync.idx from a register")
# A clamp of 15 with no segments: lanes past 15 are out of range.
got, got_predicates = shuffle("bfly", 1, 15)
expected = expect(lambda lane: lane ^ 1 if lane ^ 1 <= 15 else None)
checks.equal(got, expected[0], "shfl.sync.bfly clamped at 15")
checks.equal(got_predicates, expected[1], "shfl.sync.bfly clamped at 15: p")

checks.finish()

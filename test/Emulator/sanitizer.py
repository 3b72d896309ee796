# Each of the emulator's checks catches a kernel written to break it, with
# the exact driver error and a message that names the kernel, the thread,
# its block and the PTX line: global accesses outside every allocation,
# misaligned vector accesses, shared accesses out of range, a shared-memory
# race, a read of uninitialized shared memory, barriers reached by part of a
# block (threads that exited, a diverged warp, a predicated bar.sync),
# shuffles and warp barriers naming unconverged lanes, shuffles reading
# inactive lanes, and launches
# beyond the device's or the kernel's limits. Faults are sticky until the
# primary context is reset; launch-configuration errors are not. The
# corrected kernels run clean.
#
# REQUIRES: numpy
# RUN: %python %s %emulator 2>%t.stderr | FileCheck %s
# RUN: FileCheck %s --check-prefix=STDERR < %t.stderr
# CHECK: all {{[0-9]+}} checks passed
# STDERR: fff-emulator: CUDA_ERROR_ILLEGAL_ADDRESS: kernel 'out_of_bounds', thread (4,0,0) of block (0,0,0)

import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from cudadriver import Driver
from emulatortest import Checks, module

CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_INVALID_PTX = 218
CUDA_ERROR_ILLEGAL_ADDRESS = 700
CUDA_ERROR_MISALIGNED_ADDRESS = 716
CUDA_ERROR_LAUNCH_FAILED = 719

driver = Driver(sys.argv[1])
checks = Checks()


def kernel(name, body, directives="", shared=""):
    """A kernel over a u64 buffer parameter, with %tid and %lane set and
    %buffer holding the buffer's address."""
    return module(f"""
.visible .entry {name}(.param .u64 buffer)
{directives}
{{
  .reg .pred %p;
  .reg .b32 %tid, %lane, %v, %t;
  .reg .b64 %buffer, %address, %offset;
  {shared}
  mov.u32 %tid, %tid.x;
  mov.u32 %lane, %laneid;
  ld.param.u64 %buffer, [buffer];
{body}
  ret;
}}""")


def line_of(ptx, text):
    lines = [number for number, line in enumerate(ptx.splitlines(), 1) if text in line]
    assert len(lines) == 1, (text, lines)
    return lines[0]


def launch(ptx, name, block, grid=(1,), shared=0):
    function = driver.function(driver.load(ptx), name)
    buffer = driver.alloc(256)
    return driver.launch_result(function, grid, block, ctypes.c_uint64(buffer), shared=shared)


def expect(result, code, label, *fragments):
    message = driver.error_string(result)
    checks.check(result == code, f"{label}: got {driver.error_name(result)}, wanted {code}: {message}")
    for fragment in fragments:
        checks.check(fragment in message, f"{label}: {fragment!r} is not in {message!r}")


def expect_fault(ptx, name, block, code, label, *fragments, grid=(1,)):
    expect(launch(ptx, name, block, grid), code, label, f"kernel '{name}'", *fragments)
    # Sticky: the context refuses work until it is reset.
    pointer = ctypes.c_uint64()
    checks.check(driver.lib.cuMemAlloc_v2(ctypes.byref(pointer), 16) == code, f"{label}: the error is not sticky")
    checks.check(driver.lib.cuCtxSynchronize() == code, f"{label}: cuCtxSynchronize does not report it")
    driver.reset()
    checks.check(driver.lib.cuCtxSynchronize() == 0, f"{label}: the reset did not clear it")


# Threads 4 and up read past the end of the 256-byte buffer.
ptx = kernel("out_of_bounds", """
  mul.wide.u32 %offset, %tid, 4;
  add.s64 %address, %buffer, %offset;
  ld.global.b32 %v, [%address+240];""")
expect_fault(ptx, "out_of_bounds", (32,), CUDA_ERROR_ILLEGAL_ADDRESS, "out of bounds", "thread (4,0,0)",
             "block (0,0,0)", f"line {line_of(ptx, 'ld.global')}", "4 bytes past the end of the 256-byte allocation",
             grid=(2,))

# A 16-byte load 4 bytes into the buffer.
ptx = kernel("misaligned", """
  ld.global.v4.b32 {%v, %t, %v, %t}, [%buffer+4];""")
expect_fault(ptx, "misaligned", (32,), CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned v4", "thread (0,0,0)",
             f"line {line_of(ptx, 'ld.global.v4')}", "is not 16-byte aligned")

# A shared store one word past a 128-byte array, by thread 32.
ptx = kernel("shared_out_of_range", """
  mul.wide.u32 %offset, %tid, 4;
  mov.u64 %address, words;
  add.s64 %address, %address, %offset;
  st.shared.b32 [%address], %tid;""", shared=".shared .align 4 .b8 words[128];")
expect_fault(ptx, "shared_out_of_range", (64,), CUDA_ERROR_ILLEGAL_ADDRESS, "shared out of range",
             "thread (32,0,0)", f"line {line_of(ptx, 'st.shared')}", "outside the block's 128 bytes")

# Each thread publishes its id, waits, reads its partner's in the other warp
# and overwrites its own slot; without a second barrier, warp 0's new
# values race with warp 1's reads.
race_body = """
  mul.wide.u32 %offset, %tid, 4;
  mov.u64 %address, words;
  add.s64 %address, %address, %offset;
  st.shared.b32 [%address], %tid;
  bar.sync 0;
  xor.b32 %t, %tid, 32;
  mul.wide.u32 %offset, %t, 4;
  mov.u64 %buffer, words;
  add.s64 %buffer, %buffer, %offset;
  ld.shared.b32 %v, [%buffer];
  {barrier}
  st.shared.b32 [%address], %v;"""
ptx = kernel("race", race_body.format(barrier=""), shared=".shared .align 4 .b8 words[256];")
expect_fault(ptx, "race", (64,), CUDA_ERROR_LAUNCH_FAILED, "shared race", "shared-memory race", "thread (32,0,0)",
             f"line {line_of(ptx, 'ld.shared')}", "write of byte 0 by thread (0,0,0)")
ptx = kernel("race_fixed", race_body.format(barrier="bar.sync 0;"), shared=".shared .align 4 .b8 words[256];")
expect(launch(ptx, "race_fixed", (64,)), 0, "the race with its barrier")

# A read of shared memory nobody wrote.
ptx = kernel("uninitialized", """
  mul.wide.u32 %offset, %tid, 4;
  mov.u64 %address, words;
  add.s64 %address, %address, %offset;
  st.shared.b16 [%address], %tid;
  ld.shared.b32 %v, [%address];""", shared=".shared .align 4 .b8 words[256];")
expect_fault(ptx, "uninitialized", (32,), CUDA_ERROR_LAUNCH_FAILED, "uninitialized shared read", "thread (0,0,0)",
             f"line {line_of(ptx, 'ld.shared')}", "reads uninitialized shared memory (byte 2 ")

# The second warp returns before the barrier.
ptx = kernel("partial_barrier", """
  setp.ge.u32 %p, %tid, 32;
  @%p ret;
  bar.sync 0;""")
expect_fault(ptx, "partial_barrier", (64,), CUDA_ERROR_LAUNCH_FAILED, "partial barrier", "block (0,0,0)",
             f"line {line_of(ptx, 'bar.sync')}", "bar.sync 0 is reached by only 32 of the block's 64 threads",
             f"thread (32,0,0) exited at line {line_of(ptx, '@%p ret')}")

# Half a warp waits at a barrier the other half skips.
ptx = kernel("divergent_barrier", """
  setp.ge.u32 %p, %lane, 16;
  @%p bra SKIP;
  bar.sync 0;
SKIP:""")
expect_fault(ptx, "divergent_barrier", (32,), CUDA_ERROR_LAUNCH_FAILED, "divergent barrier",
             "reached by only 16 of the block's 32 threads", "thread (16,0,0) is diverged from its warp",
             f"line {line_of(ptx, 'bar.sync')}")
ptx = kernel("predicated_barrier", """
  setp.ge.u32 %p, %lane, 16;
  @%p bar.sync 0;""")
expect_fault(ptx, "predicated_barrier", (32,), CUDA_ERROR_LAUNCH_FAILED, "predicated barrier", "thread (16,0,0)",
             f"line {line_of(ptx, 'bar.sync')}", "predicated off for lane 0")

# Half a warp shuffles with a full membermask.
ptx = kernel("bad_mask", """
  setp.ge.u32 %p, %lane, 16;
  @%p bra SKIP;
  shfl.sync.bfly.b32 %v, %tid, 1, 31, -1;
SKIP:""")
expect_fault(ptx, "bad_mask", (32,), CUDA_ERROR_LAUNCH_FAILED, "bad shuffle mask", "thread (0,0,0)",
             f"line {line_of(ptx, 'shfl.sync')}", "membermask 0xffffffff names lane 16, which is not converged")

# A 16-thread block: lane 0 reads lane 16, which does not exist.
ptx = kernel("inactive_source", """
  shfl.sync.bfly.b32 %v, %tid, 16, 31, 0xffff;""")
expect_fault(ptx, "inactive_source", (16,), CUDA_ERROR_LAUNCH_FAILED, "inactive source lane", "thread (0,0,0)",
             f"line {line_of(ptx, 'shfl.sync')}", "reads lane 16, which is inactive")

# Half a warp at a warp barrier with a full membermask; the converged warp
# passes it.
ptx = kernel("diverged_warp_sync", """
  setp.ge.u32 %p, %lane, 16;
  @%p bra SKIP;
  bar.warp.sync -1;
SKIP:""")
expect_fault(ptx, "diverged_warp_sync", (32,), CUDA_ERROR_LAUNCH_FAILED, "diverged warp barrier",
             "thread (0,0,0)", f"line {line_of(ptx, 'bar.warp.sync')}",
             "bar.warp.sync with membermask 0xffffffff names lane 16, which is not converged")
ptx = kernel("converged_warp_sync", "  bar.warp.sync -1;")
expect(launch(ptx, "converged_warp_sync", (64,)), 0, "a converged warp barrier")

# Launches beyond the limits fail without running and without sticking.
ptx = kernel("limited", "  mov.u32 %v, 0;", directives=".maxntid 64, 1, 1")
expect(launch(ptx, "limited", (33, 32)), CUDA_ERROR_INVALID_VALUE, "1056 threads",
       "block (33,32,1) has 1056 threads, above the device's 1024")
expect(launch(ptx, "limited", (2048,)), CUDA_ERROR_INVALID_VALUE, "2048 threads in x",
       "block (2048,1,1) exceeds the device's (1024,1024,64)")
expect(launch(ptx, "limited", (128,)), CUDA_ERROR_INVALID_VALUE, ".maxntid", "above its .maxntid (64,1,1)")
expect(launch(ptx, "limited", (64,), shared=49153), CUDA_ERROR_INVALID_VALUE, "dynamic shared memory",
       "exceed the 49152 a block may use")
ptx = kernel("required", "  mov.u32 %v, 0;", directives=".reqntid 32")
expect(launch(ptx, "required", (64,)), CUDA_ERROR_INVALID_VALUE, ".reqntid", "differs from its .reqntid (32,1,1)")
expect(launch(ptx, "required", (32,)), 0, "a launch within the limits")
ptx = kernel("too_much_shared", "  mov.u32 %v, 0;", shared=".shared .align 4 .b8 words[49156];")
module_handle = ctypes.c_void_p()
result = driver.lib.cuModuleLoadData(ctypes.byref(module_handle), ptx.encode())
expect(result, CUDA_ERROR_INVALID_PTX, "static shared memory", "uses 49156 bytes of static shared memory")

checks.finish()

#!/usr/bin/env python3
"""The PTX emulator's speed, in thread instructions per second on one core,
on real fff kernels run through their AOT host code and on a hand-written
arithmetic loop.

    python3 benchmarks/emulator/speed.py [--build build] [--rows 4096] [--repeat 5]

Each workload runs once with FFF_EMU_STATS set, to count the thread
instructions it executes, then --repeat times without statistics, timed;
the table gives the best time and the rate it implies. The emulator runs a
launch on the calling thread only. Nothing here asserts a speed; the table
is the result (docs/Emulator.md quotes it).
"""

import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--rows", type=int, default=4096, help="rows of the norms, tokens of the tree layer")
parser.add_argument("--repeat", type=int, default=5)
options = parser.parse_args()

emulator = os.path.abspath(os.path.join(options.build, "lib", "libfff_cuda_emulator.so"))
os.environ["FFF_CUDA_DRIVER"] = emulator  # what fff's runtime loads
os.environ.pop("FFF_EMU_STATS", None)
sys.path.insert(0, os.path.join(root, "test", "Emulator", "Inputs"))
from cudadriver import Driver  # noqa: E402

driver = Driver(emulator)
rng = np.random.default_rng(0)
HIDDEN, DEPTH = 768, 11
NODES = 2 ** (DEPTH + 1) - 1

MODULE = f"""
func.func @layer_norm(%x: tensor<?x{HIDDEN}xbf16>, %g: tensor<{HIDDEN}xbf16>, %b: tensor<{HIDDEN}xbf16>)
    -> tensor<?x{HIDDEN}xbf16> {{
  %y = fff.layer_norm %x scale(%g : tensor<{HIDDEN}xbf16>) bias(%b : tensor<{HIDDEN}xbf16>) : tensor<?x{HIDDEN}xbf16>
  return %y : tensor<?x{HIDDEN}xbf16>
}}
func.func @tree(%x: tensor<?x{HIDDEN}xbf16>, %wi: tensor<1x{NODES}x{HIDDEN}xbf16>, %bi: tensor<1x{NODES}xbf16>,
                %wo: tensor<1x{NODES}x{HIDDEN}xbf16>, %bo: tensor<{HIDDEN}xbf16>) -> tensor<?x{HIDDEN}xbf16> {{
  %y = fff.tree_ffn %x, %wi bias(%bi : tensor<1x{NODES}xbf16>), %wo bias(%bo : tensor<{HIDDEN}xbf16>)
         {{depth = {DEPTH} : i64}} : tensor<?x{HIDDEN}xbf16>, tensor<1x{NODES}x{HIDDEN}xbf16>, tensor<1x{NODES}x{HIDDEN}xbf16>
  return %y : tensor<?x{HIDDEN}xbf16>
}}
"""

# 64 blocks of 256 threads; each thread runs 256 iterations of a dependent
# fma/mul/add chain with its loop control (8 instructions an iteration).
ARITHMETIC = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry arithmetic(.param .u64 out)
{
  .reg .pred %p;
  .reg .b32 %i, %tid, %x, %y, %z;
  .reg .b64 %address, %offset;
  mov.u32 %tid, %tid.x;
  cvt.rn.f32.u32 %x, %tid;
  mov.b32 %y, 0f3F800000;
  mov.u32 %i, 0;
LOOP:
  fma.rn.f32 %y, %y, 0f3F7FF000, %x;
  mul.rn.f32 %z, %y, 0f3A800000;
  add.rn.f32 %x, %x, %z;
  max.NaN.f32 %x, %x, 0f00000000;
  sub.rn.f32 %y, %y, %z;
  add.s32 %i, %i, 1;
  setp.lt.u32 %p, %i, 256;
  @%p bra LOOP;
  ld.param.u64 %address, [out];
  mul.wide.u32 %offset, %tid, 4;
  add.s64 %address, %address, %offset;
  st.global.b32 [%address], %y;
  ret;
}
"""


def memref(pointer, shape):
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    return [ctypes.c_void_p(pointer)] * 2 + [ctypes.c_int64(v) for v in (0, *shape, *strides)]


def bf16(*shape, scale=1.0):
    values = (rng.standard_normal(shape) * scale).astype(np.float32).view(np.uint32)
    return ((values + 0x7FFF + ((values >> 16) & 1)) >> 16).astype(np.uint16)


def measure(run):
    """(thread instructions, best seconds) of `run`."""
    with tempfile.TemporaryDirectory() as tmp:
        stats = os.path.join(tmp, "stats.jsonl")
        os.environ["FFF_EMU_STATS"] = stats
        run()
        del os.environ["FFF_EMU_STATS"]
        with open(stats) as f:
            instructions = sum(json.loads(line)["thread_instructions"] for line in f)
    best = math.inf
    for _ in range(options.repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return instructions, best


with tempfile.TemporaryDirectory() as tmp:
    source, library_path = os.path.join(tmp, "speed.mlir"), os.path.join(tmp, "speed.so")
    with open(source, "w") as f:
        f.write(MODULE)
    subprocess.run([os.path.join(root, "scripts", "fff-aot.sh"), source, library_path, "chip=sm_90"], check=True)
    library = ctypes.CDLL(library_path)
library.fffGetLastError.restype = ctypes.c_char_p


def checked(call):
    def run():
        call()
        error = library.fffGetLastError()
        if error:
            sys.exit(f"fff's runtime: {error.decode()}")
    return run


rows = options.rows
x, y = driver.upload(bf16(rows, HIDDEN)), driver.alloc(rows * HIDDEN * 2)
gamma, beta = driver.upload(bf16(HIDDEN)), driver.upload(bf16(HIDDEN))
weights = [driver.upload(bf16(1, NODES, HIDDEN, scale=HIDDEN**-0.5)), driver.upload(bf16(1, NODES, scale=0.1)),
           driver.upload(bf16(1, NODES, HIDDEN, scale=0.1)), driver.upload(bf16(HIDDEN, scale=0.1))]
tokens = min(rows, 2048)  # the latency kernel's range
arithmetic = driver.function(driver.load(ARITHMETIC), "arithmetic")
out = driver.alloc(256 * 4)

workloads = [
    (f"layer_norm bf16 {HIDDEN} x {rows} rows", checked(lambda: library.layer_norm(
        *memref(x, (rows, HIDDEN)), *memref(gamma, (HIDDEN,)), *memref(beta, (HIDDEN,)), *memref(y, (rows, HIDDEN))))),
    (f"tree_ffn bf16 {HIDDEN} depth {DEPTH} x {tokens} tokens", checked(lambda: library.tree(
        *memref(x, (tokens, HIDDEN)), *memref(weights[0], (1, NODES, HIDDEN)), *memref(weights[1], (1, NODES)),
        *memref(weights[2], (1, NODES, HIDDEN)), *memref(weights[3], (HIDDEN,)), *memref(y, (tokens, HIDDEN))))),
    ("arithmetic loop, 64 x 256 threads", lambda: driver.launch(arithmetic, (64,), (256,), ctypes.c_uint64(out))),
]
print(f"{'workload':<44} {'thread instr.':>14} {'seconds':>9} {'M thread instr./s':>18}")
for name, run in workloads:
    instructions, seconds = measure(run)
    print(f"{name:<44} {instructions:>14,} {seconds:>9.3f} {instructions / seconds / 1e6:>18.0f}")

#!/usr/bin/env python3
"""Memory traffic of fff's GPU kernels, read from the PTX emulator: for each
norm, norm backward (alone, and as the fused unit of a pre-LN training step
with a dropout after the norm) and tree layer of the device check, the
bytes its kernels request and the 32-byte sectors those requests touch,
against the ideal: every distinct byte the call must read or write, once
(for a tree layer, the rows its tokens visit), and what that implies for
an H200.

This is a MODEL, not a measurement: the emulator counts requests as a GPU
receives them but models no cache, so sectors that a real L1 or L2 would
serve again (a norm's gamma for every row, a tree's top levels for every
token) are counted again, and no timing at all. The H200 time is a lower
bound: the ideal bytes at the HBM3e bandwidth of the datasheet (4.8 TB/s),
and at the device-to-device copy rate measured on one (about 4.3 TB/s,
/work/.library/device/KINDS.md). The device check (device_check.py)
measures the real times when a GPU is lent.

    python3 benchmarks/gpu/build.py             # the libraries, as for the device check
    python3 benchmarks/gpu/traffic.py [--rows 1024] [--tokens 1024]

Needs numpy and build/lib/libfff_cuda_emulator.so.
"""

import argparse
import ctypes
import json
import os
import sys
import tempfile

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", default=os.path.join(here, "out"), help="what build.py made")
parser.add_argument("--emulator", default=os.path.join(root, "build", "lib", "libfff_cuda_emulator.so"))
parser.add_argument("--rows", type=int, default=1024, help="rows per norm call")
parser.add_argument("--tokens", type=int, default=1024, help="tokens per tree layer call")
options = parser.parse_args()

HBM_BYTES_PER_US = 4.8e6     # H200 datasheet: 4.8 TB/s
COPY_BYTES_PER_US = 4.3e6    # a device-to-device copy measured on one

stats_path = os.path.join(tempfile.mkdtemp(prefix="fff-traffic-"), "launches.jsonl")
os.environ["FFF_CUDA_DRIVER"] = options.emulator
os.environ["FFF_EMU_STATS"] = stats_path
driver = ctypes.CDLL(options.emulator)
driver.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
driver.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
context = ctypes.c_void_p()
assert driver.cuInit(0) == 0 and driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0
driver.cuCtxSetCurrent(context)
rng = np.random.default_rng(0)


def device_array(shape, dtype, scale=1.0):
    """A device buffer of random values (bf16 as its raw bits; i8 as 0 or 1
    bytes, a keep mask); its memref arguments."""
    values = (rng.standard_normal(shape) * scale).astype(np.float32)
    if dtype == "bf16":
        values = (values.view(np.uint32) >> 16).astype(np.uint16)
    elif dtype == "i8":
        values = (values > -1.28).astype(np.int8)  # about 9 in 10 kept
    pointer = ctypes.c_uint64()
    assert driver.cuMemAlloc_v2(ctypes.byref(pointer), max(values.nbytes, 1)) == 0
    assert driver.cuMemcpyHtoD_v2(pointer.value, values.ctypes.data, values.nbytes) == 0
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    return [ctypes.c_void_p(pointer.value)] * 2 + [ctypes.c_int64(v) for v in (0, *shape, *strides)]


def launch_stats():
    with open(stats_path) as f:
        return [json.loads(line) for line in f]


def run(library, function, arrays):
    """Calls `function` on `arrays` ([(shape, dtype, scale)]); returns the
    statistics of the launches it made."""
    library.fffGetLastError.restype = ctypes.c_char_p
    before = len(launch_stats()) if os.path.exists(stats_path) else 0
    args = [a for shape, dtype, scale in arrays for a in device_array(shape, dtype, scale)]
    getattr(library, function)(*args)
    error = library.fffGetLastError()
    if error:
        sys.exit(f"{function}: {error.decode()}")
    return launch_stats()[before:]


def row(name, launches, ideal=None):
    """A table row; `ideal`, where given, is the bytes the call must move
    (its tensors, once), else the distinct bytes its launches touch."""
    distinct = sum(s["global_unique_bytes"] for s in launches)
    ideal = ideal or distinct
    requested = sum(s["global_load_bytes"] + s["global_store_bytes"] for s in launches)
    sectors = 32 * sum(s["global_load_sectors"] + s["global_store_sectors"] for s in launches)
    kernels = ", ".join(s["kernel"] for s in launches)
    print(f"| {name} | {kernels} | {ideal / 1e6:.2f} | {distinct / ideal:.2f} | {requested / ideal:.2f} | "
          f"{sectors / ideal:.2f} | {requested / sectors:.2f} | {ideal / HBM_BYTES_PER_US:.1f} | "
          f"{ideal / COPY_BYTES_PER_US:.1f} |")


manifest = json.load(open(os.path.join(options.out, "manifest.json")))
print("Model, not measurement (no caches, no timing). Ideal: the distinct bytes a call reads and writes\n"
      "(for a norm backward, its tensors once). Distinct: the bytes each launch touches, summed over the\n"
      "call's launches (a norm backward's partial column sums, written by its first kernel and read by its\n"
      "second, are its excess). Requested and sector bytes count every request (a real L1/L2 serves\n"
      "repeats: a norm's gamma for every row). Bytes requested per\n"
      "sector byte: 1 for perfectly coalesced accesses, below 1 for wasted sector bytes, above 1 where lanes\n"
      "share data. H200 lower bound: the ideal bytes at 4.8 TB/s (datasheet) and 4.3 TB/s (measured copy).\n"
      f"{options.rows} rows per norm, {options.tokens} tokens per tree layer.\n")
print("| case | kernel | ideal MB | distinct / ideal | requested / ideal | sectors / ideal | "
      "requested per sector byte | H200 us >= (4.8 TB/s) | (4.3 TB/s) |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")

norms = ctypes.CDLL(os.path.join(options.out, manifest["library"]))
for spec in manifest["functions"]:
    rows, hidden, dtype = options.rows, spec["hidden"], spec["dtype"]
    params = len(spec["args"]) - 2
    arrays = [((rows, hidden), dtype, 1.0)] + [((hidden,), dtype, 1.0)] * params + [((rows, hidden), dtype, 0.0)]
    row(f"{spec['op']} {rows}x{hidden} {dtype}", run(norms, spec["function"], arrays))

def grad_arrays(spec, rows):
    """The arguments of a norm backward of the build, by name: rows of the
    norm's width, f32 row statistics, parameters and their gradients, an
    i8 keep mask."""
    hidden, dtype = spec["hidden"], spec["dtype"]
    shapes = {"mean": ((rows, 1), "f32", 0.1), "rstd": ((rows, 1), "f32", 0.1), "keep": ((rows, hidden), "i8", 1.0)}
    for name in ("gamma", "dgamma", "dbeta"):
        shapes[name] = ((hidden,), dtype, 1.0)
    outputs = {"dx", "dh", "dgamma", "dbeta"}
    return [shapes.get(name, ((rows, hidden), dtype, 0.0 if name in outputs else 1.0)) for name in spec["args"]]


def tensor_bytes(arrays):
    size = {"f32": 4, "bf16": 2, "i8": 1}
    return sum(int(np.prod(shape)) * size[dtype] for shape, dtype, _ in arrays)


grads = ctypes.CDLL(os.path.join(options.out, manifest["grad_library"]))
for spec in manifest["grad_functions"] + manifest.get("fused_grad_functions", []):
    arrays = grad_arrays(spec, options.rows)
    row(f"{spec['function']} {options.rows} rows", run(grads, spec["function"], arrays), tensor_bytes(arrays))

trees = ctypes.CDLL(os.path.join(options.out, manifest["tree_libraries"]["auto"]))
for spec in manifest["tree_functions"]:
    tokens, width, depth, dtype = options.tokens, spec["width"], spec["depth"], spec["dtype"]
    if spec["op"] == "tree_ffn":
        nodes = 2 ** (depth + 1) - 1
        arrays = [((tokens, width), dtype, 1.0), ((1, nodes, width), dtype, width ** -0.5), ((1, nodes), dtype, 0.3),
                  ((1, nodes, width), dtype, 1.0), ((width,), dtype, 0.1), ((tokens, width), dtype, 0.0)]
    else:
        leaves, hidden = 2 ** depth, spec["leaf_width"]
        arrays = [((tokens, width), dtype, 1.0), ((leaves - 1, width), dtype, width ** -0.5), ((leaves - 1,), dtype, 0.3),
                  ((leaves, width, hidden), dtype, width ** -0.5), ((leaves, hidden), dtype, 0.3),
                  ((leaves, hidden, width), dtype, hidden ** -0.5), ((leaves, width), dtype, 0.1),
                  ((tokens, width), dtype, 0.0)]
    row(f"{spec['function']} B={tokens}", run(trees, spec["function"], arrays))

#!/usr/bin/env python3
"""The device check: runs every GPU kernel fff generates on an NVIDIA GPU,
checks it against PyTorch in float64, and times it side by side with a
device-to-device copy, PyTorch eager and torch.compile.

Build on a machine with fff (no GPU needed), then carry benchmarks/gpu/out:

    python3 benchmarks/gpu/build.py
    python3 benchmarks/gpu/device_check.py            # on the GPU machine
    python3 benchmarks/gpu/device_check.py --list     # anywhere: check the build

Needs only python3 with torch (and its CUDA runtime) on the GPU machine.
Prints one markdown table; `fff x` columns are the other implementation's
time over fff's (>1: fff is faster).
"""

import argparse
import ctypes
import json
import math
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", default=os.path.join(here, "out"), help="what build.py made")
parser.add_argument("--list", action="store_true", help="check the library exports every kernel, then stop")
parser.add_argument("--quick", action="store_true", help="one row count, fewer repetitions")
parser.add_argument("--rows", type=int, nargs="*", default=[4096, 16384, 32768])
options = parser.parse_args()

manifest = json.load(open(os.path.join(options.out, "manifest.json")))
library = ctypes.CDLL(os.path.join(options.out, manifest["library"]))
library.fffGetLastError.restype = ctypes.c_char_p
library.fffSetStream.argtypes = [ctypes.c_void_p]
missing = [f["function"] for f in manifest["functions"] if not hasattr(library, f["function"])]
if missing:
    sys.exit(f"the library lacks {missing}")
if options.list:
    for f in manifest["functions"]:
        print(f"{f['function']:<24} {f['op']:<10} {f['dtype']:<4} hidden={f['hidden']} args={','.join(f['args'])}")
    print(f"{len(manifest['functions'])} kernels exported by {manifest['library']} ({manifest['chip']})")
    sys.exit(0)

import torch  # noqa: E402  (only the GPU run needs it)
import torch.nn.functional as F  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
# ||y - ref|| / ||ref|| against float64 on the same (upcast) inputs: f32
# arithmetic lands far under 1e-5; bf16 outputs carry one rounding (~2e-3).
TOLERANCE = {"f32": 1e-5, "bf16": 8e-3}
L2_BYTES = 60 << 20


def memref_args(tensor):
    """MLIR's memref ABI: allocated and aligned pointers, offset, sizes, strides."""
    pointer = ctypes.c_void_p(tensor.data_ptr())
    return [pointer, pointer, ctypes.c_int64(0)] + [ctypes.c_int64(s) for s in tensor.shape] + \
        [ctypes.c_int64(s) for s in tensor.stride()]


def check_error(what):
    error = library.fffGetLastError()
    if error is not None:
        sys.exit(f"{what}: {error.decode()}")


def graph_time_us(step, sets, calls=20, replays=10):
    """Median time of one step, from CUDA-graph replays of `calls` steps that
    rotate over `sets` input sets (so that inputs do not sit in L2)."""
    for i in range(3):
        step(sets[i % len(sets)])
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        library.fffSetStream(ctypes.c_void_p(stream.cuda_stream))
        with torch.cuda.graph(graph, stream=stream):
            for i in range(calls):
                step(sets[i % len(sets)])
    library.fffSetStream(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return sorted(times)[len(times) // 2]


def reference(spec, x, gamma, beta):
    x64, g64 = x.double(), gamma.double()
    if spec["op"] == "layer_norm":
        return F.layer_norm(x64, (spec["hidden"],), g64, beta.double(), spec["epsilon"])
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + spec["epsilon"]) * g64


def torch_norm(spec):
    hidden, eps = spec["hidden"], spec["epsilon"]
    if spec["op"] == "layer_norm":
        return lambda s: F.layer_norm(s["x"], (hidden,), s["gamma"], s["beta"], eps)
    return lambda s: F.rms_norm(s["x"], (hidden,), s["gamma"], eps)


compiled_norms = {}


def run_case(spec, rows):
    dtype = DTYPES[spec["dtype"]]
    hidden = spec["hidden"]
    function = getattr(library, spec["function"])
    bytes_moved = 2 * rows * hidden * torch.finfo(dtype).bits // 8
    sets = []
    for _ in range(max(1, math.ceil(3 * L2_BYTES / bytes_moved))):
        sets.append({
            "x": torch.randn(rows, hidden, device="cuda", dtype=dtype) * 2 + 0.5,
            "gamma": torch.randn(hidden, device="cuda", dtype=dtype),
            "beta": torch.randn(hidden, device="cuda", dtype=dtype),
            "y": torch.full((rows, hidden), float("nan"), device="cuda", dtype=dtype),
        })
        if len(sets) * bytes_moved > (8 << 30):
            break

    def fff_step(s):
        function(*[a for name in spec["args"] for a in memref_args(s[name])])

    # Correctness on fresh data, output poisoned with NaN beforehand.
    library.fffSetStream(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    s = sets[0]
    fff_step(s)
    torch.cuda.synchronize()
    check_error(spec["function"])
    ref = reference(spec, s["x"], s["gamma"], s["beta"])
    y = s["y"].double()
    error = ((y - ref).norm() / ref.norm()).item() if torch.isfinite(y).all() else float("inf")
    ok = error <= TOLERANCE[spec["dtype"]]

    eager = torch_norm(spec)
    # One compiled function per kernel, reused across row counts: after the
    # second shape torch.compile generalizes to a dynamic batch instead of
    # recompiling for each.
    compiled = compiled_norms.setdefault(spec["function"], torch.compile(eager))
    copy_us = graph_time_us(lambda s: s["y"].copy_(s["x"]), sets)
    fff_us = graph_time_us(fff_step, sets)
    check_error(spec["function"])
    eager_us = graph_time_us(eager, sets)
    compiled_us = graph_time_us(compiled, sets)
    return {"case": f"{spec['op']} {rows}x{hidden} {spec['dtype']}", "ok": ok, "error": error,
            "fff_us": fff_us, "gbs": bytes_moved / fff_us / 1e3, "copy_fraction": copy_us / fff_us,
            "vs_eager": eager_us / fff_us, "vs_compile": compiled_us / fff_us, "hidden": hidden}


def main():
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows_list = options.rows[:1] if options.quick else options.rows
    results = []
    print("| case | correct (rel. err) | fff us | GB/s | of copy | fff x eager | fff x compile |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for spec in manifest["functions"]:
        for rows in rows_list:
            r = run_case(spec, rows)
            results.append(r)
            print(f"| {r['case']} | {'yes' if r['ok'] else 'NO'} ({r['error']:.1e}) | {r['fff_us']:.1f} | "
                  f"{r['gbs']:.0f} | {r['copy_fraction']:.0%} | {r['vs_eager']:.2f} | {r['vs_compile']:.2f} |",
                  flush=True)
    geomean = math.exp(sum(math.log(r["vs_compile"]) for r in results) / len(results))
    slower = [r["case"] for r in results if r["vs_compile"] < 1.0]
    under90 = [r["case"] for r in results if r["hidden"] >= 4096 and r["copy_fraction"] < 0.9]
    wrong = [r["case"] for r in results if not r["ok"]]
    print(f"\n{len(results)} cases; wrong: {len(wrong)}; geomean speedup vs torch.compile: {geomean:.2f}x; "
          f"slower than torch.compile: {len(slower)}; hidden>=4096 under 90% of copy bandwidth: {len(under90)}")
    for label, cases in (("wrong", wrong), ("slower than torch.compile", slower), ("under 90% of copy", under90)):
        if cases:
            print(f"{label}: {', '.join(cases)}")
    return 1 if wrong else 0


sys.exit(main())

# fff.tree_ffn's and fff.tree_ffn_grad's `zero_goes_right` end to end, on
# every lowering: the CPU pipeline (vector kernels, threaded and not), the
# scalar reference lowering, and the GPU kernels on fff's PTX emulator
# (latency and throughput forward kernels, the backward's kernels), against
# float64 numpy. The inputs are small integers, whose logits are exact and
# exactly 0 on many of the rows' paths: a lowering that sent such a row
# left would be far off (the test checks that the two directions' results
# differ by more than 10% on its data).
#
# REQUIRES: numpy
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %emulator %fff_src_root/scripts/fff-aot.sh %t | FileCheck %s
# CHECK: tree kernels run: latency, throughput, walk
# CHECK: all {{[0-9]+}} checks passed

import os
import sys

import numpy as np

import emulated
from emulated import Device
from fffcheck import (TOLERANCE, Checker, dequantize, quantize, relative_error, run, tree_ffn_function,
                      tree_ffn_grad_function, tree_ffn_grad_ref, tree_ffn_paths)

emulator, aot, work = sys.argv[1:]
os.environ["FFF_CUDA_DRIVER"] = emulator
stats = os.path.join(work, "launches.jsonl")
os.environ["FFF_EMU_STATS"] = stats
rng = np.random.default_rng(20261207)
check = Checker()
device = Device(emulator)
STORAGE = {"f32": np.float32, "bf16": np.uint16}
DIN, DOUT, TREES, DEPTH = 24, 16, 2, 3
NODES = 2 ** (DEPTH + 1) - 1


def small_integers(*shape, density=1.0):
    return rng.integers(-1, 2, shape).astype(np.float64) * (rng.random(shape) < density)


def inputs(rows, dtype):
    """x, w_in, b_in of small integers (rows of about four nonzero entries),
    w_out and dy random; each as (storage array, float64 values)."""
    return [quantize(v, dtype) for v in (small_integers(rows, DIN, density=4 / DIN), small_integers(TREES, NODES, DIN),
                                         small_integers(TREES, NODES), rng.standard_normal((TREES, NODES, DOUT)),
                                         rng.standard_normal((rows, DOUT)))]


def forward_ref(x, w_in, b_in, w_out, zero_goes_right):
    return tree_ffn_paths(x, w_in, b_in, w_out, None, DEPTH, "gelu", zero_goes_right)[0]


def names(dtype):
    return f"fwd_{dtype}", f"grad_{dtype}"


def functions(dtype):
    forward, grad = names(dtype)
    return [tree_ffn_function(dtype, None, DIN, DOUT, TREES, DEPTH, "gelu", True, True, False, name=forward,
                              zero_goes_right=True),
            tree_ffn_grad_function(dtype, None, DIN, DOUT, TREES, DEPTH, "gelu", True, True, False, name=grad,
                                   zero_goes_right=True)]


def check_results(label, dtype, got, expected):
    for what, actual, want in zip(("y", "dx", "dw_in", "dw_out", "db_in"), got, expected):
        check.close(f"{label} {what}", dequantize(actual, dtype), want, TOLERANCE[dtype])


library = emulated.build(aot, work, "zero_goes_right", functions("f32") + functions("bf16"))

for dtype in ("f32", "bf16"):
    forward, grad = names(dtype)
    storage = STORAGE[dtype]
    # The latency kernel's batch, and past kTreeLatencyBoundTokens (2048):
    # the throughput kernel's.
    for rows in (64, 2100):
        (x_arr, x), (wi_arr, w_in), (bi_arr, b_in), (wo_arr, w_out), (dy_arr, dy) = inputs(rows, dtype)
        y = forward_ref(x, w_in, b_in, w_out, True)
        left = forward_ref(x, w_in, b_in, w_out, False)
        check.equal(f"{dtype} B={rows}: the data's ties matter", bool(relative_error(left, y) > 0.1), True)
        expected = [y, *tree_ffn_grad_ref(dy, x, w_in, b_in, w_out, DEPTH, "gelu", zero_goes_right=True)[:4]]
        cpu_module = "\n".join(functions(dtype))
        for flags in (["--threads", "1"], ["--threads", "2"], ["--reference"]):
            (y_cpu,) = run(cpu_module, forward, [x_arr, wi_arr, bi_arr, wo_arr], 1, extra_flags=flags)
            grads = run(cpu_module, grad, [dy_arr, x_arr, wi_arr, bi_arr, wo_arr], 4, extra_flags=flags)
            check_results(f"cpu {' '.join(flags)} {dtype} B={rows}", dtype, [y_cpu, *grads], expected)
        y_gpu = emulated.call(device, library, forward, [x_arr, wi_arr, bi_arr, wo_arr], [((rows, DOUT), storage)])
        grads_gpu = emulated.call(device, library, grad, [dy_arr, x_arr, wi_arr, bi_arr, wo_arr],
                                  [((rows, DIN), storage), ((TREES, NODES, DIN), storage),
                                   ((TREES, NODES, DOUT), storage), ((TREES, NODES), storage)])
        for what, out in (("forward", y_gpu), ("backward", grads_gpu)):
            if isinstance(out, str):
                check.failures.append(f"gpu {dtype} B={rows} {what}: {out}")
        if not isinstance(y_gpu, str) and not isinstance(grads_gpu, str):
            check_results(f"gpu {dtype} B={rows}", dtype, [*y_gpu, *grads_gpu], expected)

phases = sorted({name.rsplit("_", 1)[1] for name in emulated.launches(stats)
                 if name.rsplit("_", 1)[1] in ("latency", "throughput", "walk")})
print("tree kernels run: " + ", ".join(phases))
check.finish()

# leaf_tree_ffn through --fff-cpu-pipeline and fff-run, against a float64
# numpy reference, including the leaf each row is routed to.
#
# With --gpu-twin=latency or =throughput, the same cases run that GPU
# kernel's CPU twin (see tree-ffn-numeric.py).
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# RUN: %python %s --gpu-twin=latency | FileCheck %s
# RUN: %python %s --gpu-twin=throughput | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import sys

import numpy as np

from fffcheck import (TOLERANCE, Checker, dequantize, leaf_tree_ffn_function, leaf_tree_ffn_paths, quantize, run,
                      stable_rows)

rng = np.random.default_rng(8)
check = Checker()
TWIN = next((a.split("=")[1] for a in sys.argv[1:] if a.startswith("--gpu-twin=")), None)
LOWERING = [f"--convert-fff-to-gpu=cpu-twin tree-variant={TWIN}"] if TWIN else []


def case(dtype, rows, din, width, dout, depth, activation="relu", dynamic=True):
    leaves = 2**depth
    x_arr, x = quantize(rng.standard_normal((rows, din)), dtype)
    nw_arr, nw = quantize(rng.standard_normal((leaves - 1, din)) / np.sqrt(din), dtype)
    nb_arr, nb = quantize(rng.standard_normal(leaves - 1) * 0.3, dtype)
    w1_arr, w1 = quantize(rng.standard_normal((leaves, din, width)) / np.sqrt(din), dtype)
    b1_arr, b1 = quantize(rng.standard_normal((leaves, width)) * 0.3, dtype)
    w2_arr, w2 = quantize(rng.standard_normal((leaves, width, dout)) / np.sqrt(width), dtype)
    b2_arr, b2 = quantize(rng.standard_normal((leaves, dout)), dtype)

    (y,) = run(leaf_tree_ffn_function("f", dtype, rows, din, width, dout, depth, activation, dynamic),
               "f", [x_arr, nw_arr, nb_arr, w1_arr, b1_arr, w2_arr, b2_arr], 1, lowering=LOWERING)
    ref, leaf, scores = leaf_tree_ffn_paths(x, nw, nb, w1, b1, w2, b2, depth, activation)
    keep = stable_rows(x, nw, scores)
    name = f"{dtype} B={rows} Din={din} W={width} Dout={dout} depth={depth} {activation}"
    check.close(f"leaf_tree_ffn {name} ({keep.sum()}/{rows} rows)", dequantize(y, dtype)[keep], ref[keep], TOLERANCE[dtype])

    # The route, read back through the op: with w1 = 0, b1 = 1 (W = 1), relu,
    # w2[l] = one-hot(l) and b2 = 0, output column l is 1 exactly for the leaf
    # the row was routed to.
    probe_w1, _ = quantize(np.zeros((leaves, din, 1)), dtype)
    probe_b1, _ = quantize(np.ones((leaves, 1)), dtype)
    probe_w2, _ = quantize(np.eye(leaves).reshape(leaves, 1, leaves), dtype)
    probe_b2, _ = quantize(np.zeros((leaves, leaves)), dtype)
    (onehot,) = run(leaf_tree_ffn_function("route", dtype, rows, din, 1, leaves, depth, "relu", dynamic),
                    "route", [x_arr, nw_arr, nb_arr, probe_w1, probe_b1, probe_w2, probe_b2], 1,
                    lowering=LOWERING)
    onehot = dequantize(onehot, dtype)
    check.equal(f"leaf_tree_ffn route {name}", onehot[keep], np.eye(leaves)[leaf[keep]])


for depth in range(1, 9):
    for width in (1, 32):
        case("f32", 29, 40, width, 24, depth, dynamic=depth % 2 == 0)
for activation in ("gelu", "gelu_tanh", "silu", "identity"):
    case("f32", 13, 17, 8, 5, 3, activation)
for dtype in ("f16", "bf16"):
    case(dtype, 21, 64, 32, 48, 4, "gelu")
    case(dtype, 1, 3, 1, 1, 2, "relu", dynamic=False)
# Wide rows with tails, a leaf of 64 (the GPU kernel's widest).
case("bf16", 7, 1000, 64, 333, 3, "gelu")
check.finish()

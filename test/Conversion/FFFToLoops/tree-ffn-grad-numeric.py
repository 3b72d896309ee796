# tree_ffn_grad through --fff-cpu-pipeline and fff-run, against a float64
# straight-loop reference written from the op's definition (the derivative of
# each activation taken by central differences, not from a closed form), on
# random data: every activation, depths 0 to 11 and 20, one and several
# trees, odd widths, with and without biases, f32/f16/bf16, a batch of one.
# Also: a logit of exactly 0 goes left in the backward as in the forward, the
# gradients have the same bits for 1 and 3 threads, and nodes no row visits
# get zeros.
#
# Runs through the vector lowering (convert-fff-trees-to-vector, at this
# host's vector width and at 256 bits) and the scalar reference
# (convert-fff-to-loops, fff-run --reference).
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# RUN: %python %s --vector-bits=256 | FileCheck %s
# RUN: %python %s --reference | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import sys

import numpy as np

from fffcheck import ACTIVATIONS, TOLERANCE, Checker, dequantize, quantize, stable_tree_inputs, tree_ffn_grad_function
from fffcheck import run as fffcheck_run

rng = np.random.default_rng(27)
check = Checker()
FLAGS = sys.argv[1:]  # fff-run's: --reference, --vector-bits=N


def run(mlir, func, args, count, extra_flags=()):
    return fffcheck_run(mlir, func, args, count, extra_flags=[*FLAGS, *extra_flags])


def slope(activation, logit, step=1e-5):
    act = ACTIVATIONS[activation]
    return (act(logit + step) - act(logit - step)) / (2 * step)


def reference(dy, x, w_in, b_in, w_out, depth, activation):
    """dx, dw_in, dw_out, db_in, db_out, a row, a tree and a level at a time."""
    act = ACTIVATIONS[activation]
    dx, dw_in, dw_out = np.zeros_like(x), np.zeros_like(w_in), np.zeros_like(w_out)
    db_in = np.zeros(w_in.shape[:2])
    for row in range(x.shape[0]):
        for tree in range(w_in.shape[0]):
            node = 0
            for _ in range(depth + 1):
                logit = x[row] @ w_in[tree, node] + (b_in[tree, node] if b_in is not None else 0.0)
                dl = (dy[row] @ w_out[tree, node]) * slope(activation, logit)
                dw_out[tree, node] += act(logit) * dy[row]
                dx[row] += dl * w_in[tree, node]
                dw_in[tree, node] += dl * x[row]
                db_in[tree, node] += dl
                node = 2 * node + 1 + (1 if logit > 0 else 0)
    return dx, dw_in, dw_out, db_in, dy.sum(0)


def case(dtype, rows, din, dout, trees, depth, activation, in_bias=True, out_bias=True, dynamic=True):
    nodes = 2 ** (depth + 1) - 1
    w_in_arr, w_in = quantize(rng.standard_normal((trees, nodes, din)) / np.sqrt(din), dtype)
    w_out_arr, w_out = quantize(rng.standard_normal((trees, nodes, dout)) / np.sqrt(depth + 1), dtype)
    b_in_arr, b_in = quantize(rng.standard_normal((trees, nodes)) * 0.3, dtype)
    if not in_bias:
        b_in = None
    x_arr, x = stable_tree_inputs(rng, rows, din, dtype, w_in, b_in, depth)
    dy_arr, dy = quantize(rng.standard_normal((rows, dout)), dtype)

    args = [dy_arr, x_arr, w_in_arr] + ([b_in_arr] if in_bias else []) + [w_out_arr]
    mlir = tree_ffn_grad_function(dtype, rows, din, dout, trees, depth, activation, dynamic, in_bias, out_bias)
    count = 3 + in_bias + out_bias
    results = run(mlir, "grad", args, count)
    dx, dw_in, dw_out, db_in, db_out = reference(dy, x, w_in, b_in, w_out, depth, activation)
    expected = [("dx", dx), ("dw_in", dw_in), ("dw_out", dw_out)]
    expected += [("db_in", db_in)] if in_bias else []
    expected += [("db_out", db_out)] if out_bias else []
    name = f"{dtype} B={rows} Din={din} Dout={dout} K={trees} depth={depth} {activation}"
    for (what, want), got in zip(expected, results):
        check.close(f"tree_ffn_grad {what} {name}", dequantize(got, dtype), want, TOLERANCE[dtype])
    return mlir, args, count


for activation in ("gelu", "gelu_tanh", "relu", "silu", "identity"):
    case("f32", 23, 48, 40, trees=1, depth=5, activation=activation)
for depth in (0, 1, 5):
    for trees in (1, 3):
        case("f32", 17, 33, 20, trees, depth, "gelu", in_bias=depth != 1, out_bias=trees == 1,
             dynamic=depth % 2 == 1)
for dtype in ("f16", "bf16"):
    case(dtype, 19, 64, 24, trees=3, depth=5, activation="gelu")
    case(dtype, 1, 127, 9, trees=1, depth=6, activation="silu", in_bias=False, dynamic=False)
# UltraFastBERT-1x11's shape (most nodes unvisited), and the deepest trees.
case("f32", 5, 768, 768, trees=1, depth=11, activation="gelu")
# Two such trees: the vector walk regroups each tree's tokens in turn, and
# dx sums the trees in order.
case("f32", 40, 768, 768, trees=2, depth=11, activation="gelu")
case("f32", 3, 4, 8, trees=1, depth=20, activation="gelu", out_bias=False)

# Bitwise the same for 1 and 3 threads, on a batch large enough to be split
# (the walk over rows, the sums over column slabs).
# Then at UltraFastBERT-1x11's width and depth, where the vector walk
# regroups the tokens below a level (on a cache of a few MiB) and the f32
# weight gradients, rows of whole slabs, are stored past the caches.
for shape in ((96, 200, 130, 2, 4), (200, 768, 768, 1, 11)):
    rows, din, dout, trees, depth = shape
    mlir, args, count = case("f32", rows, din, dout, trees=trees, depth=depth, activation="gelu")
    one = run(mlir, "grad", args, count, extra_flags=["--threads", "1"])
    three = run(mlir, "grad", args, count, extra_flags=["--threads", "3"])
    check.equal(f"tree_ffn_grad 1 and 3 threads give the same bits, B={rows} Din={din} depth={depth}",
                all(np.array_equal(a, b) for a, b in zip(one, three)), True)

# A root logit of exactly 0 goes left: x . w_in[0] = 1 - 1 = 0, no bias.
# The row visits nodes 0 and 1; node 2 (the right child) gets nothing.
din = dout = 4
w_in = np.zeros((1, 3, din), np.float32)
w_in[0, 0] = [1, -1, 0, 0]
w_in[0, 1:] = rng.standard_normal((2, din))
w_out = rng.standard_normal((1, 3, dout)).astype(np.float32)
x = np.array([[0.75, 0.75, 0.5, -0.25]], np.float32)
dy = rng.standard_normal((1, dout)).astype(np.float32)
tie = tree_ffn_grad_function("f32", 1, din, dout, 1, 1, "gelu", True, False, False)
dx, dw_in, dw_out = run(tie, "grad", [dy, x, w_in, w_out], 3)
expected = reference(*(a.astype(np.float64) for a in (dy, x, w_in)), None, w_out.astype(np.float64), 1, "gelu")
check.close("tree_ffn_grad tie at 0: dx", dx, expected[0], 2e-5)
check.equal("tree_ffn_grad tie at 0: the right child gets no gradient", (dw_in[0, 2] == 0).all() and
            (dw_out[0, 2] == 0).all() and (dw_in[0, 1] != 0).any(), True)
check.finish()

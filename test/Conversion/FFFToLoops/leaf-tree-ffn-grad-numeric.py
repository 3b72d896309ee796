# leaf_tree_ffn_grad through --fff-cpu-pipeline and fff-run, against a
# float64 straight-loop reference written from the op's definition (a row at
# a time; the derivative of each activation by central differences, not a
# closed form), on random data: every activation, depths 1 to 8, leaves of
# one unit and wide ones, odd widths, f32/f16/bf16, a batch of one, leaves
# no row reaches. Also: a score of exactly 0 routes right in the backward as
# in the forward, and the gradients have the same bits for 1 and 3 threads.
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

from fffcheck import (LEAF_TIE_WIDTHS, TOLERANCE, Checker, check_leaf_tie, dequantize, leaf_tie_inputs,
                      leaf_tree_ffn_grad_function, leaf_tree_ffn_grad_ref, random_leaf_grad_inputs)
from fffcheck import run as fffcheck_run

rng = np.random.default_rng(28)
check = Checker()
FLAGS = sys.argv[1:]  # fff-run's: --reference, --vector-bits=N


def run(mlir, func, args, count, extra_flags=()):
    return fffcheck_run(mlir, func, args, count, extra_flags=[*FLAGS, *extra_flags])


def case(dtype, rows, din, width, dout, depth, activation="relu", dynamic=True):
    args, values = random_leaf_grad_inputs(rng, dtype, rows, din, width, dout, depth)
    mlir = leaf_tree_ffn_grad_function(dtype, rows, din, width, dout, depth, activation, dynamic)
    results = run(mlir, "grad", args, 5)
    expected = leaf_tree_ffn_grad_ref(*values, depth, activation)
    name = f"{dtype} B={rows} Din={din} W={width} Dout={dout} depth={depth} {activation}"
    for what, want, got in zip(("dx", "dw1", "db1", "dw2", "db2"), expected, results):
        check.close(f"leaf_tree_ffn_grad {what} {name}", dequantize(got, dtype), want, TOLERANCE[dtype])
    return mlir, args, results


for activation in ("gelu", "gelu_tanh", "relu", "silu", "identity"):
    case("f32", 23, 40, 8, 24, 3, activation)
for depth in range(1, 9):
    for width in (1, 33):
        case("f32", 29, 40, width, 24, depth, dynamic=depth % 2 == 0)
for dtype in ("f16", "bf16"):
    case(dtype, 21, 64, 32, 48, 4, "gelu")
    case(dtype, 1, 3, 1, 1, 2, "relu", dynamic=False)
# Wide rows with tails; more leaves than rows (most get zero gradients).
case("bf16", 7, 1000, 64, 333, 3, "gelu")
_, _, (_, dw1, db1, dw2, db2) = case("f32", 5, 33, 4, 17, 6, "silu")
reached = np.abs(db2).sum(axis=1) > 0
check.equal("leaf_tree_ffn_grad: leaves no row reaches get zeros",
            int(reached.sum()) <= 5 and not dw1[~reached].any() and not db1[~reached].any() and
            not dw2[~reached].any(), True)

# Bitwise the same for 1 and 3 threads, on a batch large enough to be split
# (the rows, and the blocks of the sums: 768 wide, 24 blocks a leaf).
mlir, args, _ = case("f32", 300, 768, 12, 768, 4, "gelu")
one = run(mlir, "grad", args, 5, extra_flags=["--threads", "1"])
three = run(mlir, "grad", args, 5, extra_flags=["--threads", "3"])
check.equal("leaf_tree_ffn_grad 1 and 3 threads give the same bits",
            all(np.array_equal(a, b) for a, b in zip(one, three)), True)

# A root score of exactly 0 routes right, as in the forward.
tie_inputs = leaf_tie_inputs(rng)
tie = leaf_tree_ffn_grad_function("f32", 1, *LEAF_TIE_WIDTHS, 1, "identity", True)
check_leaf_tie(check, "leaf_tree_ffn_grad tie at 0", tie_inputs, run(tie, "grad", tie_inputs, 5))
check.finish()

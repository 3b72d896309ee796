# fff.leaf_tree_ffn_grad's GPU kernels end to end without a GPU: the op goes
# through scripts/fff-aot.sh (the real PTX, host code and fff's CUDA
# runtime) and runs on fff's PTX emulator, with its memory, race and barrier
# checks, against a float64 reference written a row at a time from the
# op's definition (the activations' derivatives by central differences), on
# random data:
#
#   - every activation; depths 1 to 8; leaves of 1, 5, 12, 33 and 64 units
#     (the widest the kernel takes; 33 and 64 take the sums in two and
#     four passes); odd and dynamic widths; f32, f16 and bf16;
#   - batches of 1, of a few, of more rows than the counting sort has chunks
#     (chunks of several rows), and of none (zero gradients); leaves no row
#     reaches get zeros;
#   - inputs inside larger allocations; a second call gives the same bits;
#   - a score of exactly 0 routes right, as the forward does;
#   - the leaves are the GPU forward kernel's: on rows whose every score is
#     rounding noise, each row's gradient lands on the leaf the forward
#     kernel took (read off its output).
#
# REQUIRES: numpy
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %emulator %fff_src_root/scripts/fff-aot.sh %t | FileCheck %s
# CHECK: leaf tree backward kernels run: count, scan, scatter, sums, walk
# CHECK: all {{[0-9]+}} checks passed

import os
import re
import sys

import numpy as np

import emulated
from emulated import Device
from fffcheck import (LEAF_TIE_WIDTHS, TOLERANCE, Checker, check_leaf_tie, dequantize, leaf_tie_inputs,
                      leaf_tree_ffn_function, leaf_tree_ffn_grad_function, leaf_tree_ffn_grad_ref,
                      random_leaf_grad_inputs)

emulator, aot, work = sys.argv[1:]
os.environ["FFF_CUDA_DRIVER"] = emulator
stats_file = os.path.join(work, "launches.jsonl")
os.environ["FFF_EMU_STATS"] = stats_file
rng = np.random.default_rng(20261206)
check = Checker()
device = Device(emulator)
STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}


# (dtype, Din, W, Dout, depth, activation, static widths)
CASES = [("f32", 48, 12, 40, 3, activation, True) for activation in ("gelu", "gelu_tanh", "relu", "silu", "identity")]
CASES += [("f32", 33, 1, 20, 1, "gelu", True),
          ("f32", 37, 5, 9, 6, "relu", True),
          ("f32", 100, 33, 36, 2, "gelu", False),
          ("f32", 64, 64, 64, 1, "silu", True),
          ("f16", 64, 16, 24, 4, "gelu", True),
          ("bf16", 64, 12, 24, 4, "silu", True),
          ("bf16", 127, 33, 9, 5, "gelu", False),
          ("f32", 768, 12, 768, 8, "gelu", True)]


def case_name(dtype, din, width, dout, depth, activation, static):
    return f"lg_{dtype}_{din}x{width}x{dout}_d{depth}_{activation}" + ("" if static else "_dyn")


def grad_function(dtype, din, width, dout, depth, activation, static):
    text = leaf_tree_ffn_grad_function(dtype, None, din, width, dout, depth, activation, True,
                                       name=case_name(dtype, din, width, dout, depth, activation, static))
    if not static:  # Din and Dout dynamic too; the leaf width stays static
        text = re.sub(rf"tensor<(\?|\d+)x{din}x{dtype}>", rf"tensor<\1x?x{dtype}>", text)
        text = re.sub(rf"tensor<(\d+)x{din}x{width}x", rf"tensor<\1x?x{width}x", text)
        text = re.sub(rf"tensor<(\?|\d+)x{dout}x{dtype}>", rf"tensor<\1x?x{dtype}>", text)
        text = re.sub(rf"tensor<(\d+)x{width}x{dout}x", rf"tensor<\1x{width}x?x", text)
    return text


FORWARD = "fwd_noise"
NOISE = ("f32", 64, 4, 64, 3, "gelu")  # (dtype, Din, W, Dout, depth, activation)
functions = [grad_function(*c) for c in CASES]
functions.append(leaf_tree_ffn_grad_function("f32", None, *LEAF_TIE_WIDTHS, 1, "identity", True, name="lg_tie"))
functions.append(leaf_tree_ffn_grad_function(NOISE[0], None, *NOISE[1:], True, name="lg_noise"))
functions.append(leaf_tree_ffn_function(FORWARD, NOISE[0], None, *NOISE[1:], True))
library = emulated.build(aot, work, "leaf_tree_grads", functions)


def run(function, inputs, outputs):
    out = emulated.call(device, library, function, inputs, outputs, pads=(64, 64))
    if isinstance(out, str):
        check.failures.append(f"{function}: {out}")
        return None
    return out


def check_case(dtype, din, width, dout, depth, activation, static, rows, repeat=False):
    name = case_name(dtype, din, width, dout, depth, activation, static)
    leaves = 2**depth
    storage = STORAGE[dtype]
    inputs, values = random_leaf_grad_inputs(rng, dtype, rows, din, width, dout, depth)
    outputs = [((rows, din), storage), ((leaves, din, width), storage), ((leaves, width), storage),
               ((leaves, width, dout), storage), ((leaves, dout), storage)]
    got = run(name, inputs, outputs)
    if got is None:
        return
    if repeat:
        again = run(name, inputs, outputs)
        if again is not None:
            check.equal(f"{name} B={rows}: the same bits again", [a.tobytes() for a in again],
                        [a.tobytes() for a in got])
    expected = leaf_tree_ffn_grad_ref(*values, depth, activation)
    for what, want, actual in zip(("dx", "dw1", "db1", "dw2", "db2"), expected, got):
        actual = dequantize(actual, dtype)
        if rows == 0:
            check.equal(f"{name} {what} (no rows) is zero", bool((actual == 0).all()), True)
        else:
            check.close(f"{name} {what} B={rows}", actual, want, TOLERANCE[dtype])
    if 0 < rows < leaves:
        reached = np.abs(dequantize(got[4], dtype)).sum(axis=1) > 0
        check.equal(f"{name} B={rows}: leaves no row reaches get zeros",
                    not dequantize(got[1], dtype)[~reached].any() and not dequantize(got[3], dtype)[~reached].any(),
                    True)


for c in CASES:
    large = c[1] * c[3] > 100_000  # UltraFastBERT's width: a few rows only
    for rows in ((5, 0) if large else (1, 7, 0)):
        check_case(*c, rows)
    if not large:
        # More rows than the sort's 256 chunks: chunks of two rows.
        check_case(*c, 300, repeat=c[0] == "f32" and c[4] == 6)

# A root score of exactly 0 routes right, as in the forward.
tie_inputs = leaf_tie_inputs(rng)
din, width, dout = LEAF_TIE_WIDTHS
tie = run("lg_tie", tie_inputs, [((1, din), np.float32), ((2, din, width), np.float32), ((2, width), np.float32),
                                 ((2, width, dout), np.float32), ((2, dout), np.float32)])
if tie is not None:
    check_leaf_tie(check, "tie at 0", tie_inputs, tie)

# Rows in the null space of every routing row: each score is the rounding
# noise of a dot product that is 0 in exact arithmetic (no node_b), so only
# summing as the forward kernel does reaches its leaves. Each leaf's b2 is
# a distinct one-hot row, so the forward's y tells its leaf; the backward's
# db2 (= dy on the row's leaf) tells the backward's.
_, din, width, dout, depth, activation = NOISE
leaves, rows = 2**depth, 40
node_w = rng.standard_normal((leaves - 1, din)).astype(np.float32)
node_b = np.zeros(leaves - 1, np.float32)
basis = np.linalg.svd(node_w.astype(np.float64))[2][leaves - 1:]
x = (rng.standard_normal((rows, din - leaves + 1)) @ basis).astype(np.float32)
w1 = rng.standard_normal((leaves, din, width)).astype(np.float32)
b1 = rng.standard_normal((leaves, width)).astype(np.float32)
w2 = np.zeros((leaves, width, dout), np.float32)
b2 = np.zeros((leaves, dout), np.float32)
b2[np.arange(leaves), np.arange(leaves)] = 1.0
forward = run(FORWARD, [x, node_w, node_b, w1, b1, w2, b2], [((rows, dout), np.float32)])
agreed = float64_differs = 0
if forward is not None:
    forward_leaf = forward[0][:, :leaves].argmax(axis=1)
    for row in range(rows):
        dy = np.ones((1, dout), np.float32)
        grads = run("lg_noise", [dy, x[row:row + 1], node_w, node_b, w1, b1, w2],
                    [((1, din), np.float32), ((leaves, din, width), np.float32), ((leaves, width), np.float32),
                     ((leaves, width, dout), np.float32), ((leaves, dout), np.float32)])
        if grads is None:
            break
        backward_leaves = np.nonzero(grads[4][:, 0])[0]
        agreed += len(backward_leaves) == 1 and backward_leaves[0] == forward_leaf[row]
        node = 0
        for _ in range(depth):
            node = 2 * node + 1 + (1 if x[row].astype(np.float64) @ node_w[node].astype(np.float64) >= 0 else 0)
        float64_differs += node - (leaves - 1) != forward_leaf[row]
check.equal(f"rounding-noise scores: the backward takes the forward kernel's leaves ({agreed} of {rows})",
            agreed, rows)
check.equal(f"rounding-noise scores: float64 takes other leaves on some of these rows ({float64_differs})",
            float64_differs > 0, True)

kinds = emulated.launched_phases(stats_file, r"leaf_tree_ffn_grad_\w+?_(walk|count|scan|scatter|sums)$")
print("leaf tree backward kernels run: " + ", ".join(kinds))
check.finish()

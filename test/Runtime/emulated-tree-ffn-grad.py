# fff.tree_ffn_grad's GPU kernels end to end without a GPU: the op goes
# through scripts/fff-aot.sh (the real PTX, host code and fff's CUDA
# runtime) and runs on fff's PTX emulator, with its memory, race and barrier
# checks, against a float64 reference vectorised over rows (np.add.at over
# each level's visits; the activations' derivatives by central
# differences), on random data:
#
#   - every activation; depths 0, 1, 4, 6 and 11 (UltraFastBERT-1x11's
#     768-wide shape); one and three trees; odd and dynamic widths; with
#     and without b_in and db_out; f32, f16 and bf16;
#   - batches of 1, of a few, of more rows than the counting sort has chunks
#     (so that chunks hold several rows), of enough that a node's visits
#     span several chunks of the sums, and of none (zero gradients);
#   - inputs inside larger allocations; a second call gives the same bits;
#   - a logit of exactly 0 goes left, and the right child gets nothing;
#   - the routes are the GPU forward kernel's: on rows whose every logit is
#     rounding noise, the backward's dw_out agrees with the paths the
#     forward kernel took (read off its output).
#
# REQUIRES: numpy
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %emulator %fff_src_root/scripts/fff-aot.sh %t | FileCheck %s
# CHECK: tree backward kernels run: chunk_sums, count, node_sums, output_bias, scan, scatter, walk
# CHECK: all {{[0-9]+}} checks passed

import os
import re
import sys

import numpy as np

import emulated
from emulated import Device
from fffcheck import (TOLERANCE, Checker, dequantize, quantize, stable_tree_inputs, tree_ffn_function,
                      tree_ffn_grad_function, tree_ffn_grad_ref as reference, tree_ffn_paths)

emulator, aot, work = sys.argv[1:]
os.environ["FFF_CUDA_DRIVER"] = emulator
stats_file = os.path.join(work, "launches.jsonl")
os.environ["FFF_EMU_STATS"] = stats_file
rng = np.random.default_rng(20261202)
check = Checker()
device = Device(emulator)
STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}


# (dtype, Din, Dout, trees, depth, activation, b_in, db_out, static widths)
CASES = [("f32", 48, 40, 1, 4, activation, True, True, True)
         for activation in ("gelu", "gelu_tanh", "relu", "silu", "identity")]
CASES += [("f32", 33, 20, 3, 1, "gelu", False, True, True),
          ("f32", 33, 20, 3, 0, "gelu", True, False, True),
          ("f32", 100, 36, 1, 6, "gelu", True, True, False),
          ("f16", 64, 24, 3, 4, "gelu", True, True, True),
          ("bf16", 64, 24, 3, 4, "silu", False, True, True),
          ("bf16", 127, 9, 1, 6, "gelu", True, False, True),
          ("f32", 768, 768, 1, 11, "gelu", True, True, True)]


def case_name(dtype, din, dout, trees, depth, activation, in_bias, out_bias, static):
    return (f"g_{dtype}_{din}x{dout}_k{trees}_d{depth}_{activation}" + ("_bi" if in_bias else "") +
            ("_bo" if out_bias else "") + ("" if static else "_dyn"))


def grad_function(dtype, din, dout, trees, depth, activation, in_bias, out_bias, static):
    text = tree_ffn_grad_function(dtype, None, din, dout, trees, depth, activation, True, in_bias, out_bias,
                                  name=case_name(dtype, din, dout, trees, depth, activation, in_bias, out_bias,
                                                 static))
    if not static:  # the widths dynamic too
        text = re.sub(r"tensor<\?x(\d+)x", "tensor<?x?x", text)
        text = re.sub(r"tensor<(\d+)x(\d+)x(\d+)x", r"tensor<\1x\2x?x", text)
        text = re.sub(r"tensor<(\d+)x" + dtype + ">", "tensor<?x" + dtype + ">", text)
    return text


FORWARD = "fwd_noise"
functions = [grad_function(*c) for c in CASES]
functions.append(tree_ffn_grad_function("f32", None, 4, 4, 1, 1, "gelu", True, False, False, name="g_tie"))
functions.append(tree_ffn_grad_function("f32", None, 64, 64, 1, 3, "gelu", True, False, False, name="g_noise"))
functions.append(tree_ffn_function("f32", None, 64, 64, 1, 3, "gelu", True, False, False, name=FORWARD))
library = emulated.build(aot, work, "tree_grads", functions)


def run(function, inputs, outputs):
    out = emulated.call(device, library, function, inputs, outputs, pads=(64, 64))
    if isinstance(out, str):
        check.failures.append(f"{function}: {out}")
        return None
    return out


def check_case(dtype, din, dout, trees, depth, activation, in_bias, out_bias, static, rows, repeat=False):
    name = case_name(dtype, din, dout, trees, depth, activation, in_bias, out_bias, static)
    nodes = 2 ** (depth + 1) - 1
    storage = STORAGE[dtype]
    w_in_arr, w_in = quantize(rng.standard_normal((trees, nodes, din)) / np.sqrt(din), dtype)
    w_out_arr, w_out = quantize(rng.standard_normal((trees, nodes, dout)) / np.sqrt(depth + 1), dtype)
    b_in_arr, b_in = quantize(rng.standard_normal((trees, nodes)) * 0.3, dtype)
    if not in_bias:
        b_in = None
    x_arr, x = stable_tree_inputs(rng, rows, din, dtype, w_in, b_in, depth)
    dy_arr, dy = quantize(rng.standard_normal((rows, dout)), dtype)
    inputs = [dy_arr, x_arr, w_in_arr] + ([b_in_arr] if in_bias else []) + [w_out_arr]
    outputs = [((rows, din), storage), ((trees, nodes, din), storage), ((trees, nodes, dout), storage)]
    outputs += [((trees, nodes), storage)] if in_bias else []
    outputs += [((dout,), storage)] if out_bias else []
    got = run(name, inputs, outputs)
    if got is None:
        return
    if repeat:
        again = run(name, inputs, outputs)
        if again is not None:
            check.equal(f"{name} B={rows}: the same bits again", [a.tobytes() for a in again],
                        [a.tobytes() for a in got])
    dx, dw_in, dw_out, db_in, db_out = reference(dy, x, w_in, b_in, w_out, depth, activation)
    expected = [("dx", dx), ("dw_in", dw_in), ("dw_out", dw_out)]
    expected += [("db_in", db_in)] if in_bias else []
    expected += [("db_out", db_out)] if out_bias else []
    for (what, want), actual in zip(expected, got):
        actual = dequantize(actual, dtype)
        if rows == 0:
            check.equal(f"{name} {what} (no rows) is zero", bool((actual == 0).all()), True)
        else:
            check.close(f"{name} {what} B={rows}", actual, want, TOLERANCE[dtype])


for c in CASES:
    large = c[1] * c[2] > 100_000  # UltraFastBERT's width: a few rows only
    for rows in ((5, 0) if large else (1, 7, 0)):
        check_case(*c, rows)
    if not large:
        # More rows than the sort's 256 chunks: chunks of two rows; the
        # root's 300 visits span two chunks of the sums.
        check_case(*c, 300, repeat=c[0] == "f32" and c[3] == 3)
# The root's and level 1's visits span four and two chunks of 256 (heads in
# the middle chunks), with three trees' chunks side by side.
check_case("f32", 33, 20, 3, 1, "gelu", False, True, True, 1100, repeat=True)
check_case("bf16", 64, 24, 3, 4, "silu", False, True, True, 1100)
check_case("f32", 48, 40, 1, 4, "gelu", True, True, True, 1100)

# A root logit of exactly 0 goes left: x . w_in[0] = 1 - 1 = 0, no bias.
w_in = np.zeros((1, 3, 4), np.float32)
w_in[0, 0] = [1, -1, 0, 0]
w_in[0, 1:] = rng.standard_normal((2, 4))
w_out = rng.standard_normal((1, 3, 4)).astype(np.float32)
x = np.array([[0.75, 0.75, 0.5, -0.25]], np.float32)
dy = rng.standard_normal((1, 4)).astype(np.float32)
tie = run("g_tie", [dy, x, w_in, w_out], [((1, 4), np.float32), ((1, 3, 4), np.float32), ((1, 3, 4), np.float32)])
if tie is not None:
    expected = reference(dy.astype(np.float64), x.astype(np.float64), w_in.astype(np.float64), None,
                         w_out.astype(np.float64), 1, "gelu")
    check.close("tie at 0: dx", tie[0], expected[0], 2e-5)
    check.equal("tie at 0: the right child gets no gradient",
                bool((tie[1][0, 2] == 0).all() and (tie[2][0, 2] == 0).all() and (tie[1][0, 1] != 0).any()), True)

# Rows in the null space of every w_in row: each logit is the rounding noise
# of a dot product that is 0 in exact arithmetic, so only summing as the
# forward kernel does walks its paths. With dy = e_0, the forward's y is
# sum_n act(l_n) * w_out[n] and the backward's dw_out[n] = act(l_n) * e_0.
depth, width, rows = 3, 64, 40
nodes = 2 ** (depth + 1) - 1
w_in = rng.standard_normal((1, nodes, width)).astype(np.float32)
basis = np.linalg.svd(w_in[0].astype(np.float64))[2][nodes:]
x = (rng.standard_normal((rows, width - nodes)) @ basis).astype(np.float32)
w_out = rng.standard_normal((1, nodes, width)).astype(np.float32)
forward = run(FORWARD, [x, w_in, w_out], [((rows, width), np.float32)])
agreed = 0
# The float64 paths, to show that these rows tell summation orders apart.
_, float64_route, _ = tree_ffn_paths(x.astype(np.float64), w_in.astype(np.float64), None, w_out, None, depth,
                                     "gelu")
float64_differs = 0
if forward is not None:
    for row in range(rows):
        dy = np.zeros((1, width), np.float32)
        dy[0, 0] = 1.0
        grads = run("g_noise", [dy, x[row:row + 1], w_in, w_out],
                    [((1, width), np.float32), ((1, nodes, width), np.float32), ((1, nodes, width), np.float32)])
        if grads is None:
            break
        # dw_in[n] = dl * x is nonzero just where the row visited n, and
        # dw_out[n, 0] = act(l_n): the forward's y, rebuilt from the
        # backward's visits, is the forward kernel's own only if both
        # took the same nodes.
        visited = np.nonzero(np.abs(grads[1][0]).sum(1))[0]
        rebuilt = (grads[2][0, visited, :1] * w_out[0, visited]).sum(0)
        agreed += bool(np.allclose(rebuilt, forward[0][row], rtol=1e-3, atol=1e-12)) and len(visited) == depth + 1
        float64_differs += len(visited) != depth + 1 or bool((visited != float64_route[row, 0]).any())
check.equal(f"rounding-noise logits: the backward walks the forward kernel's paths ({agreed} of {rows})",
            agreed, rows)
check.equal(f"rounding-noise logits: float64 walks other paths on some of these rows ({float64_differs})",
            float64_differs > 0, True)

kinds = emulated.launched_phases(stats_file, r"tree_ffn_grad_\w+?_(walk|count|scan|scatter|chunk_sums|node_sums|output_bias)$")
print("tree backward kernels run: " + ", ".join(kinds))
check.finish()

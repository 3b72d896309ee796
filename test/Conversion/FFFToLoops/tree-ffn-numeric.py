# tree_ffn through --fff-cpu-pipeline and fff-run, against a float64 numpy
# reference, including the route each row takes through each tree.
#
# With --gpu-twin=latency or =throughput, the same cases (and wider rows,
# deeper trees and more trees, which the GPU kernels walk in steps, loops and
# masks) run that GPU kernel's CPU twin (test/Conversion/FFFToGPU/
# tree-kernels.mlir shows the strategies): its lane-to-data mapping, tails,
# shuffle butterfly order, two-level steps or staged rows, and polynomial
# activations.
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# RUN: %python %s --gpu-twin=latency | FileCheck %s
# RUN: %python %s --gpu-twin=throughput | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import sys

import numpy as np

from fffcheck import TOLERANCE, Checker, dequantize, quantize, run, stable_rows, tree_ffn_function, tree_ffn_paths

rng = np.random.default_rng(11)
check = Checker()
TWIN = next((a.split("=")[1] for a in sys.argv[1:] if a.startswith("--gpu-twin=")), None)
LOWERING = [f"--convert-fff-to-gpu=cpu-twin tree-variant={TWIN}"] if TWIN else []


def case(dtype, rows, din, dout, trees, depth, activation, biases, dynamic):
    nodes = 2 ** (depth + 1) - 1
    x_arr, x = quantize(rng.standard_normal((rows, din)), dtype)
    w_in_arr, w_in = quantize(rng.standard_normal((trees, nodes, din)) / np.sqrt(din), dtype)
    w_out_arr, w_out = quantize(rng.standard_normal((trees, nodes, dout)) / np.sqrt(depth + 1), dtype)
    b_in_arr, b_in = quantize(rng.standard_normal((trees, nodes)) * 0.3, dtype)
    b_out_arr, b_out = quantize(rng.standard_normal(dout), dtype)
    if not biases:
        b_in = b_out = None

    args = [x_arr, w_in_arr, b_in_arr, w_out_arr, b_out_arr] if biases else [x_arr, w_in_arr, w_out_arr]
    mlir = tree_ffn_function(dtype, rows, din, dout, trees, depth, activation, dynamic, biases, biases)
    (y,) = run(mlir, "f", args, 1, lowering=LOWERING)

    ref, route, logits = tree_ffn_paths(x, w_in, b_in, w_out, b_out, depth, activation)
    keep = stable_rows(x, w_in, logits)
    name = f"{dtype} B={rows} Din={din} Dout={dout} K={trees} depth={depth} {activation} biases={biases}"
    check.close(f"tree_ffn {name} ({keep.sum()}/{rows} rows)", dequantize(y, dtype)[keep], ref[keep], TOLERANCE[dtype])

    # The route, read back through the op itself: with identity activation,
    # no output bias and w_out[k, n] = one-hot(k * N + n), output column
    # k * N + n holds node n's logit if the row visited it and 0 otherwise.
    # (Not for the deepest trees, where that probe is K * N squared.)
    if trees * nodes > 4096:
        return
    probe_out = np.zeros((trees, nodes, trees * nodes), dtype=np.float32)
    for k in range(trees):
        probe_out[k, np.arange(nodes), k * nodes + np.arange(nodes)] = 1.0
    probe_arr, _ = quantize(probe_out, dtype)
    probe = tree_ffn_function(dtype, rows, din, trees * nodes, trees, depth, "identity", dynamic,
                              in_bias=biases, out_bias=False, name="route")
    probe_args = [x_arr, w_in_arr] + ([b_in_arr] if biases else []) + [probe_arr]
    (visited,) = run(probe, "route", probe_args, 1, lowering=LOWERING)
    visited = dequantize(visited, dtype).reshape(rows, trees, nodes) != 0
    expected = np.zeros((rows, trees, nodes), dtype=bool)
    for k in range(trees):
        expected[np.arange(rows)[:, None], k, route[:, k, :]] = True
    check.equal(f"tree_ffn route {name}", visited[keep], expected[keep])


for activation in ("gelu", "gelu_tanh", "relu", "silu", "identity"):
    case("f32", 23, 48, 40, trees=1, depth=5, activation=activation, biases=True, dynamic=True)
for depth in (0, 1, 5, 11):
    for trees in (1, 3):
        for biases in (True, False):
            case("f32", 17, 33, 20, trees, depth, "gelu", biases, dynamic=depth % 2 == 1)
for dtype in ("f16", "bf16"):
    case(dtype, 19, 64, 24, trees=3, depth=5, activation="gelu", biases=True, dynamic=True)
    case(dtype, 1, 127, 9, trees=1, depth=11, activation="silu", biases=False, dynamic=False)
# UltraFastBERT-1x11's layer shape, one row.
case("f32", 1, 768, 768, trees=1, depth=11, activation="gelu", biases=True, dynamic=True)
# The deepest trees the op allows: 2M neurons, narrow rows.
case("f32", 3, 4, 8, trees=1, depth=20, activation="gelu", biases=True, dynamic=True)
if TWIN:
    # One unrolled step with x in registers; input and output loops of
    # several steps, ragged ones, scalar rows; many trees; the deepest trees.
    case("bf16", 9, 768, 768, trees=1, depth=11, activation="gelu", biases=True, dynamic=True)
    case("f32", 5, 4096, 1000, trees=1, depth=4, activation="gelu_tanh", biases=True, dynamic=True)
    case("bf16", 40, 1000, 333, trees=2, depth=6, activation="silu", biases=True, dynamic=False)
    case("f16", 4, 2056, 4104, trees=1, depth=3, activation="relu", biases=False, dynamic=True)
    case("f32", 6, 20, 12, trees=12, depth=2, activation="gelu", biases=True, dynamic=True)
    case("f32", 3, 8, 16, trees=1, depth=15, activation="gelu", biases=True, dynamic=True)
    for activation in ("gelu_tanh", "relu", "silu", "identity"):
        case("bf16", 7, 96, 40, trees=2, depth=4, activation=activation, biases=False, dynamic=True)
check.finish()

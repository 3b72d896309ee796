# The tree layers' vector lowering (convert-fff-trees-to-vector) through
# --fff-cpu-pipeline and fff-run, at batches large enough that tokens are
# regrouped by node and split across threads, against float64 numpy
# references on seeded random data, at this host's vector width and at 256
# and 128 bits; and the same results bit for bit whatever the grouping
# (sort level, set through cache-bytes) and the thread count, since each
# token's sums run in one order.
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import numpy as np

from fffcheck import (TOLERANCE, Checker, dequantize, leaf_tree_ffn_function, leaf_tree_ffn_paths, quantize, run,
                      stable_rows, tree_ffn_function, tree_ffn_paths)

rng = np.random.default_rng(20261201)
check = Checker()

# Groupings: none (the whole tree fits), the host's choice, and tokens
# regrouped near the leaves (a tiny cache).
GROUPINGS = {
    "token order": ["--convert-fff-trees-to-vector=cache-bytes=1099511627776"],
    "host cache": [],
    "tiny cache": ["--convert-fff-trees-to-vector=cache-bytes=4096"],
}


def run_everywhere(name, mlir, args, dtype, reference, keep):
    """The function under every grouping and thread count: equal bits to the
    first, and close to the reference on the stable rows. Also the scalar
    reference lowering, close to the reference."""
    first = None
    for grouping, lowering in GROUPINGS.items():
        for threads in ("1", "2"):
            (y,) = run(mlir, "f", args, 1, extra_flags=["--threads", threads], lowering=lowering)
            if first is None:
                first = y
                check.close(f"{name} ({keep.sum()}/{len(keep)} rows)", dequantize(y, dtype)[keep],
                            reference[keep], TOLERANCE[dtype])
            else:
                check.equal(f"{name} bitwise: {grouping}, {threads} threads", y, first)
    (y,) = run(mlir, "f", args, 1, extra_flags=["--reference"])
    check.close(f"{name} scalar reference", dequantize(y, dtype)[keep], reference[keep], TOLERANCE[dtype])
    # Narrower vectors (AVX2, SSE) sum in another order: close, not equal.
    for bits in ("256", "128"):
        (y,) = run(mlir, "f", args, 1, extra_flags=["--vector-bits", bits])
        check.close(f"{name} {bits}-bit vectors", dequantize(y, dtype)[keep], reference[keep], TOLERANCE[dtype])


def tree_case(dtype, rows, din, dout, trees, depth, activation, biases):
    nodes = 2 ** (depth + 1) - 1
    x_arr, x = quantize(rng.standard_normal((rows, din)), dtype)
    wi_arr, w_in = quantize(rng.standard_normal((trees, nodes, din)) / np.sqrt(din), dtype)
    wo_arr, w_out = quantize(rng.standard_normal((trees, nodes, dout)) / np.sqrt(depth + 1), dtype)
    bi_arr, b_in = quantize(rng.standard_normal((trees, nodes)) * 0.3, dtype)
    bo_arr, b_out = quantize(rng.standard_normal(dout), dtype)
    if biases:
        args = [x_arr, wi_arr, bi_arr, wo_arr, bo_arr]
    else:
        args = [x_arr, wi_arr, wo_arr]
        b_in = b_out = None
    mlir = tree_ffn_function(dtype, rows, din, dout, trees, depth, activation, True, biases, biases)
    reference, _, logits = tree_ffn_paths(x, w_in, b_in, w_out, b_out, depth, activation)
    name = f"tree_ffn {dtype} B={rows} Din={din} Dout={dout} K={trees} depth={depth} {activation}"
    run_everywhere(name, mlir, args, dtype, reference, stable_rows(x, w_in, logits))


def leaf_case(dtype, rows, din, width, dout, depth, activation):
    leaves = 2**depth
    x_arr, x = quantize(rng.standard_normal((rows, din)), dtype)
    nw_arr, node_w = quantize(rng.standard_normal((leaves - 1, din)) / np.sqrt(din), dtype)
    nb_arr, node_b = quantize(rng.standard_normal(leaves - 1) * 0.1, dtype)
    w1_arr, w1 = quantize(rng.standard_normal((leaves, din, width)) / np.sqrt(din), dtype)
    b1_arr, b1 = quantize(rng.standard_normal((leaves, width)) * 0.1, dtype)
    w2_arr, w2 = quantize(rng.standard_normal((leaves, width, dout)) / np.sqrt(width), dtype)
    b2_arr, b2 = quantize(rng.standard_normal((leaves, dout)) * 0.1, dtype)
    mlir = leaf_tree_ffn_function("f", dtype, rows, din, width, dout, depth, activation, dynamic=True)
    args = [x_arr, nw_arr, nb_arr, w1_arr, b1_arr, w2_arr, b2_arr]
    reference, _, scores = leaf_tree_ffn_paths(x, node_w, node_b, w1, b1, w2, b2, depth, activation)
    keep = stable_rows(x, node_w, scores)
    name = f"leaf_tree_ffn {dtype} B={rows} Din={din} W={width} Dout={dout} depth={depth} {activation}"
    run_everywhere(name, mlir, args, dtype, reference, keep)


# UltraFastBERT-1x11's shape at a batch whose two token loops are threaded
# and regrouped at level 5.
tree_case("f32", 1200, 768, 768, trees=1, depth=11, activation="gelu", biases=True)
# Several trees, ragged rows (masked tails, one accumulator), bf16 narrowed
# once per token, each activation.
tree_case("bf16", 600, 100, 36, trees=3, depth=7, activation="silu", biases=True)
for activation in ("gelu_tanh", "relu", "identity"):
    tree_case("f32", 300, 20, 9, trees=2, depth=9, activation=activation, biases=False)
tree_case("f16", 257, 64, 64, trees=1, depth=4, activation="gelu", biases=True)
# One token, and none.
tree_case("f32", 1, 768, 768, trees=1, depth=11, activation="gelu", biases=True)
tree_case("f32", 0, 33, 17, trees=2, depth=5, activation="gelu", biases=True)

# Leaves: a batch whose leaf loop is threaded; hidden widths with and
# without a ragged block; a tree deep enough to be grouped by ancestor.
leaf_case("f32", 900, 64, 100, 48, depth=3, activation="gelu")
leaf_case("bf16", 333, 48, 16, 40, depth=5, activation="silu")
leaf_case("f32", 200, 12, 7, 5, depth=12, activation="relu")
leaf_case("f32", 5, 8, 64, 8, depth=1, activation="gelu_tanh")
leaf_case("f16", 0, 16, 8, 16, depth=2, activation="gelu")
check.finish()

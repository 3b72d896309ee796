# Norms whose result is 32 MiB or more, norm backwards whose dy, x and dx
# move 32 MiB or more (dx streamed), and single-tree tree_ffn layers that
# move 32 MiB or more (input, weights and result), are written with
# streaming stores (min_streamed_bytes of convert-fff-norms-to-vector and
# convert-fff-trees-to-vector): checked through --fff-cpu-pipeline and
# fff-run against float64 numpy, f32 and bf16, threaded and not; their rows
# hold the same bits as the same rows of a small call, written with
# ordinary stores; and a row length that is no whole number of vectors
# takes ordinary stores, and is right.
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import numpy as np

from fffcheck import (TOLERANCE, Checker, dequantize, grad_scale, norm_function, norm_grads_ref, norm_rows_ref,
                      quantize, run, stable_tree_inputs, tensor_type, tree_ffn_function, tree_ffn_ref)

rng = np.random.default_rng(1201)
check = Checker()


def check_norm(kind, dtype, rows, hidden, streamed):
    """`streamed`: whether the size and row length select streaming stores
    (as convert-fff-norms-to-vector.mlir checks); only named here."""
    x_arr, x = quantize(rng.standard_normal((rows, hidden)) * 2 + 0.5, dtype)
    g_arr, g = quantize(rng.standard_normal(hidden), dtype)
    b_arr, b = quantize(rng.standard_normal(hidden), dtype)
    mlir = norm_function(kind, dtype, hidden)
    name = f"{kind} {rows}x{hidden} {dtype} ({'streamed' if streamed else 'stored'})"
    (y,) = run(mlir, "f", [x_arr, g_arr, b_arr], 1)
    check.close(name, dequantize(y, dtype), norm_rows_ref(kind, x, g, b), TOLERANCE[dtype])
    (one_thread,) = run(mlir, "f", [x_arr, g_arr, b_arr], 1, extra_flags=["--threads", "1"])
    check.equal(f"{name}: the same bits in one thread", one_thread, y)
    (small,) = run(mlir, "f", [x_arr[:40], g_arr, b_arr], 1)
    check.equal(f"{name}: its first rows as a small call's", y[:40], small)


# 32 MiB of f32, of bf16, and, with rows of 2050 elements (8200 bytes, no
# whole number of 64-byte vectors), 32.1 MiB stored the ordinary way.
check_norm("layer_norm", "f32", 4096, 2048, streamed=True)
check_norm("rms_norm", "f32", 4096, 2048, streamed=True)
check_norm("layer_norm", "bf16", 8192, 2048, streamed=True)
check_norm("rms_norm", "bf16", 8192, 2048, streamed=True)
check_norm("layer_norm", "f32", 4100, 2050, streamed=False)


def check_norm_grad(kind, rows, hidden, streamed):
    """An f32 norm backward with a scale (and for layer_norm a bias's
    gradient), the statistics recomputed for rms_norm."""
    t, p, st = tensor_type([None, hidden], "f32"), tensor_type([hidden], "f32"), tensor_type([None, 1], "f32")
    if kind == "layer_norm":
        mlir = (f"func.func @f(%dy: {t}, %x: {t}, %m: {st}, %r: {st}, %g: {p}) -> ({t}, {p}, {p}) {{\n"
                f"  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : {p}) bias_grad : {t}, {st}\n"
                f"  return %dx, %dg, %db : {t}, {p}, {p}\n}}")
    else:
        mlir = (f"func.func @f(%dy: {t}, %x: {t}, %g: {p}) -> ({t}, {p}) {{\n"
                f"  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : {p}) : {t}\n"
                f"  return %dx, %dg : {t}, {p}\n}}")
    x = (rng.standard_normal((rows, hidden)) * 2 + 0.5).astype(np.float32)
    dy = rng.standard_normal((rows, hidden)).astype(np.float32)
    g = rng.standard_normal(hidden).astype(np.float32)
    mean = x.astype(np.float64).mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    args = [dy, x, mean.astype(np.float32), rstd.astype(np.float32), g] if kind == "layer_norm" else [dy, x, g]
    results = 3 if kind == "layer_norm" else 2
    name = f"{kind}_grad {rows}x{hidden} f32 ({'dx streamed' if streamed else 'dx stored'})"
    out = run(mlir, "f", args, results)
    ref = norm_grads_ref(kind, x.astype(np.float64), dy.astype(np.float64), g.astype(np.float64),
                         np.zeros(hidden) if kind == "layer_norm" else None, 1e-5, 1)
    check.close(f"{name} dx", out[0], ref[0], TOLERANCE["f32"], scale=grad_scale(ref[0], np.abs(dy * g)))
    check.close(f"{name} dgamma", out[1], ref[1], 1e-4)
    one_thread = run(mlir, "f", args, results, extra_flags=["--threads", "1"])
    check.equal(f"{name}: the same bits in one thread", [a.tobytes() for a in one_thread], [a.tobytes() for a in out])
    small = run(mlir, "f", [a[:40] if a.ndim == 2 else a for a in args], results)
    check.equal(f"{name}: dx's first rows as a small call's", out[0][:40], small[0])


# dy, x and dx of 4096 rows of 768 f32 move 37.7 MB; rows of 770 f32 (3080
# bytes, no whole number of vectors) store dx the ordinary way.
check_norm_grad("layer_norm", 4096, 768, streamed=True)
check_norm_grad("rms_norm", 4096, 768, streamed=True)
check_norm_grad("rms_norm", 4096, 770, streamed=False)


def check_tree(dtype, rows, width, streamed):
    """An UltraFastBERT-1x11-sized tree (depth 11, 768 wide in, `width` out,
    biases, GELU) on `rows` tokens whose routes are clear of rounding."""
    depth, din = 11, 768
    nodes = 2 ** (depth + 1) - 1
    w_in_arr, w_in = quantize(rng.standard_normal((1, nodes, din)) / np.sqrt(din), dtype)
    b_in_arr, b_in = quantize(rng.standard_normal((1, nodes)) * 0.1, dtype)
    w_out_arr, w_out = quantize(rng.standard_normal((1, nodes, width)) / np.sqrt(depth + 1), dtype)
    b_out_arr, b_out = quantize(rng.standard_normal(width) * 0.1, dtype)
    x_arr, x = stable_tree_inputs(rng, rows, din, dtype, w_in, b_in, depth)
    mlir = tree_ffn_function(dtype, rows, din, width, 1, depth, "gelu", dynamic=True, in_bias=True, out_bias=True)
    name = f"tree_ffn 1x11 {rows}x{din}->{width} {dtype} ({'streamed' if streamed else 'stored'})"
    weights = [w_in_arr, b_in_arr, w_out_arr, b_out_arr]
    (y,) = run(mlir, "f", [x_arr, *weights], 1)
    check.close(name, dequantize(y, dtype), tree_ffn_ref(x, w_in, b_in, w_out, b_out, depth, "gelu"),
                TOLERANCE[dtype])
    (one_thread,) = run(mlir, "f", [x_arr, *weights], 1, extra_flags=["--threads", "1"])
    check.equal(f"{name}: the same bits in one thread", one_thread, y)
    (small,) = run(mlir, "f", [x_arr[:40], *weights], 1)
    check.equal(f"{name}: its first rows as a small call's", y[:40], small)


# 25 MiB of f32 weights with 2048 tokens' rows (37.7 MB in all), 12.6 MiB of
# bf16 ones with 8192 (37.7 MB); and rows of 770 f32 (3080 bytes, no whole
# number of vectors), stored the ordinary way.
check_tree("f32", 2048, 768, streamed=True)
check_tree("bf16", 8192, 768, streamed=True)
check_tree("f32", 2048, 770, streamed=False)
check.finish()

# Norms whose result is 32 MiB or more are written with streaming stores
# (convert-fff-norms-to-vector's min_streamed_bytes): checked through
# --fff-cpu-pipeline and fff-run against float64 numpy, f32 and bf16, layer
# and RMS, threaded and not; their rows hold the same bits as the same rows
# normed in a small call, written with ordinary stores; and a row length
# that is no whole number of vectors takes ordinary stores, and is right.
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import numpy as np

from fffcheck import TOLERANCE, Checker, dequantize, norm_function, norm_rows_ref, quantize, run

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
check.finish()

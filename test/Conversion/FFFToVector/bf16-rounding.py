# bf16 results rounded with AVX512-BF16's vcvtneps2bf16, where this host has
# it (bf16-rounding.mlir), hold the same bits as with integer rounding
# (--integer-bf16), including the vectors the instruction cannot round
# alone: subnormal results, which it would flush to zero, and NaNs, which
# come out as the canonical 0x7FC0 either way. Checked through fff-run on
# bf16 RMSNorm and LayerNorm (rows of 40, a masked tail, and 768, threaded)
# and a bf16 tree_ffn, whose rows are also compared with float64 numpy.
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import os
import subprocess

import numpy as np

from fffcheck import (FFF_OPT, TOLERANCE, Checker, dequantize, norm_function, norm_rows_ref, quantize, run,
                      tree_ffn_function, tree_ffn_ref)

rng = np.random.default_rng(2611)
check = Checker()

host_has_bf16 = " avx512_bf16" in open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else False
CANONICAL_NAN = 0x7FC0


def subnormal(bits):
    return ((bits & 0x7F80) == 0) & ((bits & 0x007F) != 0)


# The lowering this host gets by default rounds with the instruction where it can.
strategy = subprocess.run([FFF_OPT, "--convert-fff-norms-to-vector", "-"], input=norm_function("rms_norm", "bf16", 768),
                          capture_output=True, text=True, check=True).stdout
expected_rounding = "avx512bf16" if host_has_bf16 else "integer"
check.equal(f"this host rounds with {expected_rounding}", f'bf16_rounding = "{expected_rounding}"' in strategy, True)


def check_norm(kind, rows, hidden):
    values = rng.standard_normal((rows, hidden)) * 3 + 0.25
    scale = rng.standard_normal(hidden)
    # Scales of 2^-120 and below make results subnormal; one is a bf16
    # subnormal itself.
    scale[::7] = rng.standard_normal(len(scale[::7])) * 2.0**-124
    scale[3] = 2.0**-130
    x_arr, x = quantize(values, "bf16")
    g_arr, g = quantize(scale, "bf16")
    b_arr, b = quantize(rng.standard_normal(hidden) * (2.0**-126 if kind == "layer_norm" else 1), "bf16")
    # Rows 1 and 2 hold a NaN (one negative): their results are NaN. Row 4
    # holds an infinity: its results are NaN (LayerNorm) or NaN where the
    # infinity was and zero elsewhere (RMSNorm: x * rsqrt(inf)).
    x_arr[1, hidden // 2] = 0x7FC1
    x_arr[2, 0] = 0xFFC0
    x_arr[4, hidden - 1] = 0x7F80
    special_rows = [1, 2, 4]
    finite_rows = np.setdiff1d(np.arange(rows), special_rows)
    mlir = norm_function(kind, "bf16", hidden)
    name = f"{kind} {rows}x{hidden} bf16"
    (y,) = run(mlir, "f", [x_arr, g_arr, b_arr], 1)
    (integer,) = run(mlir, "f", [x_arr, g_arr, b_arr], 1, extra_flags=["--integer-bf16"])
    check.equal(f"{name}: the same bits as integer rounding", y, integer)
    nan = ((y & 0x7F80) == 0x7F80) & ((y & 0x007F) != 0)
    check.equal(f"{name}: rows with a NaN are NaN", np.all(nan[[1, 2]]) and nan[4, hidden - 1], True)
    check.equal(f"{name}: every NaN is the canonical one", np.all(y[nan] == CANONICAL_NAN), True)
    count = int(subnormal(y[finite_rows]).sum())
    check.equal(f"{name}: subnormal results kept ({count} of them)", count > 0, True)
    reference = norm_rows_ref(kind, x[finite_rows], g, b)
    check.close(f"{name}: finite rows", dequantize(y[finite_rows], "bf16"), reference, TOLERANCE["bf16"])


check_norm("rms_norm", 300, 40)
check_norm("layer_norm", 300, 40)
check_norm("rms_norm", 2000, 768)
check_norm("layer_norm", 2000, 768)

# A tree layer's bf16 result goes through the same rounding.
depth, rows, din, dout = 3, 333, 48, 40
nodes = 2 ** (depth + 1) - 1
mlir = tree_ffn_function("bf16", rows, din, dout, 1, depth, "gelu", True, True, True)
x_arr, x = quantize(rng.standard_normal((rows, din)), "bf16")
wi_arr, wi = quantize(rng.standard_normal((1, nodes, din)) / 6, "bf16")
bi_arr, bi = quantize(rng.standard_normal((1, nodes)) / 4, "bf16")
wo_arr, wo = quantize(rng.standard_normal((1, nodes, dout)) / 3, "bf16")
bo_arr, bo = quantize(rng.standard_normal(dout), "bf16")
args = [x_arr, wi_arr, bi_arr, wo_arr, bo_arr]
(y,) = run(mlir, "f", args, 1)
(integer,) = run(mlir, "f", args, 1, extra_flags=["--integer-bf16"])
check.equal(f"tree_ffn {rows}x{din} bf16: the same bits as integer rounding", y, integer)
check.close(f"tree_ffn {rows}x{din} bf16", dequantize(y, "bf16"), tree_ffn_ref(x, wi, bi, wo, bo, depth, "gelu"),
            TOLERANCE["bf16"])
check.finish()

# LayerNorm stays accurate in f32 when |mean| >> stddev, on the CPU lowering
# and on every GPU strategy's CPU twin: deviations are taken from a pivot
# (the row's first element) with the shift to the mean kept apart, instead
# of from a rounded mean. Two-pass f32 as torch computes it loses about
# log2(|mean| / stddev) bits: at mean 1e6 and stddev 1e-2 its output error
# was 4.9e-2, and rstd was off by 3e-3.
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import numpy as np

from fffcheck import Checker, run

rng = np.random.default_rng(1000000)
check = Checker()
# Output and rstd, relative to float64 numpy on the same f32 inputs; the
# mean, relative to its magnitude plus the stddev (an f32 mean of 1e6 is
# rounded to 1/16 whatever the stddev).
TOLERANCE = 4e-6


def case(mean, std, hidden, rows=8, static=True):
    x = (mean + std * rng.standard_normal((rows, hidden))).astype(np.float32)
    g = rng.standard_normal(hidden).astype(np.float32)
    b = rng.standard_normal(hidden).astype(np.float32)
    h = hidden if static else "?"
    xt, pt, st = f"tensor<?x{h}xf32>", f"tensor<{h}xf32>", "tensor<?x1xf32>"
    mlir = f"""
func.func @layer_norm(%x: {xt}, %g: {pt}, %b: {pt}) -> ({xt}, {st}, {st}) {{
  %y, %mean, %rstd = fff.layer_norm %x scale(%g : {pt}) bias(%b : {pt}) return_stats : {xt}
  return %y, %mean, %rstd : {xt}, {st}, {st}
}}"""
    x64 = x.astype(np.float64)
    ref_mean = x64.mean(axis=1, keepdims=True)
    ref_rstd = 1 / np.sqrt(((x64 - ref_mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    ref_y = (x64 - ref_mean) * ref_rstd * g + b
    for mode, flags in (("cpu", []), ("gpu twin", ["--gpu-twin"])):
        y, m, r = run(mlir, "layer_norm", [x, g, b], 3, extra_flags=flags)
        name = f"{mode} mean {mean:g} std {std:g} hidden {hidden}{'' if static else ' (dynamic)'}"
        check.close(f"y {name}", y, ref_y, TOLERANCE)
        check.close(f"rstd {name}", r, ref_rstd, TOLERANCE)
        check.close(f"mean {name}", m, ref_mean, TOLERANCE, scale=np.abs(ref_mean) + 1 / ref_rstd)


# Hidden sizes that take each GPU strategy: warp per row (768), block per
# row (4096), looped (a dynamic row size).
for mean, std in ((1e4, 1.0), (1e6, 1e-2), (-3e5, 0.5), (0.0, 1.0)):
    case(mean, std, 768)
    case(mean, std, 4096)
    case(mean, std, 1000, static=False)

check.finish()

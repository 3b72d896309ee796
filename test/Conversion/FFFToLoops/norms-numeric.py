# layer_norm and rms_norm through --fff-cpu-pipeline and fff-run, against
# float64 numpy references on seeded random data: the vector lowering
# (convert-fff-norms-to-vector) at this host's vector width and at 256 and
# 128 bits, and the scalar reference lowering (fff-run --reference); and
# results that are bitwise the same for any thread count.
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import numpy as np

from fffcheck import TOLERANCE, Checker, dequantize, quantize, run, tensor_type

rng = np.random.default_rng(20261130)
check = Checker()


def layer_norm_ref(x, gamma, beta, eps, normalized_rank):
    axes = tuple(range(x.ndim - normalized_rank, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (x - mean) * rstd
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y, mean, rstd


def rms_norm_ref(x, gamma, eps, normalized_rank):
    axes = tuple(range(x.ndim - normalized_rank, x.ndim))
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return y * gamma if gamma is not None else y


def check_all_norm_forms(dtype, shape, static_shape, normalized_rank, offset=0.0, flags=()):
    """One function computing every norm variant on one input."""
    x_arr, x = quantize(rng.standard_normal(shape) * 2.0 + offset, dtype)
    param_shape = shape[-normalized_rank:]
    g_arr, g = quantize(rng.standard_normal(param_shape), dtype)
    b_arr, b = quantize(rng.standard_normal(param_shape), dtype)
    xt, pt = tensor_type(static_shape, dtype), tensor_type(param_shape, dtype)
    stats_shape = list(static_shape[:-normalized_rank]) + [1] * normalized_rank
    st = tensor_type(stats_shape, "f32")
    nr = f"normalized_rank {normalized_rank}"
    mlir = f"""
func.func @norms(%x: {xt}, %g: {pt}, %b: {pt})
    -> ({xt}, {xt}, {st}, {st}, {xt}, {xt}, {xt}) {{
  %plain = fff.layer_norm %x {nr} : {xt}
  %affine, %mean, %rstd = fff.layer_norm %x scale(%g : {pt}) bias(%b : {pt}) {nr} return_stats : {xt}
  %scaled = fff.layer_norm %x scale(%g : {pt}) {nr} {{epsilon = 1.0e-03 : f32}} : {xt}
  %rms = fff.rms_norm %x {nr} {{epsilon = 1.0e-06 : f32}} : {xt}
  %rms_scaled = fff.rms_norm %x scale(%g : {pt}) {nr} : {xt}
  return %plain, %affine, %mean, %rstd, %scaled, %rms, %rms_scaled : {xt}, {xt}, {st}, {st}, {xt}, {xt}, {xt}
}}"""
    results = run(mlir, "norms", [x_arr, g_arr, b_arr], 7, extra_flags=flags)
    plain, affine, mean, rstd, scaled, rms, rms_scaled = results
    tol = TOLERANCE[dtype]
    name = f"{dtype} {list(shape)} normalized_rank={normalized_rank} offset={offset} {' '.join(flags)}"
    ref_affine, ref_mean, ref_rstd = layer_norm_ref(x, g, b, 1e-5, normalized_rank)
    check.close(f"layer_norm {name}", dequantize(plain, dtype), layer_norm_ref(x, None, None, 1e-5, normalized_rank)[0], tol)
    check.close(f"layer_norm+gamma+beta {name}", dequantize(affine, dtype), ref_affine, tol)
    # Stats are f32 whatever the input type. The mean of random data is near
    # zero, so its error is measured against the rows' standard deviation.
    check.close(f"layer_norm mean {name}", mean, ref_mean, TOLERANCE["f32"], scale=1.0 / ref_rstd)
    check.close(f"layer_norm rstd {name}", rstd, ref_rstd, TOLERANCE["f32"])
    check.close(f"layer_norm+gamma eps=1e-3 {name}", dequantize(scaled, dtype), layer_norm_ref(x, g, None, 1e-3, normalized_rank)[0], tol)
    check.close(f"rms_norm {name}", dequantize(rms, dtype), rms_norm_ref(x, None, 1e-6, normalized_rank), tol)
    check.close(f"rms_norm+gamma {name}", dequantize(rms_scaled, dtype), rms_norm_ref(x, g, 1e-5, normalized_rank), tol)


for flags in [(), ("--reference",)]:
    for dtype in ("f32", "f16", "bf16"):
        for hidden in (1, 3, 127, 768, 1000, 4096):
            # Batch 1 with a static shape, and many rows with a dynamic batch dim.
            check_all_norm_forms(dtype, (1, hidden), (1, hidden), 1, flags=flags)
            check_all_norm_forms(dtype, (37, hidden), (None, hidden), 1, flags=flags)
        # Normalizing two trailing dims of a 3-D input with a dynamic batch.
        check_all_norm_forms(dtype, (5, 4, 96), (None, 4, 96), 2, flags=flags)
        # Everything dynamic, including the normalized dim.
        check_all_norm_forms(dtype, (9, 300), (None, None), 1, flags=flags)
    # A large common offset: the two-pass variance must not cancel catastrophically.
    check_all_norm_forms("f32", (16, 768), (None, 768), 1, offset=1000.0, flags=flags)
    # normalized_rank equal to the rank: one row, stats of shape [1, 1].
    check_all_norm_forms("f32", (6, 50), (6, 50), 2, flags=flags)
# Narrower vectors: other step sizes and tails for the same rows.
for bits in (256, 128):
    for dtype in ("f32", "bf16"):
        for hidden in (3, 100, 1000):
            check_all_norm_forms(dtype, (7, hidden), (None, hidden), 1, flags=(f"--vector-bits={bits}",))
    check_all_norm_forms("f16", (4, 37, 5), (4, None, 5), 2, flags=(f"--vector-bits={bits}",))
# Norms large enough to split their rows across threads: the same bits
# from one thread as from two or all cores.
for dtype, shape, static in [("f32", (1500, 768), (None, 768)), ("bf16", (1000, 4, 300), (None, 4, 300))]:
    x_arr, _ = quantize(rng.standard_normal(shape), dtype)
    xt, pt = tensor_type(static, dtype), tensor_type(shape[-1:], dtype)
    mlir = f"""
func.func @norms(%x: {xt}, %g: {pt}) -> ({xt}, {xt}) {{
  %ln = fff.layer_norm %x scale(%g : {pt}) : {xt}
  %rms = fff.rms_norm %x scale(%g : {pt}) : {xt}
  return %ln, %rms : {xt}, {xt}
}}"""
    g_arr, _ = quantize(rng.standard_normal(shape[-1:]), dtype)
    one = run(mlir, "norms", [x_arr, g_arr], 2, extra_flags=("--threads=1",))
    for threads in ("2", "0"):
        for name, a, b in zip(("layer_norm", "rms_norm"), one,
                              run(mlir, "norms", [x_arr, g_arr], 2, extra_flags=("--threads", threads))):
            check.equal(f"{name} {dtype} {list(shape)}: --threads {threads} gives --threads 1's bits", b, a)
check.finish()

# layer_norm_grad and rms_norm_grad through --fff-cpu-pipeline and fff-run,
# against torch.autograd's gradients of torch's own layer_norm and rms_norm
# in float64, on seeded random data: the vector lowering at this host's
# vector width and at 256 and 128 bits, the reference lowering
# (fff-run --reference), every float type, odd widths and tails, dynamic
# extents, two normalized dims; and dgamma/dbeta bitwise the same for any
# thread count.
#
# REQUIRES: numpy, torch
# RUN: %python %s | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import numpy as np

from fffcheck import TOLERANCE, Checker, dequantize, grad_scale, norm_grads_ref, quantize, run, tensor_type

rng = np.random.default_rng(20261202)
check = Checker()


def stats(x, eps, normalized_rank, kind):
    """The forward's mean and rstd in f32, as the op takes them."""
    axes = tuple(range(x.ndim - normalized_rank, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    if kind == "layer_norm":
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    else:
        var = (x * x).mean(axis=axes, keepdims=True)
    return mean.astype(np.float32), (1.0 / np.sqrt(var + eps)).astype(np.float32)


def check_grads(dtype, shape, static_shape, normalized_rank, offset=0.0, flags=()):
    """Every form of both backward ops on one input."""
    x_arr, x = quantize(rng.standard_normal(shape) * 2.0 + offset, dtype)
    dy_arr, dy = quantize(rng.standard_normal(shape), dtype)
    param_shape = shape[-normalized_rank:]
    g_arr, g = quantize(rng.standard_normal(param_shape), dtype)
    xt, pt = tensor_type(static_shape, dtype), tensor_type(param_shape, dtype)
    # Without a scale, dbeta's type has the input's normalized extents.
    qt = tensor_type(static_shape[-normalized_rank:], dtype)
    stats_shape = list(static_shape[:-normalized_rank]) + [1] * normalized_rank
    st = tensor_type(stats_shape, "f32")
    nr = f"normalized_rank {normalized_rank}"
    mean, rstd = stats(x, 1e-5, normalized_rank, "layer_norm")
    _, rms_rstd = stats(x, 1e-6, normalized_rank, "rms_norm")
    mlir = f"""
func.func @grads(%dy: {xt}, %x: {xt}, %mean: {st}, %rstd: {st}, %g: {pt}, %rms_rstd: {st})
    -> ({xt}, {pt}, {pt}, {xt}, {qt}, {xt}, {xt}, {pt}, {xt}) {{
  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %mean, %rstd scale(%g : {pt}) bias_grad {nr} : {xt}, {st}
  %dx_plain, %db_plain = fff.layer_norm_grad %dy, %x, %mean, %rstd bias_grad {nr} : {xt}, {st}
  %dx_bare = fff.layer_norm_grad %dy, %x, %mean, %rstd {nr} : {xt}, {st}
  %rdx, %rdg = fff.rms_norm_grad %dy, %x scale(%g : {pt}) {nr} {{epsilon = 1.0e-06 : f32}} : {xt}
  %rdx_given = fff.rms_norm_grad %dy, %x rstd(%rms_rstd : {st}) {nr} : {xt}
  return %dx, %dg, %db, %dx_plain, %db_plain, %dx_bare, %rdx, %rdg, %rdx_given
      : {xt}, {pt}, {pt}, {xt}, {qt}, {xt}, {xt}, {pt}, {xt}
}}"""
    results = run(mlir, "grads", [dy_arr, x_arr, mean, rstd, g_arr, rms_rstd], 9, extra_flags=flags)
    dx, dg, db, dx_plain, db_plain, dx_bare, rdx, rdg, rdx_given = (dequantize(r, dtype) for r in results)
    name = f"{dtype} {list(shape)} normalized_rank={normalized_rank} offset={offset} {' '.join(flags)}"
    # The statistics are f32 and dy, x are rounded to the type: the error is
    # the f32 arithmetic's plus one rounding of each result.
    tol = max(TOLERANCE[dtype], 1e-4 if offset else 2e-5)
    b = np.zeros(param_shape)
    leading = tuple(range(x.ndim - normalized_rank))
    # Floors (see grad_scale): the magnitude of dx's terms, and 1e-3 of that
    # of dgamma's (whose terms, of random sign, sum to about sqrt(rows) of it).
    dx_terms, dx_terms_plain = np.abs(dy * g) * rstd, np.abs(dy) * rstd
    dg_terms = 1e-3 * (np.abs(dy) * (np.abs(x) + np.abs(mean)) * rstd).sum(axis=leading)

    def close(what, actual, expected, floor):
        check.close(f"{what} {name}", actual, expected, tol, scale=grad_scale(expected, floor))

    ref = norm_grads_ref("layer_norm", x, dy, g, b, 1e-5, normalized_rank)
    close("layer_norm_grad dx", dx, ref[0], dx_terms)
    close("layer_norm_grad dgamma", dg, ref[1], dg_terms)
    close("layer_norm_grad dbeta", db, ref[2], ref[2])
    ref = norm_grads_ref("layer_norm", x, dy, None, b, 1e-5, normalized_rank)
    close("layer_norm_grad (no scale) dx", dx_plain, ref[0], dx_terms_plain)
    close("layer_norm_grad (no scale) dbeta", db_plain, ref[2], ref[2])
    ref = norm_grads_ref("layer_norm", x, dy, None, None, 1e-5, normalized_rank)
    close("layer_norm_grad (no affine) dx", dx_bare, ref[0], dx_terms_plain)
    ref = norm_grads_ref("rms_norm", x, dy, g, None, 1e-6, normalized_rank)
    close("rms_norm_grad dx", rdx, ref[0], np.abs(dy * g) * rms_rstd)
    close("rms_norm_grad dgamma", rdg, ref[1], 1e-3 * np.abs(dy * x * rms_rstd).sum(axis=leading))
    ref = norm_grads_ref("rms_norm", x, dy, None, None, 1e-6, normalized_rank)
    close("rms_norm_grad (rstd given) dx", rdx_given, ref[0], np.abs(dy) * rms_rstd)


for flags in [(), ("--reference",)]:
    for dtype in ("f32", "f16", "bf16"):
        for hidden in (1, 3, 127, 768, 1000):
            check_grads(dtype, (1, hidden), (1, hidden), 1, flags=flags)
            check_grads(dtype, (37, hidden), (None, hidden), 1, flags=flags)
        # Two normalized dims of a 3-D input with a dynamic batch, and
        # everything dynamic.
        check_grads(dtype, (5, 4, 96), (None, 4, 96), 2, flags=flags)
        check_grads(dtype, (9, 300), (None, None), 1, flags=flags)
    # A large common offset, and more rows than row blocks (64).
    check_grads("f32", (16, 768), (None, 768), 1, offset=100.0, flags=flags)
    check_grads("f32", (203, 64), (None, 64), 1, flags=flags)
    # normalized_rank equal to the rank: one row.
    check_grads("f32", (6, 50), (6, 50), 2, flags=flags)
for bits in (256, 128):
    for dtype in ("f32", "bf16"):
        for hidden in (3, 100, 1000):
            check_grads(dtype, (7, hidden), (None, hidden), 1, flags=(f"--vector-bits={bits}",))


def check_fused(dtype, shape, static_shape, flags=()):
    """A backward unit as AOTAutograd's graphs hold one: dy = grad * mask
    (an inverted-dropout mask of 0 and 1.25), the norm backward, then the
    residual stream's f32 gradient added to dx (through a cast up from a
    half type). The unit computes, bit for bit, what the unfused ops do:
    the backward op on the masked dy that fff-run is handed, then the add
    in numpy; and it is within tolerance of float64."""
    grad_arr, grad = quantize(rng.standard_normal(shape), dtype)
    keep = rng.random(shape) < 0.8
    mask_arr, mask = quantize(np.where(keep, 1.25, 0.0), dtype)
    x_arr, x = quantize(rng.standard_normal(shape) * 2.0 + 0.3, dtype)
    g_arr, g = quantize(rng.standard_normal(shape[-1:]), dtype)
    dres = rng.standard_normal(shape).astype(np.float32)
    dy_arr, dy = quantize(grad * mask, dtype)  # one product, rounded once
    xt, pt = tensor_type(static_shape, dtype), tensor_type(shape[-1:], dtype)
    wt, st = tensor_type(static_shape, "f32"), tensor_type(list(static_shape[:-1]) + [1], "f32")
    widen = (lambda v, name: (f"%{name} = arith.extf %{v} : {xt} to {wt}", name)) if dtype != "f32" else \
        (lambda v, name: ("", v))
    wide_dx, ldx = widen("dx", "wdx")
    wide_rdx, rdx = widen("rdx", "wrdx")
    mean, rstd = stats(x, 1e-5, 1, "layer_norm")
    mlir = f"""
func.func @fused(%grad: {xt}, %mask: {xt}, %x: {xt}, %mean: {st}, %rstd: {st}, %g: {pt}, %dres: {wt})
    -> ({wt}, {pt}, {pt}, {wt}, {pt}) {{
  %dy = arith.mulf %grad, %mask : {xt}
  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %mean, %rstd scale(%g : {pt}) bias_grad : {xt}, {st}
  {wide_dx}
  %dh = arith.addf %dres, %{ldx} : {wt}
  %rdy = arith.mulf %grad, %mask : {xt}
  %rdx, %rdg = fff.rms_norm_grad %rdy, %x scale(%g : {pt}) : {xt}
  {wide_rdx}
  %rdh = arith.addf %{rdx}, %dres : {wt}
  return %dh, %dg, %db, %rdh, %rdg : {wt}, {pt}, {pt}, {wt}, {pt}
}}
func.func @unfused(%dy: {xt}, %x: {xt}, %mean: {st}, %rstd: {st}, %g: {pt})
    -> ({xt}, {pt}, {pt}, {xt}, {pt}) {{
  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %mean, %rstd scale(%g : {pt}) bias_grad : {xt}, {st}
  %rdx, %rdg = fff.rms_norm_grad %dy, %x scale(%g : {pt}) : {xt}
  return %dx, %dg, %db, %rdx, %rdg : {xt}, {pt}, {pt}, {xt}, {pt}
}}"""
    fused = run(mlir, "fused", [grad_arr, mask_arr, x_arr, mean, rstd, g_arr, dres], 5, extra_flags=flags)
    apart = run(mlir, "unfused", [dy_arr, x_arr, mean, rstd, g_arr], 5, extra_flags=flags)
    name = f"fused unit {dtype} {list(shape)} {' '.join(flags)}"
    for i, what in ((0, "layer_norm_grad dh"), (3, "rms_norm_grad dh")):
        expected = dequantize(apart[i], dtype).astype(np.float32) + dres
        check.equal(f"{what} {name}: the unfused ops' bits", fused[i], expected)
    for i, what in ((1, "dgamma"), (2, "dbeta"), (4, "rms dgamma")):
        check.equal(f"{what} {name}: the unfused op's bits", fused[i], apart[i])
    tol = max(TOLERANCE[dtype], 2e-5)
    for kind, i, eps in (("layer_norm", 0, 1e-5), ("rms_norm", 3, 1e-5)):
        ref = norm_grads_ref(kind, x, dy, g, np.zeros(shape[-1:]) if kind == "layer_norm" else None, eps, 1)
        floor = np.abs(dy * g) * (rstd if kind == "layer_norm" else stats(x, eps, 1, kind)[1]) + np.abs(dres)
        check.close(f"{kind} dh {name}", fused[i], ref[0] + dres, tol, scale=grad_scale(ref[0] + dres, floor))


def check_offset_prologue(dtype, shape, flags=()):
    """A prologue that maps 0 to something else (dy = grad + 0.5), over rows
    with a ragged tail: the lanes past the row's end must add nothing to
    its sums."""
    grad_arr, grad = quantize(rng.standard_normal(shape), dtype)
    x_arr, x = quantize(rng.standard_normal(shape), dtype)
    g_arr, g = quantize(rng.standard_normal(shape[-1:]), dtype)
    dy_arr, _ = quantize(grad + 0.5, dtype)
    xt, pt = tensor_type(shape, dtype), tensor_type(shape[-1:], dtype)
    st = tensor_type(list(shape[:-1]) + [1], "f32")
    mean, rstd = stats(x, 1e-5, 1, "layer_norm")
    grads = f"""
  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %mean, %rstd scale(%g : {pt}) bias_grad : {xt}, {st}
  %rdx, %rdg = fff.rms_norm_grad %rdy, %x scale(%g : {pt}) : {xt}
  return %dx, %dg, %db, %rdx, %rdg : {xt}, {pt}, {pt}, {xt}, {pt}
}}"""
    signature = f"%x: {xt}, %mean: {st}, %rstd: {st}, %g: {pt}) -> ({xt}, {pt}, {pt}, {xt}, {pt}) {{"
    mlir = f"""
func.func @offset(%grad: {xt}, {signature}
  %half = arith.constant dense<0.5> : {xt}
  %dy = arith.addf %grad, %half : {xt}
  %rdy = arith.addf %grad, %half : {xt}{grads}
func.func @given(%dy: {xt}, {signature}
  %rdy = arith.addf %dy, %dy : {xt}
  %c = arith.constant dense<0.5> : {xt}
  %rdy2 = arith.mulf %rdy, %c : {xt}{grads.replace("%rdy,", "%rdy2,")}"""
    args = [x_arr, mean, rstd, g_arr]
    fused = run(mlir, "offset", [grad_arr] + args, 5, extra_flags=flags)
    # @given's rms dy is (dy + dy) * 0.5 = dy, exactly.
    apart = run(mlir, "given", [dy_arr] + args, 5, extra_flags=flags)
    for what, a, e in zip(("dx", "dgamma", "dbeta", "rms dx", "rms dgamma"), fused, apart):
        check.equal(f"{what} {dtype} {list(shape)} {' '.join(flags)}: dy = grad + 0.5 computed as the rows stream "
                    f"gives the bits of dy handed in", a, e)


for flags in [(), ("--reference",)]:
    for dtype in ("f32", "bf16"):
        check_offset_prologue(dtype, (7, 203), flags)
    for dtype in ("f32", "f16", "bf16"):
        check_fused(dtype, (37, 200), (None, 200), flags)
    check_fused("bf16", (3, 4096), (None, 4096), flags)
    check_fused("f32", (1500, 768), (None, 768), flags)

# Backward ops large enough to split their row blocks across threads: the
# same bits from one thread as from two or all cores.
for dtype, shape, static in [("f32", (1500, 768), (None, 768)), ("bf16", (700, 4, 300), (None, 4, 300))]:
    x_arr, x = quantize(rng.standard_normal(shape), dtype)
    dy_arr, _ = quantize(rng.standard_normal(shape), dtype)
    g_arr, _ = quantize(rng.standard_normal(shape[1:]), dtype)
    nrank = len(shape) - 1
    mean, rstd = stats(x, 1e-5, nrank, "layer_norm")
    xt, pt = tensor_type(static, dtype), tensor_type(shape[1:], dtype)
    st = tensor_type([None] + [1] * nrank, "f32")
    mlir = f"""
func.func @grads(%dy: {xt}, %x: {xt}, %mean: {st}, %rstd: {st}, %g: {pt}) -> ({xt}, {pt}, {pt}, {xt}, {pt}) {{
  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %mean, %rstd scale(%g : {pt}) bias_grad normalized_rank {nrank} : {xt}, {st}
  %rdx, %rdg = fff.rms_norm_grad %dy, %x scale(%g : {pt}) normalized_rank {nrank} : {xt}
  return %dx, %dg, %db, %rdx, %rdg : {xt}, {pt}, {pt}, {xt}, {pt}
}}"""
    args = [dy_arr, x_arr, mean, rstd, g_arr]
    one = run(mlir, "grads", args, 5, extra_flags=("--threads=1",))
    for threads in ("2", "0"):
        many = run(mlir, "grads", args, 5, extra_flags=("--threads", threads))
        for name, a, b in zip(("dx", "dgamma", "dbeta", "rms dx", "rms dgamma"), one, many):
            check.equal(f"{name} {dtype} {list(shape)}: --threads {threads} gives --threads 1's bits", b, a)
check.finish()

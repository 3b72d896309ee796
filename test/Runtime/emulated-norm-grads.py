# The norm backward kernels, end to end without a GPU: layer_norm_grad and
# rms_norm_grad go through scripts/fff-aot.sh (the real PTX, host code and
# fff's CUDA runtime) and run on fff's PTX emulator, with its memory, race
# and barrier checks, against torch.autograd's gradients of torch's own
# layer_norm and rms_norm in float64, on random data:
#
#   - f32, f16 and bf16, row sizes on both sides of each strategy's
#     boundary (warp per row, block per row, looped; KernelStrategy.cpp)
#     and a dynamic row size;
#   - with and without a scale, dbeta alone, rstd given or recomputed, so
#     that the column-sum kernel runs for one, two or no gradients;
#   - one row, a few, enough for every block to take several rows (and a
#     warp-per-row block's eight warps to combine their partial rows), and
#     none (dgamma and dbeta are then exactly zero);
#   - inputs inside larger allocations, two normalized dims, a large common
#     offset;
#   - a second call gives the same bits;
#   - fused backward units (fff-fuse-norms forms them from the unfused ops
#     written here): dy = grad * mask (a dropout mask with its scale) and
#     dh = dres + dx in f32, and LLaMA's bf16 RMSNorm between an f32
#     gradient and an f32 residual stream (dy cast down, dx cast up), each
#     one fused kernel for dh that never stores dy or dx; and the
#     mixed-precision norms the torch backend trains (bf16 rows, f32
#     parameters: dy and x widened as they are read, dx narrowed), one
#     fused kernel that never stores the widened x either.
#
# REQUIRES: numpy, torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %emulator %fff_src_root/scripts/fff-aot.sh %t | FileCheck %s
# CHECK: norm backward kernels run: block_per_row, column_sums, looped, warp_per_row
# CHECK: fused norm backward kernels run: block_per_row, looped, warp_per_row
# CHECK: all {{[0-9]+}} checks passed

import os
import re
import sys

import numpy as np
import emulated
from emulated import Device
from fffcheck import TOLERANCE, Checker, dequantize, grad_scale, norm_grads_ref, quantize, tensor_type

emulator, aot, work = sys.argv[1:]
os.environ["FFF_CUDA_DRIVER"] = emulator
stats_file = os.path.join(work, "launches.jsonl")
os.environ["FFF_EMU_STATS"] = stats_file
rng = np.random.default_rng(20261202)
check = Checker()
device = Device(emulator)
STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}

# (dtype, row shape, static row shape): sizes around each strategy's
# boundary, odd sizes for tails, two normalized dims, a dynamic size.
CASES = [("f32", (h,), (h,)) for h in (1, 3, 127, 512, 516, 768, 1000, 4096, 8192, 8196)]
CASES += [("bf16", (h,), (h,)) for h in (8, 512, 520, 1024, 8192, 8200, 16384)]
CASES += [("f16", (h,), (h,)) for h in (6, 1000, 4104)]
CASES += [(dtype, (300,), (None,)) for dtype in ("f32", "f16", "bf16")]
CASES += [("bf16", (4, 96), (4, 96)), ("f32", (4, 96), (4, 96))]


def functions(name, dtype, static_row):
    nr = len(static_row)
    xt = tensor_type((None, *static_row), dtype)
    pt = tensor_type(static_row, dtype)
    st = tensor_type((None,) + (1,) * nr, "f32")
    r = f"normalized_rank {nr}"
    return f"""
func.func @ln_{name}(%dy: {xt}, %x: {xt}, %m: {st}, %r: {st}, %g: {pt}) -> ({xt}, {pt}, {pt}) {{
  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : {pt}) bias_grad {r} : {xt}, {st}
  return %dx, %dg, %db : {xt}, {pt}, {pt}
}}
func.func @lnb_{name}(%dy: {xt}, %x: {xt}, %m: {st}, %r: {st}) -> ({xt}, {pt}) {{
  %dx, %db = fff.layer_norm_grad %dy, %x, %m, %r bias_grad {r} : {xt}, {st}
  return %dx, %db : {xt}, {pt}
}}
func.func @rms_{name}(%dy: {xt}, %x: {xt}, %g: {pt}) -> ({xt}, {pt}) {{
  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : {pt}) {r} {{epsilon = 1.0e-06 : f32}} : {xt}
  return %dx, %dg : {xt}, {pt}
}}
func.func @rmsr_{name}(%dy: {xt}, %x: {xt}, %r: {st}) -> {xt} {{
  %dx = fff.rms_norm_grad %dy, %x rstd(%r : {st}) {r} : {xt}
  return %dx : {xt}
}}"""


def case_name(dtype, static_row):
    return f"{dtype}_" + "x".join(str(d) if d else "dynamic" for d in static_row)


library = emulated.build(aot, work, "grads", [functions(case_name(d, s), d, s) for d, _, s in CASES])


def statistics(x, nr, kind, eps):
    """The forward's mean and rstd in f32, [rows, 1...], as the ops take them."""
    axes = tuple(range(1, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2 if kind == "layer_norm" else x * x).mean(axis=axes, keepdims=True)
    return mean.astype(np.float32), (1.0 / np.sqrt(var + eps)).astype(np.float32)


def run(function, inputs, outputs, lib=None):
    out = emulated.call(device, lib or library, function, inputs, outputs, pads=(64, 64))
    if isinstance(out, str):
        check.failures.append(f"{function}: {out}")
        return None
    return out


def check_case(dtype, row, static_row, rows, offset=0.0):
    name = case_name(dtype, static_row)
    nr, storage = len(row), STORAGE[dtype]
    shape = (rows, *row)
    x_arr, x = quantize(rng.standard_normal(shape) * 2.0 + offset, dtype)
    dy_arr, dy = quantize(rng.standard_normal(shape), dtype)
    g_arr, g = quantize(rng.standard_normal(row), dtype)
    mean, rstd = statistics(x, nr, "layer_norm", 1e-5)
    _, rms_rstd = statistics(x, nr, "rms_norm", 1e-6)
    label = f"{dtype} {list(shape)}{f' offset {offset}' if offset else ''}"
    tol = max(TOLERANCE[dtype], 1e-4 if offset else 2e-5)
    leading = (0,)

    def close(what, actual, expected, floor):
        if rows == 0:
            check.equal(f"{what} {label} (no rows)", dequantize(actual, dtype).ravel(),
                        np.zeros(expected.size))
            return
        check.close(f"{what} {label}", dequantize(actual, dtype), expected, tol, scale=grad_scale(expected, floor))

    dx_terms = np.abs(dy * g) * rstd
    ln = run(f"ln_{name}", [dy_arr, x_arr, mean, rstd, g_arr],
             [(shape, storage), (row, storage), (row, storage)])
    if ln is not None:
        again = run(f"ln_{name}", [dy_arr, x_arr, mean, rstd, g_arr],
                    [(shape, storage), (row, storage), (row, storage)])
        if again is not None:
            check.equal(f"layer_norm_grad {label}: the same bits again", [a.tobytes() for a in again],
                        [a.tobytes() for a in ln])
        ref = norm_grads_ref("layer_norm", x, dy, g, np.zeros(row), 1e-5, nr)
        close("layer_norm_grad dx", ln[0], ref[0], dx_terms)
        close("layer_norm_grad dgamma", ln[1], ref[1],
              1e-3 * (np.abs(dy) * (np.abs(x) + np.abs(mean)) * rstd).sum(axis=leading))
        close("layer_norm_grad dbeta", ln[2], ref[2], ref[2])
    lnb = run(f"lnb_{name}", [dy_arr, x_arr, mean, rstd], [(shape, storage), (row, storage)])
    if lnb is not None:
        ref = norm_grads_ref("layer_norm", x, dy, None, np.zeros(row), 1e-5, nr)
        close("layer_norm_grad (no scale) dx", lnb[0], ref[0], np.abs(dy) * rstd)
        close("layer_norm_grad (no scale) dbeta", lnb[1], ref[2], ref[2])
    rms = run(f"rms_{name}", [dy_arr, x_arr, g_arr], [(shape, storage), (row, storage)])
    if rms is not None:
        ref = norm_grads_ref("rms_norm", x, dy, g, None, 1e-6, nr)
        close("rms_norm_grad dx", rms[0], ref[0], np.abs(dy * g) * rms_rstd)
        close("rms_norm_grad dgamma", rms[1], ref[1], 1e-3 * np.abs(dy * x * rms_rstd).sum(axis=leading))
    rmsr = run(f"rmsr_{name}", [dy_arr, x_arr, rms_rstd], [(shape, storage)])
    if rmsr is not None and rows:
        ref = norm_grads_ref("rms_norm", x, dy, None, None, 1e-6, nr)
        close("rms_norm_grad (rstd given) dx", rmsr[0], ref[0], np.abs(dy) * rms_rstd)


for dtype, row, static_row in CASES:
    size = int(np.prod(row))
    for rows in (1, 5, 0):
        check_case(dtype, row, static_row, rows)
    if size <= 1024:
        # More rows than partial blocks (264): each block takes several.
        check_case(dtype, row, static_row, 700)
# Enough rows that each warp of a warp-per-row block takes some (8 warps,
# 264 blocks), and a large common offset.
check_case("f32", (512,), (512,), 2200)
check_case("bf16", (512,), (512,), 2200)
check_case("f32", (768,), (768,), 16, offset=100.0)



def fused_functions(name, hidden):
    """The unfused ops of a backward's fused unit; the pipeline fuses them."""
    f32, bf16 = tensor_type((None, hidden), "f32"), tensor_type((None, hidden), "bf16")
    pf, pb = tensor_type((hidden,), "f32"), tensor_type((hidden,), "bf16")
    st = tensor_type((None, 1), "f32")
    return f"""
func.func @dropout_residual_{name}(%grad: {f32}, %mask: {f32}, %x: {f32}, %m: {st}, %r: {st}, %g: {pf},
                                   %dres: {f32}) -> ({f32}, {pf}, {pf}) {{
  %dy = arith.mulf %grad, %mask : {f32}
  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : {pf}) bias_grad : {f32}, {st}
  %dh = arith.addf %dres, %dx : {f32}
  return %dh, %dg, %db : {f32}, {pf}, {pf}
}}
func.func @llama_casts_{name}(%grad: {f32}, %x: {bf16}, %g: {pb}, %dres: {f32}) -> ({f32}, {pb}) {{
  %dy = arith.truncf %grad : {f32} to {bf16}
  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : {pb}) {{epsilon = 1.0e-06 : f32}} : {bf16}
  %wide = arith.extf %dx : {bf16} to {f32}
  %dh = arith.addf %wide, %dres : {f32}
  return %dh, %dg : {f32}, {pb}
}}
func.func @mixed_layer_norm_{name}(%dy: {bf16}, %x: {bf16}, %m: {st}, %r: {st}, %g: {pf},
                                   %dres: {bf16}) -> ({bf16}, {pf}, {pf}) {{
  %dy_wide = arith.extf %dy : {bf16} to {f32}
  %x_wide = arith.extf %x : {bf16} to {f32}
  %dx_wide, %dg, %db = fff.layer_norm_grad %dy_wide, %x_wide, %m, %r scale(%g : {pf}) bias_grad : {f32}, {st}
  %dx = arith.truncf %dx_wide : {f32} to {bf16}
  %dh = arith.addf %dres, %dx : {bf16}
  return %dh, %dg, %db : {bf16}, {pf}, {pf}
}}
func.func @mixed_rms_norm_{name}(%dy: {bf16}, %x: {bf16}, %g: {pf}) -> ({bf16}, {pf}) {{
  %dy_wide = arith.extf %dy : {bf16} to {f32}
  %x_wide = arith.extf %x : {bf16} to {f32}
  %dx_wide, %dg = fff.rms_norm_grad %dy_wide, %x_wide scale(%g : {pf}) {{epsilon = 1.0e-06 : f32}} : {f32}
  %dx = arith.truncf %dx_wide : {f32} to {bf16}
  return %dx, %dg : {bf16}, {pf}
}}"""


FUSED_HIDDEN = (256, 768, 4096, 8196, None)
fused_library = emulated.build(aot, work, "fused", [fused_functions(str(h or "dynamic"), h) for h in FUSED_HIDDEN])


def check_fused(hidden, rows):
    name, width = str(hidden or "dynamic"), hidden or 1000
    shape, row = (rows, width), (width,)
    label = f"{list(shape)}{' (dynamic)' if hidden is None else ''}"
    x_arr, x = quantize(rng.standard_normal(shape) * 2.0, "f32")
    grad = rng.standard_normal(shape).astype(np.float32)
    mask = np.where(rng.random(shape) < 0.1, 0.0, 1.0 / 0.9).astype(np.float32)
    dres = rng.standard_normal(shape).astype(np.float32)
    g_arr, g = quantize(rng.uniform(0.5, 1.5, row), "f32")
    mean, rstd = statistics(x, 1, "layer_norm", 1e-5)
    out = run(f"dropout_residual_{name}", [grad, mask, x_arr, mean, rstd, g_arr, dres],
              [(shape, np.float32), (row, np.float32), (row, np.float32)], fused_library)
    if out is not None:
        dy = (grad * mask).astype(np.float64)  # the product in f32, as the kernel rounds it
        ref = norm_grads_ref("layer_norm", x, dy, g, np.zeros(row), 1e-5, 1)
        floor = np.abs(dy * g) * rstd
        check.close(f"fused dropout + residual dh {label}", out[0], dres + ref[0], 2e-5,
                    scale=grad_scale(dres + ref[0], floor))
        check.close(f"fused dropout + residual dgamma {label}", out[1], ref[1], 2e-5,
                    scale=grad_scale(ref[1], 1e-3 * (np.abs(dy) * (np.abs(x) + np.abs(mean)) * rstd).sum(axis=0)))
        check.close(f"fused dropout + residual dbeta {label}", out[2], ref[2], 2e-5, scale=grad_scale(ref[2], ref[2]))
    xb_arr, xb = quantize(rng.standard_normal(shape), "bf16")
    gb_arr, gb = quantize(rng.uniform(0.5, 1.5, row), "bf16")
    out = run(f"llama_casts_{name}", [grad, xb_arr, gb_arr, dres], [(shape, np.float32), (row, np.uint16)],
              fused_library)
    if out is not None:
        dy = dequantize(quantize(grad, "bf16")[0], "bf16")
        ref = norm_grads_ref("rms_norm", xb, dy, gb, None, 1e-6, 1)
        _, rms_rstd = statistics(xb, 1, "rms_norm", 1e-6)
        check.close(f"fused bf16 casts + residual dh {label}", out[0], dres + ref[0], TOLERANCE["bf16"],
                    scale=grad_scale(dres + ref[0], np.abs(dy * gb) * rms_rstd))
        check.close(f"fused bf16 casts + residual dgamma {label}", dequantize(out[1], "bf16"), ref[1],
                    TOLERANCE["bf16"], scale=grad_scale(ref[1], 1e-3 * np.abs(dy * xb * rms_rstd).sum(axis=0)))

    # Mixed precision: the gradients are f32's of the bf16 values, dx is
    # rounded once to bf16 (before the bf16 residual add).
    dy_arr, dy = quantize(rng.standard_normal(shape), "bf16")
    dres_arr, dresb = quantize(rng.standard_normal(shape), "bf16")
    mean, rstd = statistics(xb, 1, "layer_norm", 1e-5)
    out = run(f"mixed_layer_norm_{name}", [dy_arr, xb_arr, mean, rstd, g_arr, dres_arr],
              [(shape, np.uint16), (row, np.float32), (row, np.float32)], fused_library)
    if out is not None:
        ref = norm_grads_ref("layer_norm", xb, dy, g, np.zeros(row), 1e-5, 1)
        check.close(f"mixed layer_norm dh {label}", dequantize(out[0], "bf16"), dresb + ref[0], TOLERANCE["bf16"],
                    scale=grad_scale(dresb + ref[0], np.abs(dy * g) * rstd))
        check.close(f"mixed layer_norm dgamma {label}", out[1], ref[1], 2e-5,
                    scale=grad_scale(ref[1], 1e-3 * (np.abs(dy) * (np.abs(xb) + np.abs(mean)) * rstd).sum(axis=0)))
        check.close(f"mixed layer_norm dbeta {label}", out[2], ref[2], 2e-5, scale=grad_scale(ref[2], ref[2]))
    out = run(f"mixed_rms_norm_{name}", [dy_arr, xb_arr, g_arr], [(shape, np.uint16), (row, np.float32)],
              fused_library)
    if out is not None:
        ref = norm_grads_ref("rms_norm", xb, dy, g, None, 1e-6, 1)
        _, rms_rstd = statistics(xb, 1, "rms_norm", 1e-6)
        check.close(f"mixed rms_norm dx {label}", dequantize(out[0], "bf16"), ref[0], TOLERANCE["bf16"],
                    scale=grad_scale(ref[0], np.abs(dy * g) * rms_rstd))
        check.close(f"mixed rms_norm dgamma {label}", out[1], ref[1], 2e-5,
                    scale=grad_scale(ref[1], 1e-3 * np.abs(dy * xb * rms_rstd).sum(axis=0)))


# Other shapes of unit: dx yielded beside dh (f16), dy yielded beside the
# epilogue's dx * x, a select on an i1 mask (bf16), a rank-3 row tensor.
ODD_UNITS = """
func.func @dx_also_out(%dy: tensor<?x512xf16>, %x: tensor<?x512xf16>, %g: tensor<512xf16>, %dres: tensor<?x512xf16>)
    -> (tensor<?x512xf16>, tensor<?x512xf16>, tensor<512xf16>) {
  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : tensor<512xf16>) : tensor<?x512xf16>
  %dh = arith.addf %dres, %dx : tensor<?x512xf16>
  return %dh, %dx, %dg : tensor<?x512xf16>, tensor<?x512xf16>, tensor<512xf16>
}
func.func @prologue_also_out(%a: tensor<?x768xf32>, %b: tensor<?x768xf32>, %x: tensor<?x768xf32>, %m: tensor<?x1xf32>,
                             %r: tensor<?x1xf32>) -> (tensor<?x768xf32>, tensor<?x768xf32>) {
  %dy = arith.addf %a, %b : tensor<?x768xf32>
  %dx = fff.layer_norm_grad %dy, %x, %m, %r : tensor<?x768xf32>, tensor<?x1xf32>
  %e = arith.mulf %dx, %x : tensor<?x768xf32>
  return %e, %dy : tensor<?x768xf32>, tensor<?x768xf32>
}
func.func @select_mask(%c: tensor<?x1024xi1>, %a: tensor<?x1024xbf16>, %x: tensor<?x1024xbf16>, %g: tensor<1024xbf16>)
    -> (tensor<?x1024xbf16>, tensor<1024xbf16>) {
  %z = arith.constant 0.0 : bf16
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?x1024xbf16>
  %zeros = tensor.splat %z[%n] : tensor<?x1024xbf16>
  %dy = arith.select %c, %a, %zeros : tensor<?x1024xi1>, tensor<?x1024xbf16>
  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : tensor<1024xbf16>) : tensor<?x1024xbf16>
  return %dx, %dg : tensor<?x1024xbf16>, tensor<1024xbf16>
}
func.func @rank3(%dy: tensor<2x?x96xf32>, %x: tensor<2x?x96xf32>, %g: tensor<96xf32>, %dres: tensor<2x?x96xf32>)
    -> (tensor<2x?x96xf32>, tensor<96xf32>) {
  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : tensor<96xf32>) : tensor<2x?x96xf32>
  %dh = arith.addf %dres, %dx : tensor<2x?x96xf32>
  return %dh, %dg : tensor<2x?x96xf32>, tensor<96xf32>
}"""
odd_library = emulated.build(aot, work, "odd", [ODD_UNITS])


def check_odd_units(rows):
    def close(what, actual, expected, dtype, floor):
        check.close(f"{what} ({rows} rows)", dequantize(actual, dtype), expected, TOLERANCE[dtype],
                    scale=grad_scale(expected, floor))

    shape = (rows, 512)
    dy_arr, dy = quantize(rng.standard_normal(shape), "f16")
    x_arr, x = quantize(rng.standard_normal(shape), "f16")
    g_arr, g = quantize(rng.uniform(0.5, 1.5, 512), "f16")
    dres_arr, dres = quantize(rng.standard_normal(shape), "f16")
    out = run("dx_also_out", [dy_arr, x_arr, g_arr, dres_arr],
              [(shape, np.float16), (shape, np.float16), ((512,), np.float16)], odd_library)
    if out is not None:
        ref = norm_grads_ref("rms_norm", x, dy, g, None, 1e-5, 1)
        close("unit yielding dx: dh", out[0], dres + ref[0], "f16", np.abs(dy))
        close("unit yielding dx: dx", out[1], ref[0], "f16", np.abs(dy))
        close("unit yielding dx: dgamma", out[2], ref[1], "f16", np.abs(dy * x).sum(axis=0) * 1e-3)

    shape = (rows, 768)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    x_arr, x = quantize(rng.standard_normal(shape) * 2.0, "f32")
    mean, rstd = statistics(x, 1, "layer_norm", 1e-5)
    out = run("prologue_also_out", [a, b, x_arr, mean, rstd], [(shape, np.float32), (shape, np.float32)],
              odd_library)
    if out is not None:
        dy = (a + b).astype(np.float64)
        ref = norm_grads_ref("layer_norm", x, dy, None, np.zeros(768), 1e-5, 1)
        close("unit yielding dy: dx * x", out[0], ref[0] * x, "f32", np.abs(dy * x) * rstd)
        check.equal(f"unit yielding dy: dy ({rows} rows)", out[1], a + b)

    shape = (rows, 1024)
    keep = rng.random(shape) < 0.8
    a_arr, a = quantize(rng.standard_normal(shape), "bf16")
    x_arr, x = quantize(rng.standard_normal(shape), "bf16")
    g_arr, g = quantize(rng.uniform(0.5, 1.5, 1024), "bf16")
    out = run("select_mask", [keep, a_arr, x_arr, g_arr], [(shape, np.uint16), ((1024,), np.uint16)], odd_library)
    if out is not None:
        dy = np.where(keep, a, 0.0)
        ref = norm_grads_ref("rms_norm", x, dy, g, None, 1e-5, 1)
        close("unit with an i1 mask: dx", out[0], ref[0], "bf16", np.abs(dy))
        close("unit with an i1 mask: dgamma", out[1], ref[1], "bf16", np.abs(dy * x).sum(axis=0) * 1e-3)

    shape = (2, rows, 96)
    dy_arr, dy = quantize(rng.standard_normal(shape), "f32")
    x_arr, x = quantize(rng.standard_normal(shape), "f32")
    g_arr, g = quantize(rng.uniform(0.5, 1.5, 96), "f32")
    dres = rng.standard_normal(shape).astype(np.float32)
    out = run("rank3", [dy_arr, x_arr, g_arr, dres], [(shape, np.float32), ((96,), np.float32)], odd_library)
    if out is not None:
        ref = norm_grads_ref("rms_norm", x.reshape(-1, 96), dy.reshape(-1, 96), g, None, 1e-5, 1)
        close("rank-3 unit: dh", out[0], dres + ref[0].reshape(shape), "f32", np.abs(dy))
        close("rank-3 unit: dgamma", out[1], ref[1], "f32", np.abs(dy * x).sum(axis=(0, 1)) * 1e-3)


fused_launches = len(emulated.launches(stats_file))
for hidden in FUSED_HIDDEN:
    for rows in (5, 300):
        check_fused(hidden, rows)

kinds, fused_kinds = set(), set()
for i, kernel in enumerate(emulated.launches(stats_file)):
    match = re.search(r"(fused_)?\w*norm_grad_\w+?_(?:\d+|dynamic)_(warp_per_row|block_per_row|looped|column_sums)",
                      kernel)
    if match:
        (fused_kinds if match.group(1) else kinds).add(match.group(2))
    elif i >= fused_launches:
        check.failures.append(f"a fused case launched {kernel}, not a fused norm backward kernel")

# The odd units run after that count: all but the i1 mask's are one fused
# kernel (an i1 buffer holds a byte a lane, which the kernels' vector loads
# do not read: that unit runs as separate kernels, with a remark).
odd_start = len(emulated.launches(stats_file))
for rows in (3, 70):
    check_odd_units(rows)
odd_kernels = set(emulated.launches(stats_file)[odd_start:])
for fused in ("fused_rms_norm_grad_f16_512_", "fused_layer_norm_grad_f32_768_", "fused_rms_norm_grad_f32_96_"):
    check.equal(f"an odd unit ran as {fused}*", any(k.startswith(fused) for k in odd_kernels), True)
check.equal("the i1 mask's unit ran as separate kernels",
            any(k.startswith("fused_rms_norm_grad_bf16_1024") for k in odd_kernels), False)
print("norm backward kernels run: " + ", ".join(sorted(kinds)))
print("fused norm backward kernels run: " + ", ".join(sorted(fused_kinds)))
check.finish()

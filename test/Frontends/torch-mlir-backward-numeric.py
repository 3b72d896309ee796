# A LayerNorm backward as torch-mlir emits it: aten.native_layer_norm_backward
# traced with torch-mlir's decompositions (make_fx) and imported to
# linalg-on-tensors, in f32, f16 and bf16, with and without gamma, over one
# and two trailing dims. fff-raise-norms must raise its dx to
# fff.layer_norm_grad (in f32 with its dgamma and dbeta; in f16 and bf16,
# whose sums torch-mlir takes in f32, those stay linalg); fff-run then runs
# the module, and as traced (--no-raise), against torch's own
# backward in float64 on the same rounded inputs.
#
# Then a hand-written RMSNorm (LLaMA's, with its f32 upcast) traced with its
# backward as one training step (make_fx of the forward and
# torch.autograd.grad): fff-raise-norms must raise the forward to
# fff.rms_norm and the dx of AOTAutograd's decomposed backward to
# fff.rms_norm_grad, which recomputes rstd, and the step must match torch's
# autograd in float64.
#
# REQUIRES: numpy, torch
# RUN: %python %s fff-opt | FileCheck %s
# CHECK: {{all [0-9]+ checks passed|skipped: torch-mlir is not installed}}

import subprocess
import sys

import numpy as np
import torch

from fffcheck import TOLERANCE, Checker, dequantize, quantize, run

try:
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch_mlir import fx
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table
except ImportError:
    print("skipped: torch-mlir is not installed")
    sys.exit(0)

fff_opt = sys.argv[1]
rng = np.random.default_rng(20261202)
check = Checker()
TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def linalg(shape, normalized_ndim, dtype, affine):
    """torch-mlir's linalg for native_layer_norm_backward of this shape."""
    normalized = list(shape[len(shape) - normalized_ndim:])
    stats = list(shape[:len(shape) - normalized_ndim]) + [1] * normalized_ndim
    mask = [True, affine, affine]

    def backward(dy, x, mean, rstd, *params):
        weight, bias = params if affine else (None, None)
        return tuple(t for t in torch.ops.aten.native_layer_norm_backward(dy, x, normalized, mean, rstd, weight, bias,
                                                                            mask) if t is not None)

    examples = [torch.zeros(shape, dtype=TORCH[dtype]), torch.zeros(shape, dtype=TORCH[dtype]),
                torch.zeros(stats), torch.zeros(stats)]
    if affine:  # two tensors: one passed twice would trace as one input
        examples += [torch.zeros(normalized, dtype=TORCH[dtype]) for _ in range(2)]
    graph = make_fx(backward, decomposition_table=get_decomposition_table())(*examples)
    return str(fx.stateless_fx_import(graph, output_type="linalg-on-tensors", model_name="backward"))


def raised(mlir):
    out = subprocess.run([fff_opt, "--fff-raise-norms", "-"], input=mlir, capture_output=True, text=True, check=True)
    return out.stdout


for dtype in ("f32", "f16", "bf16"):
    for shape, normalized_ndim in [((8, 64), 1), ((5, 7, 33), 1), ((3, 4, 20), 2), ((1, 3), 1)]:
        for affine in (True, False):
            name = f"{dtype} {list(shape)} normalized_ndim={normalized_ndim} {'with' if affine else 'without'} gamma"
            mlir = linalg(shape, normalized_ndim, dtype, affine)
            text = raised(mlir)
            check.count += 1
            if "fff.layer_norm_grad" in text:
                print(f"ok   {name}: raised to fff.layer_norm_grad")
            else:
                check.failures.append(f"{name}: not raised")
                print(f"FAIL {name}: not raised")
            dims = tuple(range(len(shape) - normalized_ndim, len(shape)))
            normalized = shape[len(shape) - normalized_ndim:]
            x_arr, x = quantize(rng.standard_normal(shape) * 2 + 0.5, dtype)
            dy_arr, dy = quantize(rng.standard_normal(shape), dtype)
            mean = x.mean(axis=dims, keepdims=True)
            rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axis=dims, keepdims=True) + 1e-5)
            args = [dy_arr, x_arr, mean.astype(np.float32), rstd.astype(np.float32)]
            g_arr, g = quantize(rng.standard_normal(normalized), dtype)
            b_arr, b = quantize(rng.standard_normal(normalized), dtype)
            if affine:
                args += [g_arr, b_arr]
            results = run(mlir, "backward", args, 3 if affine else 1)
            as_traced = run(mlir, "backward", args, 3 if affine else 1, extra_flags=("--no-raise",))
            tensors = [torch.tensor(v) for v in (dy, x, mean.astype(np.float32).astype(np.float64),
                                                 rstd.astype(np.float32).astype(np.float64))]
            weight, bias = (torch.tensor(g), torch.tensor(b)) if affine else (None, None)
            expected = torch.ops.aten.native_layer_norm_backward(*tensors[:2], list(normalized), *tensors[2:], weight,
                                                                 bias, [True, affine, affine])
            for what, actual, unraised, reference in zip(("dx", "dgamma", "dbeta"), results, as_traced, expected):
                for form, value in (("raised", actual), ("--no-raise", unraised)):
                    check.close(f"{what} {name} {form}", dequantize(value, dtype), reference.numpy(),
                                max(TOLERANCE[dtype], 2e-5))


def rms_step_linalg(shape, dtype, eps):
    """torch-mlir's linalg of a LLaMA RMSNorm's forward and backward."""

    def rms(x, w):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        return w * h.to(x.dtype)

    def step(x, w, dy):
        x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
        y = rms(x, w)
        return (y, *torch.autograd.grad(y, (x, w), dy))

    examples = [torch.zeros(shape, dtype=TORCH[dtype]), torch.zeros(shape[-1:], dtype=TORCH[dtype]),
                torch.zeros(shape, dtype=TORCH[dtype])]
    graph = make_fx(step, decomposition_table=get_decomposition_table())(*examples)
    return str(fx.stateless_fx_import(graph, output_type="linalg-on-tensors", model_name="step"))


for dtype in ("f32", "bf16"):
    for shape in ((8, 64), (3, 5, 96)):
        name = f"rms_norm step {dtype} {list(shape)}"
        mlir = rms_step_linalg(shape, dtype, 1e-6)
        text = raised(mlir)
        check.count += 1
        if "fff.rms_norm_grad" in text and "fff.rms_norm " in text:
            print(f"ok   {name}: raised to fff.rms_norm and fff.rms_norm_grad")
        else:
            check.failures.append(f"{name}: not raised")
            print(f"FAIL {name}: not raised")
        x_arr, x = quantize(rng.standard_normal(shape) * 2 + 0.5, dtype)
        w_arr, w = quantize(rng.standard_normal(shape[-1:]), dtype)
        dy_arr, dy = quantize(rng.standard_normal(shape), dtype)
        xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
        y = xt * torch.rsqrt(xt.pow(2).mean(-1, keepdim=True) + 1e-6) * wt
        expected = [y.detach(), *torch.autograd.grad(y, (xt, wt), torch.tensor(dy))]
        results = run(mlir, "step", [x_arr, w_arr, dy_arr], 3)
        as_traced = run(mlir, "step", [x_arr, w_arr, dy_arr], 3, extra_flags=("--no-raise",))
        for what, actual, unraised, reference in zip(("y", "dx", "dw"), results, as_traced, expected):
            # dw sums dy times the normalized row rounded to bf16 (as
            # LLaMA's forward rounds it), terms of random sign: their
            # roundings add up past one rounding of the result.
            tolerance = 1.5e-2 if (dtype, what) == ("bf16", "dw") else max(TOLERANCE[dtype], 2e-5)
            for form, value in (("raised", actual), ("--no-raise", unraised)):
                check.close(f"{what} {name} {form}", dequantize(value, dtype), reference.numpy(), tolerance)
check.finish()

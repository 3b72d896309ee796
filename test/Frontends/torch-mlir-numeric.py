# Real frontend IR: nn.LayerNorm (with and without affine parameters), nn.RMSNorm, a LLaMA-style bf16 RMSNorm and
# a pre-LN feedforward block, exported by torch-mlir to linalg-on-tensors
# (Inputs/torch_mlir/export.py), run through --fff-cpu-pipeline with fff-run
# on a dynamic batch, as exported, after --fff-raise-norms, and after
# --fff-raise-norms --fff-fuse-norms, against
# float64 numpy references that use the same weights (exported beside the
# IR). Needs no torch.
#
# REQUIRES: numpy
# RUN: %python %s %S/Inputs/torch_mlir fff-opt | FileCheck %s
# CHECK: all 15 checks passed

import math
import os
import subprocess
import sys

import numpy as np

from fffcheck import TOLERANCE, Checker, dequantize, from_bf16_bits, quantize, run, to_bf16_bits

inputs, fff_opt = sys.argv[1:]
rng = np.random.default_rng(7)
check = Checker()
erf = np.vectorize(math.erf)


def load(name):
    weights = {k: v.astype(np.float64) for k, v in np.load(os.path.join(inputs, f"{name}.weights.npz")).items()}
    return open(os.path.join(inputs, f"{name}.mlir")).read(), weights


def transformed(mlir, passes, expect):
    """The module after `passes`, which must have produced `expect`."""
    out = subprocess.run([fff_opt, *passes, "-"], input=mlir, capture_output=True, text=True, check=True).stdout
    assert expect in out, out
    return out


def forms(mlir, func, args):
    """Results of the exported module run as written (--no-raise), of its
    raised form, and of its raised and fused form."""
    texts = [("exported", mlir, ["--no-raise"]),
             ("raised", transformed(mlir, ["--fff-raise-norms"], "_norm"), ["--no-raise"]),
             ("raised+fused", transformed(mlir, ["--fff-raise-norms", "--fff-fuse-norms"], "fff."), [])]
    return [(form, run(text, func, args, 1, extra_flags=flags)[0]) for form, text, flags in texts]


def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps) * weight + bias


def bf16(values):
    return from_bf16_bits(to_bf16_bits(values)).astype(np.float64)


x768 = rng.standard_normal((5, 768)).astype(np.float32)
x64 = rng.standard_normal((7, 64)).astype(np.float32)

mlir, w = load("layer_norm")
for form, y in forms(mlir, "layer_norm", [x768]):
    check.close(f"torch-mlir nn.LayerNorm f32 [5, 768] {form}", y,
                layer_norm(x768.astype(np.float64), w["weight"], w["bias"]), TOLERANCE["f32"])

mlir, _ = load("layer_norm_no_affine")
for form, y in forms(mlir, "layer_norm_no_affine", [x768]):
    check.close(f"torch-mlir nn.LayerNorm(elementwise_affine=False) f32 [5, 768] {form}", y,
                layer_norm(x768.astype(np.float64), 1.0, 0.0), TOLERANCE["f32"])

mlir, w = load("rms_norm")
x = x768.astype(np.float64)
for form, y in forms(mlir, "rms_norm", [x768]):
    check.close(f"torch-mlir nn.RMSNorm f32 [5, 768] {form}", y,
                x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w["weight"], TOLERANCE["f32"])

# The LLaMA module rounds to bf16 twice, as torch does: after normalizing,
# and after scaling by the (bf16) weight; the raised op rounds once, as
# torch.compile's fused kernel does, which the bf16 tolerance covers.
mlir, w = load("llama_rms_norm_bf16")
x_bits, x = quantize(x768, "bf16")
normalized = bf16(x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6))
for form, y in forms(mlir, "llama_rms_norm_bf16", [x_bits]):
    check.close(f"torch-mlir LLaMA RMSNorm bf16 [5, 768] {form}", dequantize(y, "bf16"),
                bf16(w["weight"] * normalized), TOLERANCE["bf16"])

mlir, w = load("pre_ln_block")
x = x64.astype(np.float64)
h = layer_norm(x, w["ln.weight"], w["ln.bias"]) @ w["fc1.weight"].T + w["fc1.bias"]
h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
for form, y in forms(mlir, "pre_ln_block", [x64]):
    check.close(f"torch-mlir pre-LN block f32 [7, 64] {form}", y, x + h @ w["fc2.weight"].T + w["fc2.bias"],
                TOLERANCE["f32"])
check.finish()

#!/usr/bin/env python3
"""Exports the norms real models use to linalg-on-tensors with torch-mlir,
as test inputs for fff (raising, fusion, and the CPU pipeline on frontend IR).

    python3 -m pip install torch torch-mlir
    python3 test/Frontends/Inputs/torch_mlir/export.py

Writes one .mlir per model beside this script, with a dynamic batch dim and
the weights as constants, and the same weights as NAME.weights.npz (float32)
for the numeric test (test/Frontends/torch-mlir-numeric.py), which computes
its own numpy reference and so needs no torch.
"""

import inspect
import os

import numpy as np
import torch
import torch.nn as nn
from torch_mlir import fx

here = os.path.dirname(os.path.abspath(__file__))
HIDDEN = 768


class LlamaRMSNorm(nn.Module):
    """RMSNorm as LLaMA-family code writes it: upcast, mean of squares,
    rsqrt, downcast, scale."""

    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(dtype)


class PreLNBlock(nn.Module):
    """A pre-LN transformer feedforward sublayer: x + fc2(gelu(fc1(ln(x))))."""

    def __init__(self, hidden, width):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, width)
        self.fc2 = nn.Linear(width, hidden)

    def forward(self, x):
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln(x))))


def models():
    """(name, module, example input); the same seed gives the same weights."""
    torch.manual_seed(0)
    layer_norm = nn.LayerNorm(HIDDEN)
    # Without affine parameters, torch-mlir computes the variance in f64 from
    # the input while the mean is subtracted in f32.
    layer_norm_no_affine = nn.LayerNorm(HIDDEN, elementwise_affine=False)
    rms_norm = nn.RMSNorm(HIDDEN, eps=1e-6)
    llama = LlamaRMSNorm(HIDDEN).to(torch.bfloat16)
    block = PreLNBlock(64, 256)
    for module in (layer_norm, rms_norm, llama, block):
        with torch.no_grad():
            for parameter in module.parameters():
                parameter.copy_(torch.randn_like(parameter) * 0.5 + 1.0)
    return [
        ("layer_norm", layer_norm, torch.randn(4, HIDDEN)),
        ("rms_norm", rms_norm, torch.randn(4, HIDDEN)),
        ("layer_norm_no_affine", layer_norm_no_affine, torch.randn(4, HIDDEN)),
        ("llama_rms_norm_bf16", llama, torch.randn(4, HIDDEN).to(torch.bfloat16)),
        ("pre_ln_block", block, torch.randn(4, 64)),
    ]


def main():
    batch = torch.export.Dim("batch", min=1)
    for name, module, example in models():
        module.eval()
        argument = next(iter(inspect.signature(module.forward).parameters))
        imported = fx.export_and_import(
            module, example, output_type="linalg-on-tensors", func_name=name,
            dynamic_shapes={argument: {0: batch}})
        path = os.path.join(here, f"{name}.mlir")
        with open(path, "w") as f:
            f.write(f"// Exported by export.py with torch {torch.__version__} and torch-mlir "
                    "(linalg-on-tensors). Do not edit; rerun the script.\n")
            f.write(str(imported))
        weights = {k: v.detach().float().numpy() for k, v in module.state_dict().items()}
        np.savez(os.path.join(here, f"{name}.weights.npz"), **weights)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Runs examples/pre_ln_block.mlir on the CPU with fff-run and compares it
with a float64 numpy reference written here, on seeded random weights.

    python3 examples/run_pre_ln_block.py [--fff-run build/bin/fff-run] [--rows 64]
"""

import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--fff-run", default=os.environ.get("FFF_RUN", os.path.join(here, "..", "build", "bin", "fff-run")))
parser.add_argument("--rows", type=int, default=64)
options = parser.parse_args()

rng = np.random.default_rng(2026)
D, DEPTH, LEAF_DEPTH, WIDTH = 768, 11, 3, 32
N, LEAVES = 2 ** (DEPTH + 1) - 1, 2**LEAF_DEPTH
f32 = lambda *shape, scale=1.0: (rng.standard_normal(shape) * scale).astype(np.float32)
inputs = {
    "x": f32(options.rows, D),
    "ln_gamma": 1 + f32(D, scale=0.1), "ln_beta": f32(D, scale=0.1),
    "w_in": f32(1, N, D, scale=D**-0.5), "b_in": f32(1, N, scale=0.1),
    "w_out": f32(1, N, D, scale=(DEPTH + 1) ** -0.5), "b_out": f32(D, scale=0.1),
    "rms_gamma": 1 + f32(D, scale=0.1),
    "node_w": f32(LEAVES - 1, D, scale=D**-0.5), "node_b": f32(LEAVES - 1, scale=0.1),
    "w1": f32(LEAVES, D, WIDTH, scale=D**-0.5), "b1": f32(LEAVES, WIDTH, scale=0.1),
    "w2": f32(LEAVES, WIDTH, D, scale=WIDTH**-0.5), "b2": f32(LEAVES, D, scale=0.1),
}

with tempfile.TemporaryDirectory() as tmp:
    command = [options.fff_run, os.path.join(here, "pre_ln_block.mlir"), "-e", "pre_ln_block"]
    for name, value in inputs.items():
        np.save(os.path.join(tmp, name + ".npy"), value)
        command += ["--arg", os.path.join(tmp, name + ".npy")]
    command += ["--out", os.path.join(tmp, "y.npy")]
    subprocess.run(command, check=True)
    y = np.load(os.path.join(tmp, "y.npy"))

# The reference, in float64.
p = {k: v.astype(np.float64) for k, v in inputs.items()}
erf = np.vectorize(math.erf)
gelu = lambda v: 0.5 * v * (1 + erf(v / math.sqrt(2)))
x = p["x"]
ln = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-12) * p["ln_gamma"] + p["ln_beta"]
ffn = np.tile(p["b_out"], (len(x), 1))
node = np.zeros(len(x), dtype=int)
for _ in range(DEPTH + 1):
    logit = np.einsum("bd,bd->b", ln, p["w_in"][0, node]) + p["b_in"][0, node]
    ffn += gelu(logit)[:, None] * p["w_out"][0, node]
    node = 2 * node + 1 + (logit > 0)
h1 = x + ffn
rms = h1 / np.sqrt((h1 * h1).mean(1, keepdims=True) + 1e-6) * p["rms_gamma"]
node = np.zeros(len(x), dtype=int)
for _ in range(LEAF_DEPTH):
    node = 2 * node + 1 + (np.einsum("bd,bd->b", rms, p["node_w"][node]) + p["node_b"][node] >= 0)
leaf = node - (LEAVES - 1)
hidden = gelu(np.einsum("bd,bdw->bw", rms, p["w1"][leaf]) + p["b1"][leaf])
ref = h1 + np.einsum("bw,bwd->bd", hidden, p["w2"][leaf]) + p["b2"][leaf]

error = np.linalg.norm(y - ref) / np.linalg.norm(ref)
print(f"pre_ln_block on the CPU: {options.rows} rows x {D}, tree_ffn depth {DEPTH}, {LEAVES} leaves")
print(f"  fff-run   y[0, :4] = {np.array2string(y[0, :4], precision=5)}")
print(f"  numpy f64 y[0, :4] = {np.array2string(ref[0, :4].astype(np.float32), precision=5)}")
print(f"  relative error ||y - ref|| / ||ref|| = {error:.2e} (tolerance 1e-5)")
sys.exit(0 if error < 1e-5 else 1)

"""Shared by fff's Python tests: float64 references written from the ops'
definitions (docs/Dialect/FFFDialect.md), random data, and the emulator."""

import math
import os

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FFF_BUILD_DIR", os.path.join(ROOT, "build"))
EMULATOR = os.path.join(BUILD, "lib", "libfff_cuda_emulator.so")
# Without a GPU, target="cuda" runs on fff's PTX emulator. The runtime opens
# its driver once per process, so this is set before any test compiles.
if "FFF_CUDA_DRIVER" not in os.environ and os.path.exists(EMULATOR):
    os.environ["FFF_CUDA_DRIVER"] = EMULATOR

# ||actual - expected|| / ||expected|| for results in each type: f32
# arithmetic, plus one rounding to the output type.
TOLERANCE = {"f32": 2e-5, "f16": 1e-3, "bf16": 6e-3}

_erf = np.vectorize(math.erf)
ACTIVATIONS = {
    "gelu": lambda v: 0.5 * v * (1.0 + _erf(v / math.sqrt(2.0))),
    "relu": lambda v: np.maximum(v, 0.0),
    "silu": lambda v: v / (1.0 + np.exp(-v)),
    "identity": lambda v: v,
}


def relative_error(actual, expected):
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    return np.linalg.norm(actual - expected) / np.linalg.norm(expected)


def to_bf16_bits(values):
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def quantize(values, dtype):
    """(array to pass in numpy's storage type, the float64 values it holds)."""
    values = np.asarray(values, np.float32)
    if dtype == "f32":
        return values, values.astype(np.float64)
    if dtype == "f16":
        half = values.astype(np.float16)
        return half, half.astype(np.float64)
    bits = to_bf16_bits(values)
    return bits, from_bf16_bits(bits).astype(np.float64)


def dequantize(array, dtype):
    return from_bf16_bits(array).astype(np.float64) if dtype == "bf16" else np.asarray(array, np.float64)


def layer_norm(x, g, b, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)
    return (x - mean) * rstd * g + b, mean, rstd


def rms_norm(x, g, eps=1e-5):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * g


def tree_ffn(x, w_in, b_in, w_out, b_out, depth, activation="gelu"):
    act = ACTIVATIONS[activation]
    y = np.tile(b_out, (x.shape[0], 1)).astype(np.float64)
    for row in range(x.shape[0]):
        for tree in range(w_in.shape[0]):
            node = 0
            for _ in range(depth + 1):
                logit = x[row] @ w_in[tree, node] + b_in[tree, node]
                y[row] += act(logit) * w_out[tree, node]
                node = 2 * node + 1 + (1 if logit > 0 else 0)
    return y


def leaf_tree_ffn(x, node_w, node_b, w1, b1, w2, b2, depth, activation="relu"):
    act = ACTIVATIONS[activation]
    y = np.zeros((x.shape[0], w2.shape[2]))
    for row in range(x.shape[0]):
        node = 0
        for _ in range(depth):
            node = 2 * node + 1 + (1 if x[row] @ node_w[node] + node_b[node] >= 0 else 0)
        leaf = node - (2 ** depth - 1)
        y[row] = act(x[row] @ w1[leaf] + b1[leaf]) @ w2[leaf] + b2[leaf]
    return y


@pytest.fixture
def rng():
    return np.random.default_rng(2026)

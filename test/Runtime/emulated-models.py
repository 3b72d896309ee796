# Whole modules through --fff-gpu-pipeline, run on fff's PTX emulator from
# their AOT libraries (scripts/fff-aot.sh), with the emulator's memory,
# race and barrier checks:
#
#   - transformers' BERT layer, GPT-2 block with ln_f, LLaMA decoder layer,
#     T5 LayerNorm and Gemma RMSNorm in f32 and bf16, as torch-mlir exports
#     them (test/Frontends/Inputs/transformers, weights baked in as
#     constants), at two batch sizes, against torch's eager outputs saved
#     beside them: f32 within 1e-5, bf16 within 1e-2 (relative, whole
#     output);
#   - torch-mlir's pre-LN block (test/Frontends/Inputs/torch_mlir), and
#     examples/pre_ln_block.mlir (norms, a tree_ffn, a leaf_tree_ffn,
#     residual adds), against fff-run's CPU pipeline on the same inputs.
#
# Each library is called twice, so that the weights' device copies, made on
# the first call, are reused by the second.
#
# REQUIRES: numpy
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %emulator %fff_src_root %t | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed
# CHECK: kernels run: {{.*}}fused_layer_norm_f32_64_warp_per_row{{.*}}fused_layer_norm_tree_ffn_f32_768x768_depth11_latency{{.*}}fused_rms_norm_leaf_tree_ffn_f32_768x768_depth3_latency{{.*}}generic_f32_tiled_64x64x16

import os
import re
import sys

import numpy as np

emulator, root, work = sys.argv[1:]
os.environ["FFF_CUDA_DRIVER"] = emulator
stats = os.path.join(work, "launches.jsonl")
os.environ["FFF_EMU_STATS"] = stats

import emulated  # noqa: E402
from fffcheck import Checker, dequantize, run  # noqa: E402

device = emulated.Device(emulator)
aot = os.path.join(root, "scripts", "fff-aot.sh")
check = Checker()
rng = np.random.default_rng(5)


def as_float(array):
    return dequantize(array, "bf16") if array.dtype == np.uint16 else array.astype(np.float64)


def library(path, name):
    with open(path) as f:
        return emulated.build(aot, work, name, [f.read()])


# Exports with torch's outputs.
exports = os.path.join(root, "test", "Frontends", "Inputs", "transformers")
for name in ("bert_layer", "gpt2_block_ln_f", "llama_decoder_layer", "t5_layer_norm",
             "gemma_rms_norm_f32", "gemma_rms_norm_bf16"):
    lib = library(os.path.join(exports, f"{name}.mlir"), name)
    data = np.load(os.path.join(exports, f"{name}.npz"))
    tolerance = 1e-2 if data["y"].dtype == np.uint16 else 1e-5
    for x, y in (("x", "y"), ("x_other", "y_other")):
        out = emulated.call(device, lib, name, [data[x]], [(data[y].shape, data[y].dtype)])
        if isinstance(out, str):
            check.equal(f"{name} {list(data[x].shape)}: error", out, None)
            continue
        check.close(f"{name} {list(data[x].shape)} on the GPU (emulated) vs torch", as_float(out[0]),
                    as_float(data[y]), tolerance)


def against_cpu(path, library_name, function, args, result_shape, label):
    """The GPU library's result against fff-run's (the CPU pipeline's)."""
    with open(path) as f:
        text = f.read()
    lib = emulated.build(aot, work, library_name, [text])
    expected = run(text, function, args, 1)[0]
    for attempt in ("first call", "second call"):
        out = emulated.call(device, lib, function, args, [(result_shape, np.float32)])
        if isinstance(out, str):
            check.equal(f"{label} ({attempt}): error", out, None)
            continue
        check.close(f"{label} ({attempt}) on the GPU (emulated) vs the CPU pipeline", out[0], expected, 1e-5)


x64 = rng.standard_normal((6, 64)).astype(np.float32)
against_cpu(os.path.join(root, "test", "Frontends", "Inputs", "torch_mlir", "pre_ln_block.mlir"),
            "torch_mlir_block", "pre_ln_block", [x64], (6, 64), "torch-mlir pre-LN block [6, 64]")

D, DEPTH, LEAF_DEPTH, WIDTH = 768, 11, 3, 32
N, LEAVES = 2 ** (DEPTH + 1) - 1, 2 ** LEAF_DEPTH


def normal(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


rows = 5
block_args = [normal(rows, D), 1 + normal(D, scale=0.1), normal(D, scale=0.1),
              normal(1, N, D, scale=D ** -0.5), normal(1, N, scale=0.1),
              normal(1, N, D, scale=(DEPTH + 1) ** -0.5), normal(D, scale=0.1), 1 + normal(D, scale=0.1),
              normal(LEAVES - 1, D, scale=D ** -0.5), normal(LEAVES - 1, scale=0.1),
              normal(LEAVES, D, WIDTH, scale=D ** -0.5), normal(LEAVES, WIDTH, scale=0.1),
              normal(LEAVES, WIDTH, D, scale=WIDTH ** -0.5), normal(LEAVES, D, scale=0.1)]
against_cpu(os.path.join(root, "examples", "pre_ln_block.mlir"), "example_block", "pre_ln_block",
            block_args, (rows, D),
            f"examples/pre_ln_block.mlir [{rows}, {D}]")

check.finish()
kinds = sorted({re.sub(r"_[0-9]+$", "", kernel) for kernel in emulated.launches(stats)})
print("kernels run:", ", ".join(kinds))

# Transformer FFN sublayers, norm -> tree layer -> residual add, each
# compiled into one fused kernel (SublayerToGPU.cpp) and checked against
# float64 numpy that rounds where the unfused ops store (storage-type
# results of the norm, the tree layer and each add):
#
#   - on fff's PTX emulator, from AOT libraries: every call launches exactly
#     one kernel, the fused one; latency kernels (batches 1, 7, 0) and
#     throughput kernels (batches 5, 19), so tails of 4- and 8-token blocks;
#   - through the kernels' CPU twins (`fff-run --gpu-twin`).
#
# Forms: pre-LN h + tree(norm(h)), with and without the residual add that
# makes h (two results), and without a residual (Din != Dout); post-LN
# norm(h + tree(h)), with h computed in the unit; LayerNorm and RMSNorm,
# tree_ffn and leaf_tree_ffn, f32, f16 and bf16, and rows wide enough that
# a block holds fewer tokens.
#
# REQUIRES: numpy
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %emulator %fff_src_root/scripts/fff-aot.sh %t | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed
# CHECK: fused kernels run: {{.*}}fused_layer_norm_tree_ffn{{.*}}fused_leaf_tree_ffn_layer_norm{{.*}}fused_leaf_tree_ffn_rms_norm{{.*}}fused_rms_norm_leaf_tree_ffn{{.*}}fused_rms_norm_tree_ffn{{.*}}fused_tree_ffn_layer_norm
# CHECK: variants run: latency, throughput

import os
import re
import subprocess
import sys

import numpy as np

import emulated
from fffcheck import FFF_OPT, TOLERANCE, Checker, dequantize, run
from sublayers import Sublayer as Case

emulator, aot, work = sys.argv[1:]
os.environ["FFF_CUDA_DRIVER"] = emulator
stats = os.path.join(work, "launches.jsonl")
os.environ["FFF_EMU_STATS"] = stats
device = emulated.Device(emulator)
rng = np.random.default_rng(2026)
check = Checker()


CASES = [
    Case("pre_ln_tree_f32", "f32", "pre", "layer_norm", "tree", 64, 64, 3),
    Case("pre_rms_leaf_bf16", "bf16", "pre", "rms_norm", "leaf", 96, 96, 2, width=16, activation="relu"),
    Case("pre_ln_prologue_f32", "f32", "pre_prologue", "layer_norm", "tree", 128, 128, 4, trees=2,
         activation="silu"),
    Case("pre_rms_plain_f16", "f16", "pre_plain", "rms_norm", "tree", 96, 40, 2, activation="gelu_tanh"),
    Case("post_ln_tree_bf16", "bf16", "post", "layer_norm", "tree", 64, 64, 4, trees=2),
    Case("post_rms_leaf_f32", "f32", "post", "rms_norm", "leaf", 48, 48, 2, width=8),
    Case("post_ln_computed_leaf_f16", "f16", "post_computed", "layer_norm", "leaf", 64, 64, 1, width=32),
    # (2048 + 2048) f32 rows a token: two tokens a block fit, not four.
    Case("pre_rms_wide_f32", "f32", "pre", "rms_norm", "tree", 2048, 2048, 1),
]

source = "\n".join(case.mlir() for case in CASES)
# Every case is one unit, and every unit gets its fused kernel.
gpu_ir = subprocess.run([FFF_OPT, "--fff-fuse-norms", "--convert-fff-to-gpu", "-"], input=source,
                        capture_output=True, text=True, check=True)
assert "runs as separate kernels" not in gpu_ir.stderr, gpu_ir.stderr
wide = re.search(r"gpu.func @fused_rms_norm_tree_ffn_f32_2048x2048_depth1_latency.*tokens_per_block = (\d+)",
                 gpu_ir.stdout)
check.equal("tokens a block of the wide kernel holds", wide and wide.group(1), "2")


def launches():
    return emulated.launches(stats)


def run_on_emulator(lib, variant, batches):
    for case in CASES:
        for batch in batches:
            values = case.inputs(rng, batch)
            arrays = [values[name][0] for name, _ in case.arguments()]
            before = len(launches())
            out = emulated.call(device, lib, case.name, arrays, case.result_shapes(batch))
            label = f"{case.name} {variant} batch {batch}"
            if isinstance(out, str):
                check.failures.append(f"{label}: {out}")
                continue
            ran = launches()[before:]
            fused = [k for k in ran if k.startswith("fused_") and k.endswith(variant)]
            check.equal(f"{label} launches one fused kernel", (len(ran), len(fused)), (1, 1) if batch else (0, 0))
            if not batch:
                continue
            for i, (actual, expected) in enumerate(zip(out, case.reference(values))):
                check.close(f"{label} result {i}", dequantize(actual, case.dtype), expected, TOLERANCE[case.dtype])


run_on_emulator(emulated.build(aot, work, "sublayers", [source]), "latency", (1, 7, 0))
run_on_emulator(emulated.build(aot, work, "sublayers_throughput", [source], "tree-variant=throughput"),
                "throughput", (5, 19))

# The CPU twins of the (latency) kernels.
for case in CASES:
    values = case.inputs(rng, 7)
    out = run(case.mlir(), case.name, [values[name][0] for name, _ in case.arguments()], len(case.result_shapes(7)),
              extra_flags=["--gpu-twin"])
    for i, (actual, expected) in enumerate(zip(out, case.reference(values))):
        check.close(f"{case.name} twin result {i}", dequantize(actual, case.dtype), expected, TOLERANCE[case.dtype])

check.finish()
kernels = sorted({k for k in launches() if k.startswith("fused_")})
print("fused kernels run:", ", ".join(kernels))
print("variants run:", ", ".join(sorted({k.rsplit("_", 1)[1] for k in kernels})))

# Real model code: transformers' BERT layer (post-LN), GPT-2 block with its
# final ln_f, LLaMA decoder layer, T5's LayerNorm and Gemma's RMSNorm in f32
# and bf16, exported by torch-mlir (Inputs/transformers/export.py), run
# through --fff-cpu-pipeline by fff-run as exported, raised, and raised and
# fused, at the export's batch and at another (the batch, and where it is
# dynamic the sequence, are dynamic dims), against torch's eager outputs
# saved beside the IR. Needs no torch.
#
# Tolerances (relative, over the whole output): f32 1e-5; bf16 1e-2, since
# the raised and fused forms round once where torch rounds more often.
#
# REQUIRES: numpy
# RUN: %python %s %S/Inputs/transformers fff-opt | FileCheck %s
# CHECK: all 48 checks passed

import os
import subprocess
import sys

import numpy as np

from fffcheck import Checker, dequantize, run

inputs, fff_opt = sys.argv[1:]
check = Checker()
TOLERANCE = {np.float32: 1e-5, np.uint16: 1e-2}

# name: the norms the raising must find (fff ops after --fff-raise-norms)
# and the fused units it must form.
EXPORTS = {
    "bert_layer": (2, 2),
    "gpt2_block_ln_f": (3, 2),
    "llama_decoder_layer": (2, 1),
    "t5_layer_norm": (1, 0),
    "gemma_rms_norm_f32": (1, 0),
    "gemma_rms_norm_bf16": (1, 1),
}


def transformed(mlir, passes):
    return subprocess.run([fff_opt, *passes, "-"], input=mlir, capture_output=True, text=True,
                          check=True).stdout


def count_norms(mlir):
    return mlir.count("fff.layer_norm ") + mlir.count("fff.rms_norm ")


def as_float(array):
    return dequantize(array, "bf16") if array.dtype == np.uint16 else array.astype(np.float64)


for name, (norms, units) in EXPORTS.items():
    with open(os.path.join(inputs, f"{name}.mlir")) as f:
        exported = f.read()
    raised = transformed(exported, ["--fff-raise-norms"])
    fused = transformed(raised, ["--fff-fuse-norms"])
    check.equal(f"{name}: norms raised", count_norms(raised), norms)
    check.equal(f"{name}: fused units", fused.count("fff.fusion "), units)
    data = np.load(os.path.join(inputs, f"{name}.npz"))
    for form, text, flags in [("exported", exported, ["--no-raise"]), ("raised", raised, ["--no-raise"]),
                              ("raised+fused", fused, [])]:
        for x, y in [("x", "y"), ("x_other", "y_other")]:
            actual = run(text, name, [data[x]], 1, extra_flags=flags)[0]
            check.close(f"{name} {form} {list(data[x].shape)}", as_float(actual), as_float(data[y]),
                        TOLERANCE[data[y].dtype.type])

check.finish()

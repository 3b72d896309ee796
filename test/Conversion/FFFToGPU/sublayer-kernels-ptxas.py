# Static checks of fused sublayer kernels (norm -> tree layer -> residual
# in one kernel) at the widths of real models: BERT-base and -large (768,
# 1024), GPT-2 medium (1024) and LLaMA-7B (4096, bf16); pre-LN and post-LN,
# LayerNorm and RMSNorm, tree_ffn and leaf_tree_ffn, f32, f16 and bf16:
#   - every sublayer is one unit with a fused kernel, latency and throughput;
#   - ptxas accepts every kernel for sm_90, with no spills and no stack;
#   - the norm's sums use shfl.sync.bfly, the rows a warp shares in shared
#     memory are ordered by bar.warp.sync, and they move as 128-bit
#     ld/st.shared where the row width allows;
#   - no libdevice calls.
#
# REQUIRES: ptxas
# RUN: %python %s fff-opt fff-translate %ptxas | FileCheck %s
# CHECK: fused_tree_ffn_layer_norm_f32_768x768_depth11_latency {{.*}} no spills
# CHECK: fused_layer_norm_tree_ffn_f32_768x768_depth11_latency {{.*}} no spills
# CHECK: fused_rms_norm_tree_ffn_bf16_4096x4096_depth15_throughput {{.*}} no spills
# CHECK: all {{[0-9]+}} checks passed

import re
import sys

from ptxcheck import Checks, compile_and_assemble, resource_line, spills
from sublayers import Sublayer

fff_opt, fff_translate, ptxas = sys.argv[1:]
BYTES = {"f32": 4, "f16": 2, "bf16": 2}

layers = []
for dtype in ("f32", "bf16"):
    layers += [
        Sublayer("bert_base", dtype, "post", "layer_norm", "tree", 768, 768, 11),
        Sublayer("bert_large", dtype, "post_computed", "layer_norm", "tree", 1024, 1024, 11),
        Sublayer("pre_ln_768", dtype, "pre", "layer_norm", "tree", 768, 768, 11),
        Sublayer("gpt2_medium", dtype, "pre_prologue", "layer_norm", "leaf", 1024, 1024, 4, width=32),
        Sublayer("rms_leaf", dtype, "pre", "rms_norm", "leaf", 768, 768, 3, width=64),
    ]
layers += [
    Sublayer("llama", "bf16", "pre", "rms_norm", "tree", 4096, 4096, 15),
    Sublayer("llama_prologue", "bf16", "pre_prologue", "rms_norm", "tree", 4096, 4096, 11),
    Sublayer("f16_plain", "f16", "pre_plain", "rms_norm", "tree", 1024, 4096, 11),
]
for i, layer in enumerate(layers):
    layer.name = f"{layer.name}_{layer.dtype}_{i}"

ptx, accepted, info, bodies, resources = compile_and_assemble(fff_opt, fff_translate, ptxas,
                                                              "\n".join(layer.mlir() for layer in layers))
checks = Checks()
check = checks.check
check(accepted, f"ptxas rejected the module:\n{info}")
check(ptx.count(".entry") == 2 * len(layers), f"{ptx.count('.entry')} .entry for {len(layers)} sublayers")
check("__nv_" not in ptx, "a libdevice call in the PTX")

seen = set()
for layer in layers:
    tree = "tree_ffn" if layer.tree == "tree" else "leaf_tree_ffn"
    ops = f"{layer.norm}_{tree}" if layer.form.startswith("pre") else f"{tree}_{layer.norm}"
    prefix = f"fused_{ops}_{layer.dtype}_{layer.din}x{layer.dout}_depth{layer.depth}_"
    for variant in ("latency", "throughput"):
        names = sorted(n for n in bodies if n.startswith(prefix + variant) and n not in seen)
        check(len(names) >= 1, f"{layer.name}: no kernel {prefix}{variant}")
        if not names:
            continue
        name = names[0]
        seen.add(name)
        kernel, report = bodies[name], resources.get(name, "")
        check("shfl.sync.bfly" in kernel, f"{name}: no shfl.sync.bfly")
        check("bar.warp.sync" in kernel, f"{name}: no bar.warp.sync")
        if layer.din * BYTES[layer.dtype] % 16 == 0:
            check(re.search(r"st\.shared\.v4\.(b|f|u)32", kernel) is not None, f"{name}: no 128-bit st.shared")
            check(re.search(r"ld\.shared\.v4\.(b|f|u)32", kernel) is not None, f"{name}: no 128-bit ld.shared")
        spilled = spills(report)
        check(spilled == (0, 0, 0), f"{name}: spills or stack: {report}")
        print(resource_line(name, report))

checks.finish()

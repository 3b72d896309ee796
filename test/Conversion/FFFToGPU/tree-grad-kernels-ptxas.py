# Static checks of the PTX that --fff-gpu-pipeline generates for
# tree_ffn_grad, over f32/f16/bf16, widths 1 .. 4096 with tails and a
# dynamic width, depths 0 .. 20, several trees, every activation, with and
# without b_in and db_out:
#   - ptxas accepts every kernel for sm_90, with no spills and no stack
#     frame;
#   - each op is a walk, count, scan, scatter, chunk sums and node sums
#     kernel, and an
#     output-bias kernel where db_out is asked for (ops that differ only
#     in their activation share all but the walk);
#   - the walk reduces with shfl.sync.bfly and, where the widths allow
#     16-byte vectors, loads x, dy and the weight rows and stores dx with
#     128-bit accesses;
#   - no atomics, no libdevice calls.
#
# REQUIRES: ptxas
# RUN: %python %s fff-opt fff-translate %ptxas | FileCheck %s
# CHECK: tree_ffn_grad_bf16_768x768_depth11_walk {{.*}} no spills
# CHECK: tree_ffn_grad_bf16_768x768_depth11_chunk_sums {{.*}} no spills
# CHECK: all {{[0-9]+}} checks passed

import re
import sys

from fffcheck import tree_ffn_grad_function
from ptxcheck import Checks, compile_and_assemble, resource_line, spills

fff_opt, fff_translate, ptxas = sys.argv[1:]
BYTES = {"f32": 4, "f16": 2, "bf16": 2}
PHASES = ("walk", "count", "scan", "scatter", "chunk_sums", "node_sums")

functions, expected = [], []


def grad(dtype, din, dout, depth, trees=1, activation="gelu", in_bias=True, out_bias=True):
    text = tree_ffn_grad_function(dtype, None, din or 48, dout, trees, depth, activation, True, in_bias, out_bias,
                                  name=f"g{len(functions)}")
    if din is None:
        text = re.sub(r"tensor<\?x48x", "tensor<?x?x", text)
        text = re.sub(r"tensor<(\d+)x(\d+)x48x", r"tensor<\1x\2x?x", text)
    functions.append(text)
    prefix = f"tree_ffn_grad_{dtype}_{din or 'dynamic'}x{dout}_depth{depth}" + (f"_trees{trees}" if trees > 1 else "")
    expected.append((prefix, dtype, din, dout, out_bias))


for dtype in BYTES:
    for din, dout in ((768, 768), (1000, 333), (1024, 4096), (4096, 1024), (17, 33), (1, 5)):
        grad(dtype, din, dout, depth=11)
    grad(dtype, 768, 768, depth=0, in_bias=False)
    grad(dtype, 256, 256, depth=5, trees=3, out_bias=False)
    grad(dtype, 4, 8, depth=20)
    grad(dtype, None, 64, depth=4)
for activation in ("gelu_tanh", "relu", "silu", "identity"):
    grad("bf16", 512, 512, depth=7, activation=activation)

ptx, accepted, info, bodies, resources = compile_and_assemble(fff_opt, fff_translate, ptxas,
                                                              "\n".join(functions))
checks = Checks()
check = checks.check
check(accepted, f"ptxas rejected the module:\n{info}")
# A walk per op; the sort and sum kernels do not depend on the activation,
# so ops that differ only in it share them.
shared = {(prefix, phase) for prefix, *_, out_bias in expected
          for phase in PHASES[1:] + (("output_bias",) if out_bias else ())}
entries = len(expected) + len(shared)
check(ptx.count(".entry") == entries, f"{ptx.count('.entry')} .entry for {len(expected)} ops, expected {entries}")
check("__nv_" not in ptx, "a libdevice call in the PTX")
check(re.search(r"^\s*(atom|red)\.", ptx, re.M) is None, "an atomic in the PTX")

for prefix, dtype, din, dout, out_bias in expected:
    for phase in PHASES + (("output_bias",) if out_bias else ()):
        names = sorted(n for n in bodies if n.startswith(f"{prefix}_{phase}"))
        check(len(names) >= 1, f"{prefix}_{phase}: no kernel")
        if not names:
            continue
        name = names[0]
        kernel, report = bodies[name], resources.get(name, "")
        if phase == "walk":
            check("shfl.sync.bfly" in kernel, f"{name}: no shfl.sync.bfly")
            if din and din * BYTES[dtype] % 16 == 0:
                check(re.search(r"ld\.global(\.nc)?\.v4\.(b|f|u)32", kernel) is not None,
                      f"{name}: no 128-bit ld.global")
                check(re.search(r"st\.global\.v4\.(b|f|u)32", kernel) is not None, f"{name}: no 128-bit st.global")
        spilled = spills(report)
        check(spilled == (0, 0, 0), f"{name}: spills or stack: {report}")
        if phase in ("walk", "chunk_sums"):
            print(resource_line(name, report, width=62))

checks.finish()

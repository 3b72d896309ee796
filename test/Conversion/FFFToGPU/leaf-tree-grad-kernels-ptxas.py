# Static checks of the PTX that --fff-gpu-pipeline generates for
# leaf_tree_ffn_grad, over f32/f16/bf16, leaves of 1 to 64 units (the widest
# the kernels take), widths 1 .. 4096 with tails and dynamic widths, depths
# 1 .. 12, every activation:
#   - ptxas accepts every kernel for sm_90, with no spills and no stack
#     frame;
#   - each op is a walk, count, scan, scatter and sums kernel (ops that
#     differ only in their activation share all but the walk);
#   - the walk reduces with shfl.sync.bfly and, where the widths allow
#     16-byte vectors, loads x, dy and the weight rows with 128-bit
#     accesses;
#   - no atomics, no libdevice calls.
#
# REQUIRES: ptxas
# RUN: %python %s fff-opt fff-translate %ptxas | FileCheck %s
# CHECK: leaf_tree_ffn_grad_f32_1000x333_depth3_sums {{.*}} no spills
# CHECK: leaf_tree_ffn_grad_bf16_768x768_depth8_walk {{.*}} no spills
# CHECK: all {{[0-9]+}} checks passed

import re
import sys

from fffcheck import leaf_tree_ffn_grad_function
from ptxcheck import Checks, compile_and_assemble, resource_line, spills

fff_opt, fff_translate, ptxas = sys.argv[1:]
BYTES = {"f32": 4, "f16": 2, "bf16": 2}
PHASES = ("walk", "count", "scan", "scatter", "sums")

functions, expected = [], []


def grad(dtype, din, width, dout, depth, activation="gelu"):
    text = leaf_tree_ffn_grad_function(dtype, None, din or 48, width, dout, depth, activation, True,
                                       name=f"g{len(functions)}")
    if din is None:
        text = re.sub(rf"tensor<(\?|\d+)x48x{dtype}>", rf"tensor<\1x?x{dtype}>", text)
        text = re.sub(rf"tensor<(\d+)x48x{width}x", rf"tensor<\1x?x{width}x", text)
    functions.append(text)
    prefix = f"leaf_tree_ffn_grad_{dtype}_{din or 'dynamic'}x{dout}_depth{depth}"
    expected.append((prefix, dtype, din, dout, width))


for dtype in BYTES:
    grad(dtype, 768, 12, 768, depth=8)
    grad(dtype, 1000, 64, 333, depth=3)
    grad(dtype, 4096, 16, 1024, depth=10)
    grad(dtype, 1024, 48, 4096, depth=6)
    grad(dtype, 2048, 64, 4096, depth=5)
    grad(dtype, 4096, 32, 4096, depth=7)
    grad(dtype, 17, 33, 5, depth=1)
    grad(dtype, 1, 1, 1, depth=12)
    grad(dtype, None, 8, 64, depth=4)
for activation in ("gelu_tanh", "relu", "silu", "identity"):
    grad("bf16", 768, 12, 768, depth=8, activation=activation)

ptx, accepted, info, bodies, resources = compile_and_assemble(fff_opt, fff_translate, ptxas,
                                                              "\n".join(functions))
checks = Checks()
check = checks.check
check(accepted, f"ptxas rejected the module:\n{info}")
# A walk per op; the sort and sum kernels do not depend on the activation,
# so ops that differ only in it share them.
shared = {(prefix, phase) for prefix, *_ in expected for phase in PHASES[1:]}
entries = len(expected) + len(shared)
check(ptx.count(".entry") == entries, f"{ptx.count('.entry')} .entry for {len(expected)} ops, expected {entries}")
check("__nv_" not in ptx, "a libdevice call in the PTX")
check(re.search(r"^\s*(atom|red)\.", ptx, re.M) is None, "an atomic in the PTX")

for prefix, dtype, din, dout, width in expected:
    for phase in PHASES:
        names = sorted(n for n in bodies if n.startswith(f"{prefix}_{phase}"))
        check(len(names) >= 1, f"{prefix}_{phase}: no kernel")
        if not names:
            continue
        name = names[0]
        kernel, report = bodies[name], resources.get(name, "")
        if phase == "walk":
            check("shfl.sync.bfly" in kernel, f"{name}: no shfl.sync.bfly")
            if din and din * BYTES[dtype] % 16 == 0 and dout * BYTES[dtype] % 16 == 0:
                check(re.search(r"ld\.global(\.nc)?\.v4\.(b|f|u)32", kernel) is not None,
                      f"{name}: no 128-bit ld.global")
        spilled = spills(report)
        check(spilled == (0, 0, 0), f"{name}: spills or stack: {report}")
        if phase in ("walk", "sums"):
            print(resource_line(name, report, width=62))

checks.finish()

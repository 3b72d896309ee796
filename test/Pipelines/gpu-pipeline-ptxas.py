# Static checks of the PTX that --fff-gpu-pipeline generates for the norms,
# over hidden sizes 1 .. 32768 in f32, f16 and bf16:
#   - ptxas accepts every kernel for sm_90;
#   - one .entry per norm;
#   - every kernel reduces with shfl.sync.bfly;
#   - rows whose size allows 16-byte vectors use 128-bit ld.global / st.global;
#   - no spills and no stack frame for hidden <= 16384 in 16-bit types and
#     <= 8192 in f32 (register-resident rows);
#   - the mixed-precision layer norm the torch backend trains (bf16 rows
#     widened for f32 parameters, y narrowed, mean and rstd saved) is one
#     fused kernel, under the same limits as f32. Its strategy is f32's, so
#     its bf16 rows move in 64-bit accesses, not 128-bit ones.
#
# REQUIRES: ptxas
# RUN: %python %s fff-opt fff-translate %ptxas | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import re
import sys

from ptxcheck import Checks, compile_and_assemble, registers, spills

fff_opt, fff_translate, ptxas = sys.argv[1:]
HIDDEN = (1, 3, 127, 768, 1000, 1024, 4096, 8192, 16384, 32768)
DTYPES = {"f32": 4, "f16": 2, "bf16": 2}

functions, expected = [], []
for dtype in DTYPES:
    for hidden in HIDDEN:
        t = f"tensor<?x{hidden}x{dtype}>"
        g = f"tensor<{hidden}x{dtype}>"
        name = f"{dtype}_{hidden}"
        functions.append(
            f"func.func @ln_{name}(%x: {t}, %g: {g}, %b: {g}) -> ({t}, tensor<?x1xf32>, tensor<?x1xf32>) {{\n"
            f"  %y, %m, %r = fff.layer_norm %x scale(%g : {g}) bias(%b : {g}) return_stats : {t}\n"
            f"  return %y, %m, %r : {t}, tensor<?x1xf32>, tensor<?x1xf32>\n}}\n"
            f"func.func @rms_{name}(%x: {t}, %g: {g}) -> {t} {{\n"
            f"  %y = fff.rms_norm %x scale(%g : {g}) : {t}\n  return %y : {t}\n}}\n")
        expected += [("layer_norm", dtype, hidden), ("rms_norm", dtype, hidden)]
# A dynamic row size takes the looped kernel.
functions.append("func.func @dynamic(%x: tensor<?x?xbf16>) -> tensor<?x?xbf16> {\n"
                 "  %y = fff.layer_norm %x : tensor<?x?xbf16>\n  return %y : tensor<?x?xbf16>\n}\n")
expected.append(("layer_norm", "bf16", None))
for hidden in HIDDEN:
    t, w = f"tensor<?x{hidden}xbf16>", f"tensor<?x{hidden}xf32>"
    g, s = f"tensor<{hidden}xf32>", "tensor<?x1xf32>"
    functions.append(
        f"func.func @mixed_ln_{hidden}(%x: {t}, %g: {g}, %b: {g}) -> ({t}, {s}, {s}) {{\n"
        f"  %xw = arith.extf %x : {t} to {w}\n"
        f"  %yw, %m, %r = fff.layer_norm %xw scale(%g : {g}) bias(%b : {g}) return_stats : {w}\n"
        f"  %y = arith.truncf %yw : {w} to {t}\n  return %y, %m, %r : {t}, {s}, {s}\n}}\n")
    expected.append(("fused_layer_norm", "f32", hidden))

ptx, accepted, info, bodies, resources = compile_and_assemble(fff_opt, fff_translate, ptxas,
                                                              "\n".join(functions))
checks = Checks()
check = checks.check
check(accepted, f"ptxas rejected the module:\n{info}")
check(ptx.count(".entry") == len(expected), f"{ptx.count('.entry')} .entry for {len(expected)} norms")

for op, dtype, hidden in expected:
    prefix = f"{op}_{dtype}_{hidden if hidden else 'dynamic'}_"
    names = [n for n in bodies if n.startswith(prefix)]
    check(len(names) == 1, f"{prefix}*: {len(names)} kernels")
    if len(names) != 1:
        continue
    name, kernel, report = names[0], bodies[names[0]], resources.get(names[0], "")
    check("shfl.sync.bfly" in kernel, f"{name}: no shfl.sync.bfly")
    if hidden and hidden * DTYPES[dtype] % 16 == 0 and not op.startswith("fused_"):
        check(re.search(r"ld\.global(\.nc)?\.v4\.(b|f|u)32", kernel) is not None, f"{name}: no 128-bit ld.global")
        check(re.search(r"st\.global\.v4\.(b|f|u)32", kernel) is not None, f"{name}: no 128-bit st.global")
    spilled = spills(report)
    check(spilled is not None, f"{name}: no resource report")
    register_resident = hidden is not None and hidden <= (8192 if dtype == "f32" else 16384)
    if register_resident:
        check(spilled == (0, 0, 0), f"{name}: spills or stack: {report}")
    print(f"{name:<40} {registers(report):>3} registers  {'no spills' if spilled == (0, 0, 0) else 'SPILLS'}")

checks.finish()

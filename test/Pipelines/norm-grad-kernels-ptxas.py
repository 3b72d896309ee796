# Static checks of the PTX --fff-gpu-pipeline generates for the norm
# backward ops, over row sizes 1 .. 16392 in f32, f16 and bf16 and a
# dynamic size, with every parameter gradient and with dx alone, and for
# their fused units (a dropout mask on dy and a residual add on dx in f32;
# LLaMA's bf16 RMSNorm between f32 gradients, dy cast down, dx cast up;
# mixed-precision norms, bf16 rows widened for f32 parameters):
#   - ptxas accepts every kernel for sm_90, with no spills and no stack
#     frame;
#   - each op is one dx-and-partials kernel and, where a parameter gradient
#     is used, one column-sum kernel;
#   - the row sums use shfl.sync.bfly; rows whose size allows 16-byte
#     vectors load and store dy, x and dx with 128-bit accesses;
#   - no atomics, no libdevice calls.
#
# REQUIRES: ptxas
# RUN: %python %s fff-opt fff-translate %ptxas | FileCheck %s
# CHECK: fused_layer_norm_grad_f32_4096_block_per_row {{.*}} no spills
# CHECK: fused_rms_norm_grad_bf16_16392_looped {{.*}} no spills
# CHECK: layer_norm_grad_bf16_768_block_per_row {{.*}} no spills
# CHECK: rms_norm_grad_f32_4096_block_per_row {{.*}} no spills
# CHECK: all {{[0-9]+}} checks passed

import re
import sys

from ptxcheck import Checks, compile_and_assemble, registers, spills

fff_opt, fff_translate, ptxas = sys.argv[1:]
HIDDEN = (1, 3, 127, 768, 1000, 1024, 4096, 8192, 12288, 16384, 16392, None)
DTYPES = {"f32": 4, "f16": 2, "bf16": 2}

functions, expected = [], []
for dtype in DTYPES:
    for hidden in HIDDEN:
        t = f"tensor<?x{hidden or '?'}x{dtype}>"
        p = f"tensor<{hidden or '?'}x{dtype}>"
        s = "tensor<?x1xf32>"
        name = f"{dtype}_{hidden or 'dynamic'}"
        functions.append(
            f"func.func @ln_{name}(%dy: {t}, %x: {t}, %m: {s}, %r: {s}, %g: {p}) -> ({t}, {p}, {p}) {{\n"
            f"  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : {p}) bias_grad : {t}, {s}\n"
            f"  return %dx, %dg, %db : {t}, {p}, {p}\n}}\n"
            f"func.func @rms_{name}(%dy: {t}, %x: {t}, %g: {p}) -> ({t}, {p}) {{\n"
            f"  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : {p}) : {t}\n  return %dx, %dg : {t}, {p}\n}}\n"
            f"func.func @rmsdx_{name}(%dy: {t}, %x: {t}, %r: {s}) -> {t} {{\n"
            f"  %dx = fff.rms_norm_grad %dy, %x rstd(%r : {s}) : {t}\n  return %dx : {t}\n}}\n")
        expected += [("layer_norm_grad", dtype, hidden, True), ("rms_norm_grad", dtype, hidden, True),
                     ("rms_norm_grad", dtype, hidden, False)]

for hidden in HIDDEN:
    f, b = f"tensor<?x{hidden or '?'}xf32>", f"tensor<?x{hidden or '?'}xbf16>"
    pf, pb = f"tensor<{hidden or '?'}xf32>", f"tensor<{hidden or '?'}xbf16>"
    s = "tensor<?x1xf32>"
    name = hidden or "dynamic"
    functions.append(
        f"func.func @fused_ln_{name}(%grad: {f}, %mask: {f}, %x: {f}, %m: {s}, %r: {s}, %g: {pf}, %dres: {f})"
        f" -> ({f}, {pf}, {pf}) {{\n"
        f"  %dy = arith.mulf %grad, %mask : {f}\n"
        f"  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : {pf}) bias_grad : {f}, {s}\n"
        f"  %dh = arith.addf %dres, %dx : {f}\n"
        f"  return %dh, %dg, %db : {f}, {pf}, {pf}\n}}\n"
        f"func.func @fused_rms_{name}(%grad: {f}, %x: {b}, %g: {pb}, %dres: {f}) -> ({f}, {pb}) {{\n"
        f"  %dy = arith.truncf %grad : {f} to {b}\n"
        f"  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : {pb}) : {b}\n"
        f"  %wide = arith.extf %dx : {b} to {f}\n"
        f"  %dh = arith.addf %wide, %dres : {f}\n"
        f"  return %dh, %dg : {f}, {pb}\n}}\n"
        f"func.func @mixed_ln_{name}(%dy: {b}, %x: {b}, %m: {s}, %r: {s}, %g: {pf}, %dres: {b})"
        f" -> ({b}, {pf}, {pf}) {{\n"
        f"  %dyw = arith.extf %dy : {b} to {f}\n  %xw = arith.extf %x : {b} to {f}\n"
        f"  %dx, %dg, %db = fff.layer_norm_grad %dyw, %xw, %m, %r scale(%g : {pf}) bias_grad : {f}, {s}\n"
        f"  %dxn = arith.truncf %dx : {f} to {b}\n  %dh = arith.addf %dres, %dxn : {b}\n"
        f"  return %dh, %dg, %db : {b}, {pf}, {pf}\n}}\n"
        f"func.func @mixed_rms_{name}(%dy: {b}, %x: {b}, %g: {pf}) -> ({b}, {pf}) {{\n"
        f"  %dyw = arith.extf %dy : {b} to {f}\n  %xw = arith.extf %x : {b} to {f}\n"
        f"  %dx, %dg = fff.rms_norm_grad %dyw, %xw scale(%g : {pf}) : {f}\n"
        f"  %dxn = arith.truncf %dx : {f} to {b}\n"
        f"  return %dxn, %dg : {b}, {pf}\n}}\n")
    expected += [("fused_layer_norm_grad", "f32", hidden, True), ("fused_rms_norm_grad", "bf16", hidden, True),
                 ("fused_layer_norm_grad", "f32", hidden, True), ("fused_rms_norm_grad", "f32", hidden, True)]

ptx, accepted, info, bodies, resources = compile_and_assemble(fff_opt, fff_translate, ptxas,
                                                              "\n".join(functions))
checks = Checks()
check = checks.check
check(accepted, f"ptxas rejected the module:\n{info}")
# Column sums depend only on the type and size: a fused unit's are those of
# the unfused op of its size (the kernel module holds one of each).
column_sums = {f"{op.removeprefix('fused_')}_{dtype}_{hidden or 'dynamic'}_column_sums"
               for op, dtype, hidden, params in expected if params}
check(sum(1 for name in bodies if name.startswith("fused_")) == len(HIDDEN) * 4,
      "not every fused unit is one fused kernel")
check(sum(1 for name in bodies if "column_sums" not in name) == len(expected),
      f"{len(bodies)} kernels for {len(expected)} ops")
check(column_sums <= set(bodies), f"no column sums kernel for {sorted(column_sums - set(bodies))}")
check("__nv_" not in ptx, "a libdevice call in the PTX")
check(re.search(r"^\s*(atom|red)\.", ptx, re.M) is None, "an atomic in the PTX")

names = sorted(bodies)
for name in names:
    kernel, report = bodies[name], resources.get(name, "")
    spilled = spills(report)
    check(spilled == (0, 0, 0), f"{name}: spills or stack: {report}")
    if "column_sums" not in name:
        check("shfl.sync.bfly" in kernel, f"{name}: no shfl.sync.bfly")
        match = re.match(r"\w+_norm_grad_(\w+?)_(\d+)_", name)
        if match and int(match.group(2)) * DTYPES[match.group(1)] % 16 == 0:
            check(re.search(r"ld\.global(\.nc)?\.v4\.(b|f|u)32", kernel) is not None, f"{name}: no 128-bit ld.global")
            check(re.search(r"st\.global\.v4\.(b|f|u)32", kernel) is not None, f"{name}: no 128-bit st.global")
    print(f"{name:<48} {registers(report):>3} registers  {'no spills' if spilled == (0, 0, 0) else 'SPILLS'}")

checks.finish()

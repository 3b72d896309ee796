# Static checks of the PTX that --fff-gpu-pipeline generates for tree_ffn
# and leaf_tree_ffn, over f32/f16/bf16, widths 1 .. 8192 with tails, depths
# 0 .. 20, several trees, every activation, with and without biases:
#   - ptxas accepts every kernel for sm_90;
#   - two .entry per op: its latency and throughput kernels;
#   - each level reduces with shfl.sync.bfly;
#   - rows whose width allows 16-byte vectors use 128-bit ld.global and
#     st.global;
#   - no libdevice calls (activations are polynomial approximations);
#   - shared memory aligned for its 128-bit accesses;
#   - no spills and no stack frame for widths up to 4096.
#
# REQUIRES: ptxas
# RUN: %python %s fff-opt fff-translate %ptxas | FileCheck %s
# CHECK: tree_ffn_bf16_768x768_depth11_latency {{.*}} no spills
# CHECK: tree_ffn_bf16_768x768_depth11_throughput {{.*}} no spills
# CHECK: all {{[0-9]+}} checks passed

import re
import sys

from ptxcheck import Checks, compile_and_assemble, resource_line, spills

fff_opt, fff_translate, ptxas = sys.argv[1:]
BYTES = {"f32": 4, "f16": 2, "bf16": 2}
ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "silu", "identity")

functions, expected = [], []


def tree_ffn(dtype, din, dout, depth, trees=1, activation="gelu", biases=True):
    nodes = 2 ** (depth + 1) - 1
    din_s = "?" if din is None else din
    x, y = f"tensor<?x{din_s}x{dtype}>", f"tensor<?x{dout}x{dtype}>"
    wi, wo = f"tensor<{trees}x{nodes}x{din_s}x{dtype}>", f"tensor<{trees}x{nodes}x{dout}x{dtype}>"
    bi, bo = f"tensor<{trees}x{nodes}x{dtype}>", f"tensor<{dout}x{dtype}>"
    attrs = f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>}}"
    i = len(functions)
    if biases:
        functions.append(f"func.func @t{i}(%x: {x}, %wi: {wi}, %bi: {bi}, %wo: {wo}, %bo: {bo}) -> {y} {{\n"
                         f"  %y = fff.tree_ffn %x, %wi bias(%bi : {bi}), %wo bias(%bo : {bo}) {attrs} : {x}, {wi}, {wo}\n"
                         f"  return %y : {y}\n}}\n")
    else:
        functions.append(f"func.func @t{i}(%x: {x}, %wi: {wi}, %wo: {wo}) -> {y} {{\n"
                         f"  %y = fff.tree_ffn %x, %wi, %wo {attrs} : {x}, {wi}, {wo}\n  return %y : {y}\n}}\n")
    trees_part = f"_trees{trees}" if trees > 1 else ""
    expected.append((f"tree_ffn_{dtype}_{'dynamic' if din is None else din}x{dout}_depth{depth}{trees_part}_",
                     dtype, din, dout))


def leaf_tree_ffn(dtype, din, width, dout, depth, activation="relu"):
    leaves, nodes = 2 ** depth, 2 ** depth - 1
    x, y = f"tensor<?x{din}x{dtype}>", f"tensor<?x{dout}x{dtype}>"
    types = [f"tensor<{nodes}x{din}x{dtype}>", f"tensor<{nodes}x{dtype}>",
             f"tensor<{leaves}x{din}x{width}x{dtype}>", f"tensor<{leaves}x{width}x{dtype}>",
             f"tensor<{leaves}x{width}x{dout}x{dtype}>", f"tensor<{leaves}x{dout}x{dtype}>"]
    names = ["nw", "nb", "w1", "b1", "w2", "b2"]
    i = len(functions)
    args = ", ".join(f"%{n}: {t}" for n, t in zip(names, types))
    functions.append(f"func.func @l{i}(%x: {x}, {args}) -> {y} {{\n"
                     f"  %y = fff.leaf_tree_ffn %x, {', '.join('%' + n for n in names)} "
                     f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>}} : {x}, {', '.join(types)}\n"
                     f"  return %y : {y}\n}}\n")
    expected.append((f"leaf_tree_ffn_{dtype}_{din}x{dout}_depth{depth}_", dtype, din, dout))


for dtype in BYTES:
    for din, dout in ((768, 768), (1000, 333), (1024, 4096), (4096, 1024), (4096, 4096), (17, 33), (1, 5)):
        tree_ffn(dtype, din, dout, depth=11)
    tree_ffn(dtype, 4096, 4096, depth=15)
    tree_ffn(dtype, 4096, 4096, depth=20, biases=False)
    tree_ffn(dtype, 768, 768, depth=0)
    tree_ffn(dtype, 8192, 8192, depth=11)
    tree_ffn(dtype, 256, 256, depth=5, trees=3)
    tree_ffn(dtype, 4096, 4096, depth=3, trees=10)
    tree_ffn(dtype, None, 64, depth=4)
    leaf_tree_ffn(dtype, 768, 32, 768, depth=8)
    leaf_tree_ffn(dtype, 100, 3, 36, depth=3, activation="gelu")
for activation in ACTIVATIONS:
    tree_ffn("bf16", 512, 512, depth=7, activation=activation, biases=activation != "relu")

ptx, accepted, info, bodies, resources = compile_and_assemble(fff_opt, fff_translate, ptxas,
                                                              "\n".join(functions))
checks = Checks()
check = checks.check
check(accepted, f"ptxas rejected the module:\n{info}")
check(ptx.count(".entry") == 2 * len(expected), f"{ptx.count('.entry')} .entry for {len(expected)} ops")
check("__nv_" not in ptx, "a libdevice call in the PTX")
for alignment, name in re.findall(r"\.shared \.align (\d+) \.b8 (\w+)", ptx):
    check(int(alignment) >= 16, f"{name}: shared memory aligned to {alignment} bytes")

seen = set()
for prefix, dtype, din, dout in expected:
    for variant in ("latency", "throughput"):
        names = sorted(n for n in bodies if n.startswith(prefix + variant) and n not in seen)
        check(len(names) >= 1, f"{prefix}{variant}*: no kernel")
        if not names:
            continue
        name = names[0]
        seen.add(name)
        kernel, report = bodies[name], resources.get(name, "")
        check("shfl.sync.bfly" in kernel, f"{name}: no shfl.sync.bfly")
        if din and din * BYTES[dtype] % 16 == 0:
            check(re.search(r"ld\.global(\.nc)?\.v4\.(b|f|u)32", kernel) is not None, f"{name}: no 128-bit ld.global")
        if dout * BYTES[dtype] % 16 == 0:
            check(re.search(r"st\.global\.v4\.(b|f|u)32", kernel) is not None, f"{name}: no 128-bit st.global")
        spilled = spills(report)
        check(spilled is not None, f"{name}: no resource report")
        if max(din or 0, dout) <= 4096:
            check(spilled == (0, 0, 0), f"{name}: spills or stack: {report}")
        print(resource_line(name, report, width=62))

checks.finish()

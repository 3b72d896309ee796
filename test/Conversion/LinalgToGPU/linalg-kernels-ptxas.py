# Static checks of the PTX that --fff-gpu-pipeline generates for linalg
# work: contractions in f32, f16 and bf16 through each tile shape (64x64,
# 16x256 for few rows, 256x16 for few columns), a batch matmul, a Linear
# with two M dims and a transposed weight; and loop-nest kernels
# (pointwise with transcendental math, a softmax's reductions, a copy
# through a strided view). For every kernel:
#   - ptxas accepts it for sm_90, with no spills and no stack frame;
#   - no libdevice call (__nv_*);
# and for the contraction kernels, both operands are staged in shared
# memory as 32-bit values (st.shared, ld.shared) between bar.sync, the
# products are fma.rn in f32, and the register count is reported.
#
# REQUIRES: ptxas
# RUN: %python %s fff-opt fff-translate %ptxas | FileCheck %s
# CHECK: matmul_bf16_tiled_16x256x16: {{[0-9]+}} registers, no spills
# CHECK: matmul_f16_tiled_256x16x16: {{[0-9]+}} registers, no spills
# CHECK: matmul_f32_tiled_64x64x16: {{[0-9]+}} registers, no spills
# CHECK: all {{[0-9]+}} checks passed

import re
import sys

from ptxcheck import Checks, compile_and_assemble, registers, spills

fff_opt, fff_translate, ptxas = sys.argv[1:]


def tensor(shape, dtype):
    return f"tensor<{'x'.join('?' if d is None else str(d) for d in shape)}x{dtype}>"


def matmul(m, k, n, dtype):
    a, b, c = tensor((m, k), dtype), tensor((k, n), dtype), tensor((m, n), dtype)
    return (f"func.func @mm_{dtype}_{m}_{k}_{n}(%a: {a}, %b: {b}) -> {c} {{\n"
            f"  %zero = arith.constant 0.0 : {dtype}\n  %e = tensor.empty() : {c}\n"
            f"  %z = linalg.fill ins(%zero : {dtype}) outs(%e : {c}) -> {c}\n"
            f"  %r = linalg.matmul ins(%a, %b : {a}, {b}) outs(%z : {c}) -> {c}\n  return %r : {c}\n}}\n")


x_t, w_t, y_t = tensor((None, 8, 64), "f32"), tensor((48, 64), "f32"), tensor((None, 8, 48), "f32")
s_t, r_t = tensor((None, 77), "f32"), tensor((None, 1), "f32")
functions = [
    matmul(128, 256, 96, "f32"),
    matmul(8, 64, 300, "bf16"),
    matmul(300, 64, 8, "f16"),
    f"""func.func @bmm(%a: tensor<4x33x20xf32>, %b: tensor<4x20x17xf32>) -> tensor<4x33x17xf32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x33x17xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x33x17xf32>) -> tensor<4x33x17xf32>
  %r = linalg.batch_matmul ins(%a, %b : tensor<4x33x20xf32>, tensor<4x20x17xf32>) outs(%z : tensor<4x33x17xf32>) -> tensor<4x33x17xf32>
  return %r : tensor<4x33x17xf32>
}}
""",
    f"""func.func @linear(%x: {x_t}, %w: {w_t}, %y0: {y_t}) -> {y_t} {{
  %y = linalg.generic {{indexing_maps = [affine_map<(b, s, o, i) -> (b, s, i)>, affine_map<(b, s, o, i) -> (o, i)>, affine_map<(b, s, o, i) -> (b, s, o)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}} ins(%x, %w : {x_t}, {w_t}) outs(%y0 : {y_t}) {{
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %p = arith.mulf %a, %c : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }} -> {y_t}
  return %y : {y_t}
}}
""",
    f"""func.func @gelu_tanh(%x: {s_t}) -> {s_t} {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : {s_t}
  %e = tensor.empty(%n) : {s_t}
  %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x : {s_t}) outs(%e : {s_t}) {{
  ^bb0(%a: f32, %o: f32):
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %t = math.tanh %a : f32
    %u = arith.addf %t, %one : f32
    %v = arith.mulf %u, %half : f32
    %w = arith.mulf %v, %a : f32
    %s = math.sqrt %w : f32
    %r = math.powf %s, %half : f32
    linalg.yield %r : f32
  }} -> {s_t}
  return %y : {s_t}
}}
""",
    f"""func.func @row_max(%x: {s_t}) -> {r_t} {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : {s_t}
  %lowest = arith.constant -3.40282347E+38 : f32
  %e = tensor.empty(%n) : {r_t}
  %init = linalg.fill ins(%lowest : f32) outs(%e : {r_t}) -> {r_t}
  %m = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, 0)>], iterator_types = ["parallel", "reduction"]}} ins(%x : {s_t}) outs(%init : {r_t}) {{
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %a, %acc : f32
    linalg.yield %r : f32
  }} -> {r_t}
  return %m : {r_t}
}}
""",
    """func.func @strided(%a: tensor<9x12xf32>) -> tensor<4x5xf32> {
  %s = tensor.extract_slice %a[1, 2] [4, 5] [2, 2] : tensor<9x12xf32> to tensor<4x5xf32>
  %e = tensor.empty() : tensor<4x5xf32>
  %c = linalg.copy ins(%s : tensor<4x5xf32>) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %c : tensor<4x5xf32>
}
""",
]

checks = Checks()
ptx, ok, info, bodies, reports = compile_and_assemble(fff_opt, fff_translate, ptxas, "\n".join(functions))
checks.check(ok, f"ptxas rejected the module:\n{info}")
checks.check("__nv_" not in ptx, "a kernel calls libdevice")
contractions = [name for name in bodies if "_tiled_" in name]
checks.check(len(contractions) == 5, f"expected 5 contraction kernels, found {contractions}")
checks.check(any("thread_per_point" in name for name in bodies), "no loop-nest kernel")
for name, body in sorted(bodies.items()):
    report = reports.get(name, "")
    frame = spills(report)
    checks.check(frame == (0, 0, 0), f"{name}: stack frame and spills {frame}")
    if "_tiled_" not in name:
        continue
    checks.check("bar.sync" in body, f"{name}: no barrier between staging and use")
    checks.check(re.search(r"st\.shared\.(b|f)32", body) and re.search(r"ld\.shared\.(b|f)32", body),
                 f"{name}: operands not staged in shared memory as 32-bit values")
    checks.check(re.search(r"fma\.rn\.f32", body) is not None, f"{name}: no f32 fma")
    if frame == (0, 0, 0) and re.match(r"matmul_\w+_tiled_", name):
        print(f"{name}: {registers(report)} registers, no spills")
checks.finish()

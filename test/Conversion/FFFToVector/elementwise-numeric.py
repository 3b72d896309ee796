# Elementwise work through convert-elementwise-to-vector (--fff-cpu-pipeline
# and fff-run) on seeded random data: rows whose width leaves a tail after
# the last whole vector, dynamic and static shapes, broadcast inputs,
# 16-bit floats, integers, a cast, a GELU, and a tree layer's residual add.
# Exact arithmetic is compared bit for bit with numpy's, which rounds each
# f32 op as IEEE says, and with the scalar reference lowering; a GELU,
# whose erf is a polynomial in the fast path, is compared with float64
# within a tolerance. Every result must have the same bits at any vector
# width and thread count, and for an element in a row's tail as in a
# vector.
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import math

import numpy as np

from fffcheck import (Checker, from_bf16_bits, run, to_bf16_bits, tree_ffn_function, tree_ffn_paths)

rng = np.random.default_rng(20261201)
check = Checker()

# Vector widths and thread counts under which every result keeps its bits:
# elementwise work is computed per element, in one order.
SETTINGS = [("host", []), ("1 thread", ["--threads", "1"]), ("256-bit", ["--vector-bits", "256"]),
            ("128-bit", ["--vector-bits", "128"])]


def run_everywhere(name, mlir, args, num_results=1, compare_reference=True, settings=SETTINGS):
    """Results under every setting, equal bits to the first; and to the
    scalar reference lowering's where the math is exact."""
    first = run(mlir, "f", args, num_results)
    for setting, flags in settings:
        results = run(mlir, "f", args, num_results, extra_flags=flags)
        for k, (result, expected) in enumerate(zip(results, first)):
            check.equal(f"{name}: result {k} bitwise, {setting}", result, expected)
    if compare_reference:
        for k, (result, expected) in enumerate(zip(run(mlir, "f", args, num_results, ["--reference"]), first)):
            check.equal(f"{name}: result {k} bitwise, scalar reference", result, expected)
    return first


def f32(shape):
    return rng.standard_normal(shape).astype(np.float32)


# A residual add, rows of 1000 (a tail of 8 after 16-lane vectors), enough
# rows to thread; and rows of 5 (all tail).
for rows, width in ((300, 1000), (7, 5), (1, 1)):
    x, y = f32((rows, width)), f32((rows, width))
    mlir = (f"func.func @f(%x: tensor<?x{width}xf32>, %y: tensor<?x{width}xf32>) -> tensor<?x{width}xf32> {{\n"
            f"  %s = arith.addf %x, %y : tensor<?x{width}xf32>\n"
            f"  return %s : tensor<?x{width}xf32>\n}}\n")
    (s,) = run_everywhere(f"f32 add {rows}x{width}", mlir, [x, y])
    check.equal(f"f32 add {rows}x{width} against numpy", s, x + y)

# bf16 arithmetic as torch-mlir writes it (on bf16 itself): each op in f32,
# rounded once, as IEEE's bf16 add and multiply would.
x, y, z = (to_bf16_bits(f32((129, 768))) for _ in range(3))
mlir = ("func.func @f(%x: tensor<?x768xbf16>, %y: tensor<?x768xbf16>, %z: tensor<?x768xbf16>) -> tensor<?x768xbf16> {\n"
        "  %s = arith.addf %x, %y : tensor<?x768xbf16>\n"
        "  %p = arith.mulf %s, %z : tensor<?x768xbf16>\n"
        "  return %p : tensor<?x768xbf16>\n}\n")
(p,) = run_everywhere("bf16 add, multiply", mlir, [x, y, z])
s = from_bf16_bits(to_bf16_bits(from_bf16_bits(x) + from_bf16_bits(y)))
check.equal("bf16 add, multiply against numpy", p, to_bf16_bits(s * from_bf16_bits(z)))

# f16 times f16, widened to f32 (static shape, a tail of 3).
a, b = f32((64, 35)).astype(np.float16), f32((64, 35)).astype(np.float16)
mlir = ("func.func @f(%a: tensor<64x35xf16>, %b: tensor<64x35xf16>) -> tensor<64x35xf32> {\n"
        "  %p = arith.mulf %a, %b : tensor<64x35xf16>\n"
        "  %w = arith.extf %p : tensor<64x35xf16> to tensor<64x35xf32>\n"
        "  return %w : tensor<64x35xf32>\n}\n")
(w,) = run_everywhere("f16 multiply, widen", mlir, [a, b])
check.equal("f16 multiply, widen against numpy", w, (a * b).astype(np.float32))

# Broadcasts, as torch-mlir writes them: a bias along the row, a scale per
# row (a size-1 dim read at 0), rank 3 with both leading dims dynamic, an
# f32 and a bf16 input, a bf16 result; and the f32 sum as a second result.
BROADCAST = """
func.func @f(%x: tensor<?x?x100xf32>, %y: tensor<?x?x100xbf16>, %b: tensor<100xf32>, %s: tensor<?x?x1xf32>)
    -> (tensor<?x?x100xbf16>, tensor<?x?x100xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %x, %c0 : tensor<?x?x100xf32>
  %d1 = tensor.dim %x, %c1 : tensor<?x?x100xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x?x100xbf16>
  %e32 = tensor.empty(%d0, %d1) : tensor<?x?x100xf32>
  %r:2 = linalg.generic {
      indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>,
                       affine_map<(a, b, c) -> (c)>, affine_map<(a, b, c) -> (a, b, 0)>,
                       affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>],
      iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %y, %b, %s : tensor<?x?x100xf32>, tensor<?x?x100xbf16>, tensor<100xf32>, tensor<?x?x1xf32>)
      outs(%e, %e32 : tensor<?x?x100xbf16>, tensor<?x?x100xf32>) {
  ^bb0(%xv: f32, %yv: bf16, %bv: f32, %sv: f32, %o: bf16, %o32: f32):
    %w = arith.extf %yv : bf16 to f32
    %t = arith.addf %xv, %w : f32
    %u = arith.mulf %t, %sv : f32
    %v = arith.addf %u, %bv : f32
    %z = arith.truncf %v : f32 to bf16
    linalg.yield %z, %t : bf16, f32
  } -> (tensor<?x?x100xbf16>, tensor<?x?x100xf32>)
  return %r#0, %r#1 : tensor<?x?x100xbf16>, tensor<?x?x100xf32>
}
"""
x, y = f32((3, 70, 100)), to_bf16_bits(f32((3, 70, 100)))
bias, scale = f32(100), f32((3, 70, 1))
z, t = run_everywhere("broadcast bias and row scale", BROADCAST, [x, y, bias, scale], num_results=2)
sum_ = x + from_bf16_bits(y)
check.equal("broadcast: the f32 sum against numpy", t, sum_)
check.equal("broadcast: the bf16 result against numpy", z, to_bf16_bits(sum_ * scale + bias))

# Integers: i32 arithmetic that wraps, i8 widened, a float from an i64.
a32 = rng.integers(-2**31, 2**31, (50, 77), dtype=np.int32)
b32 = rng.integers(-2**31, 2**31, (50, 77), dtype=np.int32)
c8 = rng.integers(-128, 128, (50, 77), dtype=np.int8)
d64 = rng.integers(-2**40, 2**40, (50, 77), dtype=np.int64)
mlir = ("func.func @f(%a: tensor<?x77xi32>, %b: tensor<?x77xi32>, %c: tensor<?x77xi8>, %d: tensor<?x77xi64>)"
        " -> (tensor<?x77xi32>, tensor<?x77xf32>) {\n"
        "  %p = arith.muli %a, %b : tensor<?x77xi32>\n"
        "  %w = arith.extsi %c : tensor<?x77xi8> to tensor<?x77xi32>\n"
        "  %s = arith.addi %p, %w : tensor<?x77xi32>\n"
        "  %f = arith.sitofp %d : tensor<?x77xi64> to tensor<?x77xf32>\n"
        "  return %s, %f : tensor<?x77xi32>, tensor<?x77xf32>\n}\n")
s, f = run_everywhere("integers", mlir, [a32, b32, c8, d64], num_results=2)
with np.errstate(over="ignore"):
    check.equal("integers: i32 against numpy", s, a32 * b32 + c8.astype(np.int32))
check.equal("integers: i64 to f32 against numpy", f, d64.astype(np.float32))

# A GELU (erf, a polynomial in the fast path) after a bias add: close to
# float64; a row's tail elements (columns 96-99) have the same bits as the
# same values inside whole vectors (a flat row of all of them).
GELU = """
func.func @f(%x: tensor<{shape}xf32>) -> tensor<{shape}xf32> {{
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %root = arith.constant 0.70710678 : f32
  %c0 = arith.constant 0 : index
  {empty}
  %r = linalg.generic {{indexing_maps = [{map}, {map}], iterator_types = [{iterators}]}}
      ins(%x : tensor<{shape}xf32>) outs(%e : tensor<{shape}xf32>) {{
  ^bb0(%v: f32, %o: f32):
    %s = arith.mulf %v, %root : f32
    %erf = math.erf %s : f32
    %p = arith.addf %erf, %one : f32
    %h = arith.mulf %v, %half : f32
    %g = arith.mulf %h, %p : f32
    linalg.yield %g : f32
  }} -> tensor<{shape}xf32>
  return %r : tensor<{shape}xf32>
}}
"""
x = (f32((40, 100)) * 3).astype(np.float32)
rows = GELU.format(shape="?x100", map="affine_map<(a, b) -> (a, b)>", iterators='"parallel", "parallel"',
                   empty="%d0 = tensor.dim %x, %c0 : tensor<?x100xf32>\n  %e = tensor.empty(%d0) : tensor<?x100xf32>")
flat = GELU.format(shape="4000", map="affine_map<(a) -> (a)>", iterators='"parallel"',
                   empty="%e = tensor.empty() : tensor<4000xf32>")
(g,) = run_everywhere("GELU rows of 100", rows, [x], compare_reference=False)
erf = np.vectorize(math.erf, otypes=[np.float64])
x64 = x.astype(np.float64)
check.close("GELU rows of 100 against float64", g, 0.5 * x64 * (1 + erf(x64 / math.sqrt(2))), 1e-6)
(g_flat,) = run(flat, "f", [x.reshape(-1)], 1)
check.equal("GELU: tail elements as in whole vectors", g, g_flat.reshape(40, 100))

# A tree layer's residual add: the layer's own result plus x, exactly.
D, DEPTH = 96, 4
N = 2 ** (DEPTH + 1) - 1
x = f32((300, D))
w_in, b_in = f32((1, N, D)) / np.float32(math.sqrt(D)), f32((1, N)) * np.float32(0.1)
w_out, b_out = f32((1, N, D)) / np.float32(math.sqrt(DEPTH + 1)), f32(D)
tree = tree_ffn_function("f32", None, D, D, 1, DEPTH, "gelu", True, True, True)
(y,) = run(tree, "f", [x, w_in, b_in, w_out, b_out], 1)
ty = f"tensor<?x{D}xf32>"
block = tree.replace(f"  return %y : {ty}", f"  %r = arith.addf %x, %y : {ty}\n  return %r : {ty}")
assert block != tree
# (A tree layer sums in another order with narrower vectors.)
(r,) = run_everywhere("tree_ffn + residual", block, [x, w_in, b_in, w_out, b_out], compare_reference=False,
                      settings=SETTINGS[:2])
check.equal("tree_ffn + residual: the layer's result plus x", r, y + x)

check.finish()

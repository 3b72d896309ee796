# The kernels convert-linalg-to-gpu-kernels gives linalg work, run on fff's
# PTX emulator through AOT libraries, against float64 numpy on random data:
#
#   - contractions through the tiled kernel: sizes from 1 to past several
#     tiles with tails in every dim, the narrow tiles for few rows or
#     columns, batch matmuls, a weight read transposed, two M dims, f16 and
#     bf16 operands and results (f32 accumulation), and dynamic sizes;
#   - the loop-nest kernel: broadcasting pointwise work with a scalar
#     parameter, a softmax (max and sum reductions over odd rows), a column
#     sum (a leading-dim reduction), concatenation, padding and a strided
#     slice (copies into and out of views), and an op whose parallel points
#     share outputs (run serially);
#   - weights baked in as constants (copied to the device once), empty
#     batches (nothing launched), and a buffer returned twice next to an
#     argument returned as it is.
#
# Tolerances are relative over the whole output: f32 1e-5, f16 2e-3, bf16
# 1e-2 (inputs rounded to the storage type first, as the reference does).
#
# REQUIRES: numpy
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %emulator %fff_src_root/scripts/fff-aot.sh %t | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed
# CHECK: strategies run: serial, thread_per_point, tiled_contraction 16x256x16, tiled_contraction 256x16x16, tiled_contraction 64x64x16

import os
import re
import sys

import numpy as np

emulator, aot, work = sys.argv[1:]
os.environ["FFF_CUDA_DRIVER"] = emulator
stats = os.path.join(work, "launches.jsonl")
os.environ["FFF_EMU_STATS"] = stats

import emulated  # noqa: E402
from fffcheck import Checker, dequantize, quantize  # noqa: E402

device = emulated.Device(emulator)
check = Checker()
rng = np.random.default_rng(21)
TOLERANCE = {"f32": 1e-5, "f16": 2e-3, "bf16": 1e-2}
STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}
functions, cases = [], []


def tensor(shape, dtype):
    return f"tensor<{'x'.join('?' if d is None else str(d) for d in shape)}x{dtype}>"


def values(shape, dtype, scale=1.0):
    """Random values in `dtype`'s storage, and the float64 values they hold."""
    return quantize((rng.standard_normal(shape) * scale).astype(np.float32), dtype)


def add_case(name, text, inputs, expected, dtype, result_dtype=None):
    """A function, its inputs (storage arrays) and its float64 expected
    result, stored as `result_dtype`."""
    functions.append(text)
    cases.append((name, inputs, expected, result_dtype or dtype, dtype))


#===------------------------------------------------------------------------===#
# Contractions
#===------------------------------------------------------------------------===#

def matmul(m, k, n, dtype="f32", dynamic_m=False):
    name = f"matmul_{dtype}_{m}x{k}x{n}{'_dynamic' if dynamic_m else ''}"
    a_t, b_t = tensor((None if dynamic_m else m, k), dtype), tensor((k, n), dtype)
    c_t = tensor((None if dynamic_m else m, n), dtype)
    dims = "%c0 = arith.constant 0 : index\n  %m = tensor.dim %a, %c0 : " + a_t + "\n" if dynamic_m else ""
    empty = f"tensor.empty(%m) : {c_t}" if dynamic_m else f"tensor.empty() : {c_t}"
    text = (f"func.func @{name}(%a: {a_t}, %b: {b_t}) -> {c_t} {{\n  {dims}"
            f"  %zero = arith.constant 0.0 : {dtype}\n"
            f"  %e = {empty}\n"
            f"  %z = linalg.fill ins(%zero : {dtype}) outs(%e : {c_t}) -> {c_t}\n"
            f"  %c = linalg.matmul ins(%a, %b : {a_t}, {b_t}) outs(%z : {c_t}) -> {c_t}\n"
            f"  return %c : {c_t}\n}}\n")
    (a_bits, a), (b_bits, b) = values((m, k), dtype), values((k, n), dtype)
    add_case(name, text, [a_bits, b_bits], a @ b, dtype)


for m, k, n in [(1, 1, 1), (37, 53, 29), (130, 70, 65), (64, 16, 64), (200, 33, 8), (9, 100, 300)]:
    matmul(m, k, n)
matmul(77, 45, 91, dynamic_m=True)
matmul(70, 66, 40, "bf16")
matmul(33, 50, 70, "f16")


def batch_matmul(batch, m, k, n):
    name = f"batch_matmul_{batch}x{m}x{k}x{n}"
    a_t, b_t, c_t = tensor((batch, m, k), "f32"), tensor((batch, k, n), "f32"), tensor((batch, m, n), "f32")
    text = (f"func.func @{name}(%a: {a_t}, %b: {b_t}) -> {c_t} {{\n"
            f"  %zero = arith.constant 0.0 : f32\n  %e = tensor.empty() : {c_t}\n"
            f"  %z = linalg.fill ins(%zero : f32) outs(%e : {c_t}) -> {c_t}\n"
            f"  %c = linalg.batch_matmul ins(%a, %b : {a_t}, {b_t}) outs(%z : {c_t}) -> {c_t}\n"
            f"  return %c : {c_t}\n}}\n")
    (a_bits, a), (b_bits, b) = values((batch, m, k), "f32"), values((batch, k, n), "f32")
    add_case(name, text, [a_bits, b_bits], a @ b, "f32")


batch_matmul(3, 17, 33, 9)


def linear(tokens, sequence, hidden, out):
    """x @ W^T + bias on [tokens, sequence, hidden], W as [out, hidden]:
    two M dims, B read transposed, a bias accumulated into."""
    name = f"linear_{tokens}x{sequence}x{hidden}x{out}"
    x_t, w_t, b_t = tensor((tokens, sequence, hidden), "f32"), tensor((out, hidden), "f32"), tensor((out,), "f32")
    y_t = tensor((tokens, sequence, out), "f32")
    text = (f"func.func @{name}(%x: {x_t}, %w: {w_t}, %bias: {b_t}) -> {y_t} {{\n"
            f"  %e = tensor.empty() : {y_t}\n"
            f"  %init = linalg.generic {{indexing_maps = [affine_map<(b, s, o) -> (o)>, affine_map<(b, s, o) -> (b, s, o)>], "
            f"iterator_types = [\"parallel\", \"parallel\", \"parallel\"]}} ins(%bias : {b_t}) outs(%e : {y_t}) {{\n"
            f"  ^bb0(%v: f32, %o: f32):\n    linalg.yield %v : f32\n  }} -> {y_t}\n"
            f"  %y = linalg.generic {{indexing_maps = [affine_map<(b, s, o, i) -> (b, s, i)>, affine_map<(b, s, o, i) -> (o, i)>, "
            f"affine_map<(b, s, o, i) -> (b, s, o)>], iterator_types = [\"parallel\", \"parallel\", \"parallel\", \"reduction\"]}} "
            f"ins(%x, %w : {x_t}, {w_t}) outs(%init : {y_t}) {{\n"
            f"  ^bb0(%a: f32, %c: f32, %acc: f32):\n    %p = arith.mulf %a, %c : f32\n    %s = arith.addf %acc, %p : f32\n"
            f"    linalg.yield %s : f32\n  }} -> {y_t}\n  return %y : {y_t}\n}}\n")
    (x_bits, x), (w_bits, w), (b_bits, b) = (values((tokens, sequence, hidden), "f32"),
                                             values((out, hidden), "f32"), values((out,), "f32"))
    add_case(name, text, [x_bits, w_bits, b_bits], x @ w.T + b, "f32")


linear(3, 7, 40, 70)

#===------------------------------------------------------------------------===#
# Loop-nest kernels
#===------------------------------------------------------------------------===#

rows, width = 13, 75
x_t, v_t = tensor((None, width), "f32"), tensor((width,), "f32")
functions.append(
    f"func.func @scaled_bias(%x: {x_t}, %b: {v_t}) -> {x_t} {{\n"
    f"  %c0 = arith.constant 0 : index\n  %n = tensor.dim %x, %c0 : {x_t}\n"
    f"  %scale = arith.constant 1.5 : f32\n  %e = tensor.empty(%n) : {x_t}\n"
    f"  %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], "
    f"iterator_types = [\"parallel\", \"parallel\"]}} ins(%x, %b : {x_t}, {v_t}) outs(%e : {x_t}) {{\n"
    f"  ^bb0(%a: f32, %c: f32, %o: f32):\n    %s = arith.addf %a, %c : f32\n    %t = arith.mulf %s, %scale : f32\n"
    f"    %u = math.tanh %t : f32\n    linalg.yield %u : f32\n  }} -> {x_t}\n  return %y : {x_t}\n}}\n")
(xb, x), (bb, b) = values((rows, width), "f32"), values((width,), "f32")
cases.append(("scaled_bias", [xb, bb], np.tanh((x + b) * 1.5), "f32", "f32"))

# Softmax over rows of an odd width, as torch-mlir writes it: max, exp of the
# difference, sum, divide.
s_t, r_t = tensor((None, width), "f32"), tensor((None, 1), "f32")
functions.append(f"""func.func @softmax(%x: {s_t}) -> {s_t} {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : {s_t}
  %lowest = arith.constant -3.40282347E+38 : f32
  %zero = arith.constant 0.0 : f32
  %er = tensor.empty(%n) : {r_t}
  %mi = linalg.fill ins(%lowest : f32) outs(%er : {r_t}) -> {r_t}
  %max = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, 0)>], iterator_types = ["parallel", "reduction"]}} ins(%x : {s_t}) outs(%mi : {r_t}) {{
  ^bb0(%a: f32, %m: f32):
    %r = arith.maximumf %a, %m : f32
    linalg.yield %r : f32
  }} -> {r_t}
  %e = tensor.empty(%n) : {s_t}
  %ex = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, 0)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x, %max : {s_t}, {r_t}) outs(%e : {s_t}) {{
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  }} -> {s_t}
  %si = linalg.fill ins(%zero : f32) outs(%er : {r_t}) -> {r_t}
  %sum = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, 0)>], iterator_types = ["parallel", "reduction"]}} ins(%ex : {s_t}) outs(%si : {r_t}) {{
  ^bb0(%a: f32, %s: f32):
    %r = arith.addf %a, %s : f32
    linalg.yield %r : f32
  }} -> {r_t}
  %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, 0)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%ex, %sum : {s_t}, {r_t}) outs(%e : {s_t}) {{
  ^bb0(%a: f32, %s: f32, %o: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  }} -> {s_t}
  return %y : {s_t}
}}
""")
xb, x = values((rows, width), "f32", 3.0)
shifted = np.exp(x - x.max(1, keepdims=True))
cases.append(("softmax", [xb], shifted / shifted.sum(1, keepdims=True), "f32", "f32"))

# A sum over the leading dim, [rows, width] -> [width], with the given
# iterator types for (i, j).
c_in, c_out = tensor((rows, width), "f32"), tensor((width,), "f32")


def leading_dim_sum(name, iterators):
    functions.append(f"""func.func @{name}(%x: {c_in}) -> {c_out} {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {c_out}
  %z = linalg.fill ins(%zero : f32) outs(%e : {c_out}) -> {c_out}
  %s = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>], iterator_types = {iterators}}} ins(%x : {c_in}) outs(%z : {c_out}) {{
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  }} -> {c_out}
  return %s : {c_out}
}}
""")
    xb, x = values((rows, width), "f32")
    cases.append((name, [xb], x.sum(0), "f32", "f32"))


# A column sum: the reduction over the leading dim, a thread per column.
leading_dim_sum("column_sum", '["reduction", "parallel"]')
# Parallel points that share outputs (the iterators mislabel a reduction):
# linalg's semantics are sequential, which the serial kernel keeps.
leading_dim_sum("shared_outputs", '["parallel", "reduction"]')

# Copies through views: concatenation, zero padding, a strided slice.
a_t, b2_t, cat_t = tensor((5, 7), "f32"), tensor((5, 4), "f32"), tensor((5, 11), "f32")
functions.append(f"""func.func @concat(%a: {a_t}, %b: {b2_t}) -> {cat_t} {{
  %c = tensor.concat dim(1) %a, %b : ({a_t}, {b2_t}) -> {cat_t}
  return %c : {cat_t}
}}
""")
(ab, a), (bb2, b2) = values((5, 7), "f32"), values((5, 4), "f32")
cases.append(("concat", [ab, bb2], np.concatenate([a, b2], 1), "f32", "f32"))

p_t = tensor((8, 10), "f32")
functions.append(f"""func.func @pad(%a: {a_t}) -> {p_t} {{
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %a low[1, 2] high[2, 1] {{
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  }} : {a_t} to {p_t}
  return %p : {p_t}
}}
""")
ab, a = values((5, 7), "f32")
cases.append(("pad", [ab], np.pad(a, ((1, 2), (2, 1))), "f32", "f32"))

big_t, slice_t = tensor((9, 12), "f32"), tensor((4, 5), "f32")
functions.append(f"""func.func @strided_slice(%a: {big_t}) -> {slice_t} {{
  %s = tensor.extract_slice %a[1, 2] [4, 5] [2, 2] : {big_t} to {slice_t}
  %e = tensor.empty() : {slice_t}
  %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%s : {slice_t}) outs(%e : {slice_t}) {{
  ^bb0(%v: f32, %o: f32):
    %r = arith.negf %v : f32
    linalg.yield %r : f32
  }} -> {slice_t}
  return %y : {slice_t}
}}
""")
ab, a = values((9, 12), "f32")
cases.append(("strided_slice", [ab], -a[1:9:2, 2:12:2], "f32", "f32"))

# Weights baked in as a constant.
w = np.round(rng.standard_normal((6, 4)), 3).astype(np.float32)
w_text = ", ".join("[" + ", ".join(f"{v:.3f}" for v in row) + "]" for row in w)
functions.append(f"""func.func @constant_weights(%x: {tensor((None, 6), "f32")}) -> {tensor((None, 4), "f32")} {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : {tensor((None, 6), "f32")}
  %w = arith.constant dense<[{w_text}]> : tensor<6x4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%n) : {tensor((None, 4), "f32")}
  %z = linalg.fill ins(%zero : f32) outs(%e : {tensor((None, 4), "f32")}) -> {tensor((None, 4), "f32")}
  %y = linalg.matmul ins(%x, %w : {tensor((None, 6), "f32")}, tensor<6x4xf32>) outs(%z : {tensor((None, 4), "f32")}) -> {tensor((None, 4), "f32")}
  return %y : {tensor((None, 4), "f32")}
}}
""")
xb, x = values((11, 6), "f32")
cases.append(("constant_weights", [xb], x @ w.astype(np.float64), "f32", "f32"))

#===------------------------------------------------------------------------===#
# Run
#===------------------------------------------------------------------------===#

lib = emulated.build(aot, work, "linalg", functions)


def run_case(name, inputs, expected, result_dtype, dtype, label=None):
    out = emulated.call(device, lib, name, inputs, [(expected.shape, STORAGE[result_dtype])])
    label = label or f"{name} {' x '.join(str(list(i.shape)) for i in inputs)}"
    if isinstance(out, str):
        check.equal(f"{label}: error", out, None)
        return
    check.close(label, dequantize(out[0], result_dtype), expected, TOLERANCE[dtype])


for case in cases:
    run_case(*case)

# Twice more: the constant's device copy is reused, and the same library
# serves other batch sizes (dynamic M).
xb, x = values((3, 6), "f32")
run_case("constant_weights", [xb], x @ w.astype(np.float64), "f32", "f32", "constant_weights again, 3 rows")
(ab, a), (bb, b) = values((150, 45), "f32"), values((45, 91), "f32")
run_case("matmul_f32_77x45x91_dynamic", [ab, bb], a @ b, "f32", "f32", "dynamic matmul at 150 rows")

# Empty batches launch nothing and report nothing.
launched = len(emulated.launches(stats))
empty = np.zeros((0, 6), np.float32)
out = emulated.call(device, lib, "constant_weights", [empty], [((0, 4), np.float32)])
check.equal("constant_weights on an empty batch: no error", isinstance(out, str), False)
empty_sm = np.zeros((0, width), np.float32)
out = emulated.call(device, lib, "softmax", [empty_sm], [((0, width), np.float32)])
check.equal("softmax on an empty batch: no error", isinstance(out, str), False)
check.equal("empty batches: no kernel launched", len(emulated.launches(stats)), launched)

# A buffer returned twice, and an argument returned as it is: each result
# gets its own copy (fff-fresh-result-buffers).
returns = emulated.build(aot, work, "returns", ["""
func.func @returns(%x: tensor<?x6xf32>, %a: tensor<?x6xf32>)
    -> (tensor<?x6xf32>, tensor<?x6xf32>, tensor<?x6xf32>) {
  %h = arith.addf %x, %a : tensor<?x6xf32>
  return %h, %h, %x : tensor<?x6xf32>, tensor<?x6xf32>, tensor<?x6xf32>
}
"""])
(xb, x), (ab, a) = values((5, 6), "f32"), values((5, 6), "f32")
out = emulated.call(device, returns, "returns", [xb, ab], [((5, 6), np.float32)] * 3)
if isinstance(out, str):
    check.equal("a buffer returned twice: error", out, None)
else:
    for label, actual, expected in zip(("first", "second", "argument"), out, (x + a, x + a, x)):
        check.close(f"a buffer returned twice, {label} result", actual, expected, TOLERANCE["f32"])

check.finish()

strategies = set()
for kernel in emulated.launches(stats):
    tiles = re.search(r"_tiled_([0-9x]+)", kernel)
    strategies.add(f"tiled_contraction {tiles.group(1)}" if tiles else
                   "serial" if "_serial" in kernel else "thread_per_point")
print("strategies run:", ", ".join(sorted(strategies)))

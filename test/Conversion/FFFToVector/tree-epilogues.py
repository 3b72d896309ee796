# A tree layer's epilogue: in a pre-LN FFN sublayer (x + tree(layer_norm(x)),
# one fused unit), the tree layer applies the residual add as it writes each
# token's row (convert-fff-trees-to-vector), and its own result is never
# stored. Through --fff-cpu-pipeline and fff-run, on seeded random data, for
# tree_ffn (one tree, and two, whose sums are finished in a pass of their
# own) and leaf_tree_ffn, in f32 and bf16, rows of 100 (a masked tail after
# six 16-lane vectors): the sublayer must equal, bit for bit, the same
# sublayer that also returns the tree's result (so the add runs on its own),
# and that one must equal the tree's result plus x as numpy adds them, at
# one thread and two.
#
# REQUIRES: numpy
# RUN: %python %s | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import math

import numpy as np

from fffcheck import Checker, from_bf16_bits, quantize, run, tensor_type, to_bf16_bits

rng = np.random.default_rng(20261202)
check = Checker()
D = 100


def sublayer(dtype, layer, weights, also_return_layer):
    """@f(x, gamma, beta, weights...) -> x + layer(layer_norm(x)) [, layer's
    result]; `layer` is the op's text with %n as its input."""
    t = tensor_type((None, D), dtype)
    vt = tensor_type((D,), dtype)
    params = [f"%x: {t}", f"%g: {vt}", f"%b: {vt}"] + [f"%{name}: {tensor_type(shape, dtype)}"
                                                     for name, shape in weights]
    results = [t, t] if also_return_layer else [t]
    returned = "%r, %y" if also_return_layer else "%r"
    return (f"func.func @f({', '.join(params)}) -> ({', '.join(results)}) {{\n"
            f"  %n = fff.layer_norm %x scale(%g : {vt}) bias(%b : {vt}) {{epsilon = 1.0e-5 : f32}} : {t}\n"
            f"  %y = {layer}\n"
            f"  %r = arith.addf %x, %y : {t}\n"
            f"  return {returned} : {', '.join(results)}\n}}\n")


def tree_layer(dtype, trees, depth):
    nodes = 2 ** (depth + 1) - 1
    wt = tensor_type((trees, nodes, D), dtype)
    bt = tensor_type((trees, nodes), dtype)
    text = (f"fff.tree_ffn %n, %wi bias(%bi : {bt}), %wo bias(%bo : {tensor_type((D,), dtype)}) "
            f"{{depth = {depth} : i64}} : {tensor_type((None, D), dtype)}, {wt}, {wt}")
    weights = [("wi", (trees, nodes, D)), ("bi", (trees, nodes)), ("wo", (trees, nodes, D)), ("bo", (D,))]
    scales = {"wi": 1 / math.sqrt(D), "bi": 0.3, "wo": 1 / math.sqrt(depth + 1), "bo": 0.3}
    return text, weights, scales


def leaf_layer(dtype, depth, width):
    leaves = 2 ** depth
    shapes = [("nw", (leaves - 1, D)), ("nb", (leaves - 1,)), ("w1", (leaves, D, width)), ("b1", (leaves, width)),
              ("w2", (leaves, width, D)), ("b2", (leaves, D))]
    types = [tensor_type((None, D), dtype)] + [tensor_type(shape, dtype) for _, shape in shapes]
    text = (f"fff.leaf_tree_ffn %n, {', '.join('%' + name for name, _ in shapes)} {{depth = {depth} : i64}} "
            f": {', '.join(types)}")
    scales = {"nw": 1 / math.sqrt(D), "nb": 0.3, "w1": 1 / math.sqrt(D), "b1": 0.3, "w2": 1 / math.sqrt(width),
              "b2": 0.3}
    return text, shapes, scales


def case(name, dtype, layer):
    text, weights, scales = layer
    x, _ = quantize(rng.standard_normal((300, D)), dtype)
    gamma, _ = quantize(1 + 0.1 * rng.standard_normal(D), dtype)
    beta, _ = quantize(0.1 * rng.standard_normal(D), dtype)
    args = [x, gamma, beta] + [quantize(rng.standard_normal(shape) * scales[weight], dtype)[0]
                               for weight, shape in weights]
    fused = sublayer(dtype, text, weights, also_return_layer=False)
    apart = sublayer(dtype, text, weights, also_return_layer=True)
    for threads in ("1", "2"):
        flags = ["--threads", threads]
        (r,) = run(fused, "f", args, 1, extra_flags=flags)
        r_apart, y = run(apart, "f", args, 2, extra_flags=flags)
        check.equal(f"{name}, {threads} thread(s): the add applied as the layer writes, as on its own", r, r_apart)
        if dtype == "bf16":
            expected = to_bf16_bits(from_bf16_bits(y) + from_bf16_bits(x))
        else:
            expected = y + x
        check.equal(f"{name}, {threads} thread(s): the layer's result plus x", r_apart, expected)


for dtype in ("f32", "bf16"):
    case(f"tree_ffn {dtype}", dtype, tree_layer(dtype, trees=1, depth=4))
    case(f"tree_ffn {dtype}, two trees", dtype, tree_layer(dtype, trees=2, depth=3))
    case(f"leaf_tree_ffn {dtype}", dtype, leaf_layer(dtype, depth=3, width=20))

check.finish()

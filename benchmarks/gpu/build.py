#!/usr/bin/env python3
"""Builds everything the device check needs, on a machine without a GPU,
with scripts/fff-aot.sh into benchmarks/gpu/out/:
  - fff_norms.so: a norm function per (op, dtype, hidden size);
  - fff_trees.so: the tree layers of the device check (tree_ffn at
    UltraFastBERT-1x11's shape and a larger one, and a leaf_tree_ffn), each
    choosing its latency or throughput kernel by batch size as compiled by
    default; and the same functions with only the latency kernel
    (fff_trees_latency.so), only the throughput kernel (_throughput), and
    the throughput kernel without staged rows (_unstaged), for the
    ablation table;
  - fff_sublayers.so: FFN sublayers, each one fused kernel (pre-LN
    x + tree_ffn(layer_norm(x)) and post-LN layer_norm(x + tree_ffn(x)) at
    UltraFastBERT-1x11's shape), and examples/pre_ln_block.mlir, a whole
    pre-LN block of two sublayers;
  - fff_norm_grads.so: the norms' backward (layer_norm_grad with dgamma
    and dbeta, rms_norm_grad with dgamma from the forward's rstd) per
    (op, dtype, hidden size);
  - fff_norm_grads.so also holds each backward as the fused unit of a
    pre-LN block's training step with a dropout after the norm
    (fused_<op>_grad_<dtype>_<hidden>): dy = grad * (keep ? 1/0.9 : 0)
    read from the incoming gradient and an i8 keep mask, and
    dh = dresidual + dx written in dx's place, as the torch backend's
    backward fusion compiles it (traffic.py);
  - fff_tree_grads.so: tree training steps (tree_grad_check.py): per
    layer, its tree_ffn and its tree_ffn_grad (dx, every weight's and
    bias's gradient), and per leaf tree its leaf_tree_ffn and
    leaf_tree_ffn_grad;
  - manifest.json: each function's signature, for device_check.py.

    python3 benchmarks/gpu/build.py [--out benchmarks/gpu/out] [--chip sm_90]
"""

import argparse
import json
import os
import subprocess

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", default=os.path.join(here, "out"))
parser.add_argument("--chip", default="sm_90")
options = parser.parse_args()

HIDDEN = (768, 1024, 4096, 8192, 16384, 32768)
DTYPES = ("f32", "bf16")
EPSILON = 1e-5

functions, manifest = [], []
for op in ("layer_norm", "rms_norm"):
    for dtype in DTYPES:
        for hidden in HIDDEN:
            name = f"{op}_{dtype}_{hidden}"
            t, p = f"tensor<?x{hidden}x{dtype}>", f"tensor<{hidden}x{dtype}>"
            if op == "layer_norm":
                body = (f"func.func @{name}(%x: {t}, %g: {p}, %b: {p}) -> {t} {{\n"
                        f"  %y = fff.layer_norm %x scale(%g : {p}) bias(%b : {p}) : {t}\n")
            else:
                body = (f"func.func @{name}(%x: {t}, %g: {p}) -> {t} {{\n"
                        f"  %y = fff.rms_norm %x scale(%g : {p}) : {t}\n")
            functions.append(body + f"  return %y : {t}\n}}\n")
            manifest.append({"function": name, "op": op, "dtype": dtype, "hidden": hidden,
                             "epsilon": EPSILON,
                             # memref arguments in order; the output is the trailing out-param.
                             "args": ["x", "gamma"] + (["beta"] if op == "layer_norm" else []) + ["y"]})

# Tree layers: (name, op, dtype, width, depth, leaf width); tree_ffn with
# both biases and GELU, leaf_tree_ffn with ReLU.
TREES = (("tree_ffn_bf16_768_depth11", "tree_ffn", "bf16", 768, 11, 0),
         ("tree_ffn_f32_768_depth11", "tree_ffn", "f32", 768, 11, 0),
         ("tree_ffn_bf16_4096_depth15", "tree_ffn", "bf16", 4096, 15, 0),
         ("leaf_tree_ffn_bf16_768_depth8", "leaf_tree_ffn", "bf16", 768, 8, 32))
# Library suffix -> --fff-gpu-pipeline options.
TREE_LIBRARIES = {"": "", "_latency": "tree-variant=latency", "_throughput": "tree-variant=throughput",
                  "_unstaged": "tree-variant=throughput tree-staging=false"}

tree_functions, tree_manifest = [], []
for name, op, dtype, width, depth, leaf_width in TREES:
    x = f"tensor<?x{width}x{dtype}>"
    if op == "tree_ffn":
        nodes = 2 ** (depth + 1) - 1
        w, b_in, b_out = f"tensor<1x{nodes}x{width}x{dtype}>", f"tensor<1x{nodes}x{dtype}>", f"tensor<{width}x{dtype}>"
        tree_functions.append(
            f"func.func @{name}(%x: {x}, %wi: {w}, %bi: {b_in}, %wo: {w}, %bo: {b_out}) -> {x} {{\n"
            f"  %y = fff.tree_ffn %x, %wi bias(%bi : {b_in}), %wo bias(%bo : {b_out}) {{depth = {depth} : i64}} : {x}, {w}, {w}\n"
            f"  return %y : {x}\n}}\n")
        args = ["x", "w_in", "b_in", "w_out", "b_out", "y"]
    else:
        leaves = 2 ** depth
        types = [f"tensor<{leaves - 1}x{width}x{dtype}>", f"tensor<{leaves - 1}x{dtype}>",
                 f"tensor<{leaves}x{width}x{leaf_width}x{dtype}>", f"tensor<{leaves}x{leaf_width}x{dtype}>",
                 f"tensor<{leaves}x{leaf_width}x{width}x{dtype}>", f"tensor<{leaves}x{width}x{dtype}>"]
        names = ["node_w", "node_b", "w1", "b1", "w2", "b2"]
        tree_functions.append(
            f"func.func @{name}(%x: {x}, " + ", ".join(f"%{n}: {t}" for n, t in zip(names, types)) + f") -> {x} {{\n"
            f"  %y = fff.leaf_tree_ffn %x, " + ", ".join(f"%{n}" for n in names) +
            f" {{depth = {depth} : i64}} : {x}, " + ", ".join(types) + "\n"
            f"  return %y : {x}\n}}\n")
        args = ["x"] + names + ["y"]
    tree_manifest.append({"function": name, "op": op, "dtype": dtype, "width": width, "depth": depth,
                          "leaf_width": leaf_width, "args": args})

# FFN sublayers: (form, dtype); tree_ffn 768 wide, depth 11, GELU, both
# biases; LayerNorm with scale and bias.
SUBLAYERS = (("pre_ln", "bf16"), ("pre_ln", "f32"), ("post_ln", "bf16"), ("post_ln", "f32"))
SUBLAYER_WIDTH, SUBLAYER_DEPTH = 768, 11
sublayer_functions, sublayer_manifest = [], []
for form, dtype in SUBLAYERS:
    name = f"{form}_tree_ffn_{dtype}_{SUBLAYER_WIDTH}_depth{SUBLAYER_DEPTH}"
    nodes = 2 ** (SUBLAYER_DEPTH + 1) - 1
    x, p = f"tensor<?x{SUBLAYER_WIDTH}x{dtype}>", f"tensor<{SUBLAYER_WIDTH}x{dtype}>"
    w, b_in = f"tensor<1x{nodes}x{SUBLAYER_WIDTH}x{dtype}>", f"tensor<1x{nodes}x{dtype}>"
    norm = lambda value: f"fff.layer_norm {value} scale(%g : {p}) bias(%b : {p}) : {x}"
    tree = lambda value: (f"fff.tree_ffn {value}, %wi bias(%bi : {b_in}), %wo bias(%bo : {p}) "
                          f"{{depth = {SUBLAYER_DEPTH} : i64}} : {x}, {w}, {w}")
    body = ([f"%n = {norm('%x')}", f"%t = {tree('%n')}", f"%y = arith.addf %x, %t : {x}"] if form == "pre_ln" else
            [f"%t = {tree('%x')}", f"%s = arith.addf %x, %t : {x}", f"%y = {norm('%s')}"])
    sublayer_functions.append(
        f"func.func @{name}(%x: {x}, %g: {p}, %b: {p}, %wi: {w}, %bi: {b_in}, %wo: {w}, %bo: {p}) -> {x} {{\n"
        + "".join(f"  {line}\n" for line in body) + f"  return %y : {x}\n}}\n")
    sublayer_manifest.append({"function": name, "form": form, "dtype": dtype, "width": SUBLAYER_WIDTH,
                              "depth": SUBLAYER_DEPTH,
                              "args": ["x", "gamma", "beta", "w_in", "b_in", "w_out", "b_out", "y"]})
# The example block, as written: f32, 768 wide; a LayerNorm + tree_ffn
# (depth 11) sublayer, then an RMSNorm + leaf_tree_ffn (depth 3, leaves 32
# wide, GELU) one.
with open(os.path.join(root, "examples", "pre_ln_block.mlir")) as f:
    sublayer_functions.append(f.read())
sublayer_manifest.append({"function": "pre_ln_block", "form": "block", "dtype": "f32", "width": 768, "depth": 11,
                          "leaf_depth": 3, "leaf_width": 32,
                          "args": ["x", "gamma", "beta", "w_in", "b_in", "w_out", "b_out", "rms_gamma",
                                   "node_w", "node_b", "w1", "b1", "w2", "b2", "y"]})

# The norms' backward, at the widths of the training benchmark's shapes.
GRAD_HIDDEN = (768, 1024, 4096)
grad_functions, grad_manifest = [], []
fused_grad_functions, fused_grad_manifest = [], []
KEEP_SCALE = 1 / 0.9


def fused_norm_grad(name, op, dtype, hidden):
    """The backward `name` of a norm followed by a dropout in a pre-LN
    block: its dy computed from the incoming gradient and an i8 keep mask
    (in f32, one rounding), and the residual gradient added to its dx."""
    t, p, s = f"tensor<?x{hidden}x{dtype}>", f"tensor<{hidden}x{dtype}>", "tensor<?x1xf32>"
    keep = f"tensor<?x{hidden}xi8>"
    identity = "affine_map<(d0, d1) -> (d0, d1)>"
    wide, narrow = ((f"    %widened = arith.extf %a : {dtype} to f32\n",
                     f"    %rounded = arith.truncf %pr : f32 to {dtype}\n")
                    if dtype != "f32" else ("", ""))
    product = (f"  %dy = linalg.generic {{indexing_maps = [{identity}, {identity}, {identity}], "
               f"iterator_types = [\"parallel\", \"parallel\"]}} ins(%grad, %keep : {t}, {keep}) outs(%init : {t}) {{\n"
               f"  ^bb0(%a: {dtype}, %k: i8, %o: {dtype}):\n"
               f"    %zero8 = arith.constant 0 : i8\n    %kept = arith.cmpi ne, %k, %zero8 : i8\n"
               f"    %scale = arith.constant {KEEP_SCALE!r} : f32\n    %zero = arith.constant 0.0 : f32\n"
               f"    %f = arith.select %kept, %scale, %zero : f32\n{wide}"
               f"    %pr = arith.mulf {'%widened' if wide else '%a'}, %f : f32\n{narrow}"
               f"    linalg.yield {'%rounded' if narrow else '%pr'} : {dtype}\n  }} -> {t}\n")
    if op == "layer_norm":
        stats, grad, results = (f"%m: {s}, %r: {s}", f"%dx, %dg, %db = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : {p}) "
                                f"bias_grad : {t}, {s}", (f"{p}, {p}", "%dg, %db"))
    else:
        stats, grad, results = (f"%r: {s}", f"%dx, %dg = fff.rms_norm_grad %dy, %x rstd(%r : {s}) scale(%g : {p}) "
                                f"{{epsilon = {EPSILON:.1e} : f32}} : {t}", (p, "%dg"))
    return (f"func.func @fused_{name}(%grad: {t}, %keep: {keep}, %x: {t}, {stats}, %g: {p}, %dres: {t}) "
            f"-> ({t}, {results[0]}) {{\n"
            f"  %c0 = arith.constant 0 : index\n  %rows = tensor.dim %grad, %c0 : {t}\n"
            f"  %init = tensor.empty(%rows) : {t}\n{product}  {grad}\n"
            f"  %dh = arith.addf %dres, %dx : {t}\n  return %dh, {results[1]} : {t}, {results[0]}\n}}\n")

for op in ("layer_norm", "rms_norm"):
    for dtype in DTYPES:
        for hidden in GRAD_HIDDEN:
            name = f"{op}_grad_{dtype}_{hidden}"
            t, p, s = f"tensor<?x{hidden}x{dtype}>", f"tensor<{hidden}x{dtype}>", "tensor<?x1xf32>"
            if op == "layer_norm":
                grad_functions.append(
                    f"func.func @{name}(%dy: {t}, %x: {t}, %m: {s}, %r: {s}, %g: {p}) -> ({t}, {p}, {p}) {{\n"
                    f"  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : {p}) bias_grad : {t}, {s}\n"
                    f"  return %dx, %dg, %db : {t}, {p}, {p}\n}}\n")
                args = ["dy", "x", "mean", "rstd", "gamma", "dx", "dgamma", "dbeta"]
            else:
                grad_functions.append(
                    f"func.func @{name}(%dy: {t}, %x: {t}, %r: {s}, %g: {p}) -> ({t}, {p}) {{\n"
                    f"  %dx, %dg = fff.rms_norm_grad %dy, %x rstd(%r : {s}) scale(%g : {p}) {{epsilon = {EPSILON:.1e} : f32}} : {t}\n"
                    f"  return %dx, %dg : {t}, {p}\n}}\n")
                args = ["dy", "x", "rstd", "gamma", "dx", "dgamma"]
            grad_manifest.append({"function": name, "op": op, "dtype": dtype, "hidden": hidden,
                                  "epsilon": EPSILON, "args": args})
            fused_grad_functions.append(fused_norm_grad(name, op, dtype, hidden))
            inputs = ["grad", "keep"] + args[1:args.index("dx")] + ["dresidual"]
            fused_grad_manifest.append({"function": "fused_" + name, "op": op, "dtype": dtype, "hidden": hidden,
                                        "epsilon": EPSILON, "keep_scale": KEEP_SCALE,
                                        "args": inputs + ["dh"] + args[args.index("dx") + 1:]})

# Tree training steps: (name, dtype, trees, depth), 768 wide, GELU, both
# biases: UltraFastBERT-1x11 and four trees of depth 8.
TREE_GRADS = (("tree_ffn_grad_bf16_1x11", "bf16", 1, 11), ("tree_ffn_grad_f32_1x11", "f32", 1, 11),
              ("tree_ffn_grad_bf16_4x8", "bf16", 4, 8))
TREE_GRAD_WIDTH = 768
tree_grad_functions, tree_grad_manifest = [], []
for name, dtype, trees, depth in TREE_GRADS:
    nodes = 2 ** (depth + 1) - 1
    x = f"tensor<?x{TREE_GRAD_WIDTH}x{dtype}>"
    w, b_in = f"tensor<{trees}x{nodes}x{TREE_GRAD_WIDTH}x{dtype}>", f"tensor<{trees}x{nodes}x{dtype}>"
    b_out = f"tensor<{TREE_GRAD_WIDTH}x{dtype}>"
    attrs = f"{{depth = {depth} : i64}}"
    forward = name.replace("_grad", "_forward")
    tree_grad_functions.append(
        f"func.func @{forward}(%x: {x}, %wi: {w}, %bi: {b_in}, %wo: {w}, %bo: {b_out}) -> {x} {{\n"
        f"  %y = fff.tree_ffn %x, %wi bias(%bi : {b_in}), %wo bias(%bo : {b_out}) {attrs} : {x}, {w}, {w}\n"
        f"  return %y : {x}\n}}\n"
        f"func.func @{name}(%dy: {x}, %x: {x}, %wi: {w}, %bi: {b_in}, %wo: {w}) -> ({x}, {w}, {w}, {b_in}, {b_out}) {{\n"
        f"  %dx, %dwi, %dwo, %dbi, %dbo = fff.tree_ffn_grad %dy, %x, %wi bias(%bi : {b_in}), %wo bias_grad {attrs} "
        f": {x}, {x}, {w}, {w}\n"
        f"  return %dx, %dwi, %dwo, %dbi, %dbo : {x}, {w}, {w}, {b_in}, {b_out}\n}}\n")
    tree_grad_manifest.append({"function": name, "forward": forward, "dtype": dtype, "trees": trees, "depth": depth,
                               "width": TREE_GRAD_WIDTH,
                               "forward_args": ["x", "w_in", "b_in", "w_out", "b_out", "y"],
                               "args": ["dy", "x", "w_in", "b_in", "w_out", "dx", "dw_in", "dw_out", "db_in",
                                        "db_out"]})

# Leaf tree training steps: (name, dtype, depth, leaf width), 768 wide,
# GELU: 256 leaves of 12 (3072 hidden units, as the dense FFN's).
LEAF_GRADS = (("leaf_tree_ffn_grad_bf16_256x12", "bf16", 8, 12), ("leaf_tree_ffn_grad_f32_256x12", "f32", 8, 12))
for name, dtype, depth, width in LEAF_GRADS:
    leaves, d = 2 ** depth, TREE_GRAD_WIDTH
    x, nw, nb = f"tensor<?x{d}x{dtype}>", f"tensor<{leaves - 1}x{d}x{dtype}>", f"tensor<{leaves - 1}x{dtype}>"
    w1, b1 = f"tensor<{leaves}x{d}x{width}x{dtype}>", f"tensor<{leaves}x{width}x{dtype}>"
    w2, b2 = f"tensor<{leaves}x{width}x{d}x{dtype}>", f"tensor<{leaves}x{d}x{dtype}>"
    attrs = f"{{depth = {depth} : i64, activation = #fff.activation<gelu>}}"
    forward = name.replace("_grad", "_forward")
    tree_grad_functions.append(
        f"func.func @{forward}(%x: {x}, %nw: {nw}, %nb: {nb}, %w1: {w1}, %b1: {b1}, %w2: {w2}, %b2: {b2}) -> {x} {{\n"
        f"  %y = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {attrs} : {x}, {nw}, {nb}, {w1}, {b1}, {w2}, {b2}\n"
        f"  return %y : {x}\n}}\n"
        f"func.func @{name}(%dy: {x}, %x: {x}, %nw: {nw}, %nb: {nb}, %w1: {w1}, %b1: {b1}, %w2: {w2})"
        f" -> ({x}, {w1}, {b1}, {w2}, {b2}) {{\n"
        f"  %dx, %dw1, %db1, %dw2, %db2 = fff.leaf_tree_ffn_grad %dy, %x, %nw, %nb, %w1, %b1, %w2 {attrs} "
        f": {x}, {x}, {nw}, {nb}, {w1}, {b1}, {w2}\n"
        f"  return %dx, %dw1, %db1, %dw2, %db2 : {x}, {w1}, {b1}, {w2}, {b2}\n}}\n")
    tree_grad_manifest.append({"function": name, "forward": forward, "kind": "leaf", "dtype": dtype, "depth": depth,
                               "leaf_width": width, "width": TREE_GRAD_WIDTH,
                               "forward_args": ["x", "node_w", "node_b", "w1", "b1", "w2", "b2", "y"],
                               "args": ["dy", "x", "node_w", "node_b", "w1", "b1", "w2", "dx", "dw1", "db1", "dw2",
                                        "db2"]})

os.makedirs(options.out, exist_ok=True)


def build(stem, text, pipeline_options):
    mlir = os.path.join(options.out, stem + ".mlir")
    with open(mlir, "w") as f:
        f.write("// Generated by benchmarks/gpu/build.py.\n" + text)
    subprocess.run([os.path.join(root, "scripts", "fff-aot.sh"), mlir, os.path.join(options.out, stem + ".so"),
                    " ".join([f"chip={options.chip}", pipeline_options]).strip()], check=True)


build("fff_norms", "\n".join(functions), "")
for suffix, pipeline_options in TREE_LIBRARIES.items():
    build("fff_trees" + suffix, "\n".join(tree_functions), pipeline_options)
build("fff_sublayers", "\n".join(sublayer_functions), "")
build("fff_norm_grads", "\n".join(grad_functions + fused_grad_functions), "")
build("fff_tree_grads", "\n".join(tree_grad_functions), "")
with open(os.path.join(options.out, "manifest.json"), "w") as f:
    json.dump({"library": "fff_norms.so", "chip": options.chip, "functions": manifest,
               "tree_libraries": {suffix.lstrip("_") or "auto": f"fff_trees{suffix}.so" for suffix in TREE_LIBRARIES},
               "tree_functions": tree_manifest,
               "sublayer_library": "fff_sublayers.so", "sublayer_functions": sublayer_manifest,
               "grad_library": "fff_norm_grads.so", "grad_functions": grad_manifest,
               "fused_grad_functions": fused_grad_manifest,
               "tree_grad_library": "fff_tree_grads.so", "tree_grad_functions": tree_grad_manifest}, f, indent=1)
print(f"built {len(manifest)} norm functions into {options.out}/fff_norms.so, "
      f"{len(tree_manifest)} tree functions into {len(TREE_LIBRARIES)} fff_trees*.so and "
      f"{len(sublayer_manifest)} sublayer functions into fff_sublayers.so and "
      f"{len(grad_manifest)} norm backward functions (and as many fused units) into fff_norm_grads.so and "
      f"{len(tree_grad_manifest)} tree training steps into fff_tree_grads.so")

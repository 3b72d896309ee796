# Every kernel family fff generates, run end to end without a GPU: modules
# go through scripts/fff-aot.sh (the real PTX, host code and fff's CUDA
# runtime) and run on fff's PTX emulator (FFF_CUDA_DRIVER), with its memory,
# race and barrier checks, against float64 numpy on random data:
#
#   - layer_norm (with mean and rstd) and rms_norm in f32, f16 and bf16,
#     over row sizes on both sides of each strategy's boundary (warp per
#     row, block per row, looped) and a dynamic row size, with tail blocks;
#   - a fused unit (residual add, norm, scale epilogue), and the
#     mixed-precision layer norm the torch backend trains (bf16 rows
#     widened, f32 parameters, y narrowed, mean and rstd saved), each one
#     fused kernel;
#   - tree_ffn and leaf_tree_ffn through their latency kernels (small
#     batches), their throughput kernels with and without staged levels, and
#     the host's choice of the throughput kernel for a large batch;
#   - views inside larger allocations, empty batches, and calls queued on a
#     caller's stream (fffSetStream).
#
# Which kernels ran is read from the emulator's launch statistics.
#
# REQUIRES: numpy
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %emulator %fff_src_root/scripts/fff-aot.sh %t | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed
# CHECK: norm kernels run: block_per_row, looped, warp_per_row
# CHECK: tree kernels run: latency, throughput

import math
import os
import re
import sys

import numpy as np

import emulated
from emulated import Device, memref
from fffcheck import TOLERANCE, Checker, dequantize, leaf_tree_ffn_ref, quantize, tree_ffn_ref

emulator, aot, work = sys.argv[1:]
# fff's runtime dlopens this path: the same library instance, whose buffers
# the kernels see.
os.environ["FFF_CUDA_DRIVER"] = emulator
stats = os.path.join(work, "launches.jsonl")
os.environ["FFF_EMU_STATS"] = stats
rng = np.random.default_rng(13)
check = Checker()
MLIR_TYPES = {"f32": "f32", "f16": "f16", "bf16": "bf16"}
STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}


device = Device(emulator)


def build(name, functions, options=""):
    return emulated.build(aot, work, name, functions, options)


def call(lib, name, inputs, outputs, pads=(0, 0)):
    return emulated.call(device, lib, name, inputs, outputs, pads)


def launches():
    return emulated.launches(stats)


def tensor(shape, dtype):
    return f"tensor<{'x'.join('?' if d is None else str(d) for d in shape)}x{MLIR_TYPES[dtype]}>"


#===------------------------------------------------------------------------===#
# Norms and a fused unit
#===------------------------------------------------------------------------===#

# Row sizes around each strategy's boundary in each type (see
# KernelStrategy.cpp), odd sizes for tails, and a dynamic row size.
HIDDEN = {"f32": (1, 3, 127, 768, 1000, 1024, 1028, 4096, 16384, 16388, None),
          "bf16": (5, 768, 1024, 1032, 8192, 16384, 16392, None),
          "f16": (6, 1000, 4104, None)}

norm_functions, norm_cases = [], []
for dtype, sizes in HIDDEN.items():
    for hidden in sizes:
        name = f"{dtype}_{hidden or 'dynamic'}"
        x, p = tensor((None, hidden), dtype), tensor((hidden,), dtype)
        st = tensor((None, 1), "f32")
        norm_functions.append(
            f"func.func @ln_{name}(%x: {x}, %g: {p}, %b: {p}) -> ({x}, {st}, {st}) {{\n"
            f"  %y, %m, %r = fff.layer_norm %x scale(%g : {p}) bias(%b : {p}) return_stats : {x}\n"
            f"  return %y, %m, %r : {x}, {st}, {st}\n}}\n"
            f"func.func @rms_{name}(%x: {x}, %g: {p}) -> {x} {{\n"
            f"  %y = fff.rms_norm %x scale(%g : {p}) {{epsilon = 1.0e-06 : f32}} : {x}\n"
            f"  return %y : {x}\n}}\n")
        norm_cases.append((dtype, hidden or 200, name))
# A fused unit: the residual sum is returned too, and the normalized row is
# scaled by another tensor.
norm_functions.append("""
func.func @fused(%x: tensor<?x96xbf16>, %r: tensor<?x96xbf16>, %g: tensor<96xbf16>, %z: tensor<?x96xbf16>)
    -> (tensor<?x96xbf16>, tensor<?x96xbf16>) {
  %s = arith.addf %x, %r : tensor<?x96xbf16>
  %n = fff.rms_norm %s scale(%g : tensor<96xbf16>) : tensor<?x96xbf16>
  %o = arith.mulf %n, %z : tensor<?x96xbf16>
  return %s, %o : tensor<?x96xbf16>, tensor<?x96xbf16>
}
""")
# Mixed precision, as the torch backend's training forward writes it.
MIXED_HIDDEN = (768, 4096, 16388, None)
for hidden in MIXED_HIDDEN:
    x, w = tensor((None, hidden), "bf16"), tensor((None, hidden), "f32")
    p, st = tensor((hidden,), "f32"), tensor((None, 1), "f32")
    norm_functions.append(
        f"func.func @mixed_ln_{hidden or 'dynamic'}(%x: {x}, %g: {p}, %b: {p}) -> ({x}, {st}, {st}) {{\n"
        f"  %xw = arith.extf %x : {x} to {w}\n"
        f"  %yw, %m, %r = fff.layer_norm %xw scale(%g : {p}) bias(%b : {p}) return_stats : {w}\n"
        f"  %y = arith.truncf %yw : {w} to {x}\n"
        f"  return %y, %m, %r : {x}, {st}, {st}\n}}\n")
norms = build("norms", norm_functions)


def layer_norm_ref(x, g, b, eps=1e-5):
    mean = x.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + eps)
    return (x - mean) * rstd * g + b, mean, rstd


for dtype, hidden, name in norm_cases:
    storage = STORAGE[dtype]
    # 5 rows: a warp-per-row block of 4 and a tail; 0 rows: nothing launched.
    for rows in (5, 0):
        x_arr, x = quantize(rng.standard_normal((rows, hidden)) * 2 + 0.5, dtype)
        g_arr, g = quantize(rng.standard_normal(hidden), dtype)
        b_arr, b = quantize(rng.standard_normal(hidden), dtype)
        # Inputs inside larger allocations, so that reading past them is
        # caught by the emulator as reading someone else's bytes is not.
        out = call(norms, f"ln_{name}", [x_arr, g_arr, b_arr],
                   [((rows, hidden), storage), ((rows, 1), np.float32), ((rows, 1), np.float32)],
                   pads=(64, 64))
        if isinstance(out, str):
            check.failures.append(f"ln_{name} rows {rows}: {out}")
            continue
        y, mean, rstd = out
        ref_y, ref_mean, ref_rstd = layer_norm_ref(x, g, b)
        if rows:
            check.close(f"layer_norm {name} y", dequantize(y, dtype), ref_y, TOLERANCE[dtype])
            check.close(f"layer_norm {name} mean", mean, ref_mean, TOLERANCE["f32"], scale=1 / ref_rstd)
            check.close(f"layer_norm {name} rstd", rstd, ref_rstd, TOLERANCE["f32"])
        out = call(norms, f"rms_{name}", [x_arr, g_arr], [((rows, hidden), storage)])
        if isinstance(out, str):
            check.failures.append(f"rms_{name} rows {rows}: {out}")
            continue
        if rows:
            ref = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * g
            check.close(f"rms_norm {name}", dequantize(out[0], dtype), ref, TOLERANCE[dtype])

rows = 7
arrays = [quantize(rng.standard_normal(shape), "bf16") for shape in ((rows, 96), (rows, 96), (96,), (rows, 96))]
out = call(norms, "fused", [a for a, _ in arrays], [((rows, 96), np.uint16)] * 2)
if isinstance(out, str):
    check.failures.append(f"fused: {out}")
else:
    (_, x), (_, r), (_, g), (_, z) = arrays
    s = dequantize(quantize(x + r, "bf16")[0], "bf16")
    n = dequantize(quantize(s / np.sqrt((s * s).mean(axis=1, keepdims=True) + 1e-5) * g, "bf16")[0], "bf16")
    check.close("fused residual sum", dequantize(out[0], "bf16"), s, TOLERANCE["bf16"])
    check.close("fused scaled norm", dequantize(out[1], "bf16"), n * z, TOLERANCE["bf16"])

for hidden in MIXED_HIDDEN:
    name, width, rows = hidden or "dynamic", hidden or 300, 9
    x_arr, x = quantize(rng.standard_normal((rows, width)) * 2 + 0.5, "bf16")
    g, b = rng.standard_normal(width).astype(np.float32), rng.standard_normal(width).astype(np.float32)
    first = len(launches())
    out = call(norms, f"mixed_ln_{name}", [x_arr, g, b],
               [((rows, width), np.uint16), ((rows, 1), np.float32), ((rows, 1), np.float32)], pads=(64, 64))
    if isinstance(out, str):
        check.failures.append(f"mixed_ln_{name}: {out}")
        continue
    ran = launches()[first:]
    check.equal(f"mixed layer_norm {name} is one fused kernel", [k.startswith("fused_layer_norm_f32") for k in ran],
                [True])
    ref_y, ref_mean, ref_rstd = layer_norm_ref(x, g, b)
    check.close(f"mixed layer_norm {name} y", dequantize(out[0], "bf16"), ref_y, TOLERANCE["bf16"])
    check.close(f"mixed layer_norm {name} mean", out[1], ref_mean, TOLERANCE["f32"], scale=1 / ref_rstd)
    check.close(f"mixed layer_norm {name} rstd", out[2], ref_rstd, TOLERANCE["f32"])

# A caller's stream: the call is queued on it and is done once it syncs.
x_arr, x = quantize(rng.standard_normal((3, 768)), "bf16")
g_arr, g = quantize(rng.standard_normal(768), "bf16")
stream = device.stream()
norms.fffSetStream(stream)
x_dev, g_dev, y_dev = device.upload(x_arr), device.upload(g_arr), device.alloc(3 * 768 * 2)
norms.rms_bf16_768(*memref(x_dev, (3, 768)), *memref(g_dev, (768,)), *memref(y_dev, (3, 768)))
assert device.lib.cuStreamSynchronize(stream) == 0
norms.fffSetStream(None)
ref = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * g
check.close("rms_norm on the caller's stream", dequantize(device.download(y_dev, (3, 768), np.uint16), "bf16"),
            ref, TOLERANCE["bf16"])

#===------------------------------------------------------------------------===#
# Tree layers
#===------------------------------------------------------------------------===#


# (dtype, din, dout, depth, trees, activation)
TREES = [("f32", 64, 48, 3, 1, "gelu"), ("bf16", 96, 40, 5, 2, "silu"),
         ("f16", 31, 17, 0, 1, "relu"), ("f32", 200, 8, 7, 1, "gelu_tanh")]
# (dtype, din, width, dout, depth, activation)
LEAVES = [("f32", 32, 8, 16, 3, "relu"), ("bf16", 48, 64, 24, 2, "gelu"), ("f16", 13, 5, 9, 1, "identity")]

tree_functions, tree_cases = [], []
for i, (dtype, din, dout, depth, trees, activation) in enumerate(TREES):
    nodes = 2 ** (depth + 1) - 1
    x, y = tensor((None, din), dtype), tensor((None, dout), dtype)
    wi, wo = tensor((trees, nodes, din), dtype), tensor((trees, nodes, dout), dtype)
    bi, bo = tensor((trees, nodes), dtype), tensor((dout,), dtype)
    tree_functions.append(
        f"func.func @tree{i}(%x: {x}, %wi: {wi}, %bi: {bi}, %wo: {wo}, %bo: {bo}) -> {y} {{\n"
        f"  %y = fff.tree_ffn %x, %wi bias(%bi : {bi}), %wo bias(%bo : {bo}) "
        f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>}} : {x}, {wi}, {wo}\n"
        f"  return %y : {y}\n}}\n")
for i, (dtype, din, width, dout, depth, activation) in enumerate(LEAVES):
    leaves, nodes = 2 ** depth, 2 ** depth - 1
    types = [tensor((None, din), dtype), tensor((nodes, din), dtype), tensor((nodes,), dtype),
             tensor((leaves, din, width), dtype), tensor((leaves, width), dtype),
             tensor((leaves, width, dout), dtype), tensor((leaves, dout), dtype)]
    y = tensor((None, dout), dtype)
    names = ["x", "nw", "nb", "w1", "b1", "w2", "b2"]
    tree_functions.append(
        f"func.func @leaf{i}({', '.join(f'%{n}: {t}' for n, t in zip(names, types))}) -> {y} {{\n"
        f"  %y = fff.leaf_tree_ffn {', '.join('%' + n for n in names)} "
        f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>}} : {', '.join(types)}\n"
        f"  return %y : {y}\n}}\n")


def run_trees(lib, variant, batches):
    for i, (dtype, din, dout, depth, trees, activation) in enumerate(TREES):
        nodes = 2 ** (depth + 1) - 1
        for batch in batches:
            shapes = [(batch, din), (trees, nodes, din), (trees, nodes), (trees, nodes, dout), (dout,)]
            scales = [1.0, 1 / math.sqrt(din), 0.5, 1.0, 0.5]
            arrays = [quantize(rng.standard_normal(s) * k, dtype) for s, k in zip(shapes, scales)]
            out = call(lib, f"tree{i}", [a for a, _ in arrays], [((batch, dout), STORAGE[dtype])])
            if isinstance(out, str):
                check.failures.append(f"tree{i} {variant} batch {batch}: {out}")
                continue
            if batch:
                ref = tree_ffn_ref(*[v for _, v in arrays], depth, activation)
                check.close(f"tree_ffn {dtype} {din}->{dout} depth {depth} x{trees} {variant} batch {batch}",
                            dequantize(out[0], dtype), ref, TOLERANCE[dtype])
    for i, (dtype, din, width, dout, depth, activation) in enumerate(LEAVES):
        leaves, nodes = 2 ** depth, 2 ** depth - 1
        for batch in batches:
            shapes = [(batch, din), (nodes, din), (nodes,), (leaves, din, width), (leaves, width),
                      (leaves, width, dout), (leaves, dout)]
            scales = [1.0, 1 / math.sqrt(din), 0.5, 1 / math.sqrt(din), 0.5, 1 / math.sqrt(width), 0.5]
            arrays = [quantize(rng.standard_normal(s) * k, dtype) for s, k in zip(shapes, scales)]
            out = call(lib, f"leaf{i}", [a for a, _ in arrays], [((batch, dout), STORAGE[dtype])])
            if isinstance(out, str):
                check.failures.append(f"leaf{i} {variant} batch {batch}: {out}")
                continue
            if batch:
                ref = leaf_tree_ffn_ref(*[v for _, v in arrays], depth, activation)
                check.close(f"leaf_tree_ffn {dtype} {din}->{width}->{dout} depth {depth} {variant} batch {batch}",
                            dequantize(out[0], dtype), ref, TOLERANCE[dtype])


# The host picks the latency kernel for small batches and the throughput
# kernel past kTreeLatencyBoundTokens (2048).
run_trees(build("trees", tree_functions), "latency", (1, 6, 0))
lib = build("trees_auto_large", tree_functions[:1])
dtype, din, dout, depth, trees, activation = TREES[0]
nodes, batch = 2 ** (depth + 1) - 1, 2100
arrays = [quantize(rng.standard_normal(s) * k, dtype)
          for s, k in zip([(batch, din), (trees, nodes, din), (trees, nodes), (trees, nodes, dout), (dout,)],
                          [1.0, 1 / math.sqrt(din), 0.5, 1.0, 0.5])]
before = len(launches())
out = call(lib, "tree0", [a for a, _ in arrays], [((batch, dout), np.float32)])
if isinstance(out, str):
    check.failures.append(f"tree0 batch {batch}: {out}")
else:
    check.close(f"tree_ffn batch {batch} (picked by the host)", out[0],
                tree_ffn_ref(*[v for _, v in arrays], depth, activation), TOLERANCE[dtype])
    check.equal(f"kernel the host picked for batch {batch}", launches()[before:],
                ["tree_ffn_f32_64x48_depth3_throughput"])
run_trees(build("trees_throughput", tree_functions, "tree-variant=throughput"), "throughput", (1, 19, 0))
run_trees(build("trees_unstaged", tree_functions, "tree-variant=throughput tree-staging=false"),
          "throughput unstaged", (5,))

check.finish()

# What ran: each kernel's name ends with its strategy or variant.
kernels = set(launches())
norm_kinds = {m.group(1) for k in kernels for m in [re.search(r"norm_.*_(warp_per_row|block_per_row|looped)$", k)] if m}
tree_kinds = {m.group(1) for k in kernels for m in [re.search(r"tree_ffn_.*_(latency|throughput)$", k)] if m}
print("norm kernels run:", ", ".join(sorted(norm_kinds)))
print("tree kernels run:", ", ".join(sorted(tree_kinds)))

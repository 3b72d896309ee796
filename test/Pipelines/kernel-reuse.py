# Kernel reuse: a stack of 24 identical pre-LN sublayers (LayerNorm,
# tree_ffn, residual add: one fused sublayer unit each) compiles to one
# kernel per distinct piece of work, 2 (the latency and the throughput
# variant), not 48; every launch uses them. A layer that differs in any
# attribute (epsilon, activation, depth), in element type or in width gets
# kernels of its own, and units with different epilogues or results do too.
#
# RUN: %python %s fff-opt fff-translate | FileCheck %s
# CHECK: 24 identical layers: 2 kernels, 48 launches
# CHECK: every launch names a kernel of the module
# CHECK: all {{[0-9]+}} checks passed

import re
import subprocess
import sys

fff_opt, fff_translate = sys.argv[1:]


def layer(i, prev, width=64, dtype="f32", eps="1.0e-05", activation="gelu", depth=3, epilogue=""):
    x, p = f"tensor<?x{width}x{dtype}>", f"tensor<{width}x{dtype}>"
    nodes = 2 ** (depth + 1) - 1
    w = f"tensor<1x{nodes}x{width}x{dtype}>"
    lines = [
        f"  %n{i} = fff.layer_norm {prev} scale(%g{width}{dtype} : {p}) {{epsilon = {eps} : f32}} : {x}",
        f"  %t{i} = fff.tree_ffn %n{i}, %w{width}{dtype}d{depth}, %w{width}{dtype}d{depth} "
        f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>}} : {x}, {w}, {w}",
        f"  %h{i} = arith.addf {prev}, %t{i} : {x}",
    ]
    if epilogue:
        lines.append(f"  %e{i} = math.{epilogue} %h{i} : {x}")
        return lines, f"%e{i}"
    return lines, f"%h{i}"


def module(layers):
    """One function chaining `layers` (keyword dicts for layer()); its
    arguments are the input and each distinct shape's weights."""
    params, body, prev = {}, [], "%x"
    first = layers[0]
    for i, kwargs in enumerate(layers):
        width, dtype, depth = kwargs.get("width", 64), kwargs.get("dtype", "f32"), kwargs.get("depth", 3)
        params[f"%g{width}{dtype}"] = f"tensor<{width}x{dtype}>"
        params[f"%w{width}{dtype}d{depth}"] = f"tensor<1x{2 ** (depth + 1) - 1}x{width}x{dtype}>"
        lines, prev = layer(i, prev, **kwargs)
        body += lines
    x = f"tensor<?x{first.get('width', 64)}x{first.get('dtype', 'f32')}>"
    args = ", ".join([f"%x: {x}"] + [f"{n}: {t}" for n, t in params.items()])
    return f"func.func @stack({args}) -> {x} {{\n" + "\n".join(body) + f"\n  return {prev} : {x}\n}}\n"


def kernels(mlir, passes=("--fff-fuse-norms", "--convert-fff-to-gpu")):
    out = subprocess.run([fff_opt, *passes, "-"], input=mlir, capture_output=True, text=True, check=True).stdout
    return re.findall(r"gpu\.func @(\w+)", out), re.findall(r"gpu\.launch_func\s+@fff_kernels::@(\w+)", out)


failures, count = [], 0


def check(ok, message):
    global count
    count += 1
    if not ok:
        failures.append(message)


same = module([{}] * 24)
names, launches = kernels(same)
print(f"24 identical layers: {len(names)} kernels, {len(launches)} launches")
check(len(names) == 2, f"24 identical layers: kernels {names}")
check(len(launches) == 48, f"24 identical layers: {len(launches)} launches")
check(set(launches) <= set(names), "a launch of a kernel that is not there")
print("every launch names a kernel of the module")

# After the whole pipeline: two PTX entries.
lowered = subprocess.run([fff_opt, "--fff-gpu-pipeline", "-"], input=same, capture_output=True, text=True,
                         check=True).stdout
ptx = subprocess.run([fff_translate, "--fff-extract-ptx"], input=lowered, capture_output=True, text=True,
                     check=True).stdout
check(ptx.count(".entry") == 2, f"24 identical layers: {ptx.count('.entry')} PTX entries")

# Layers that differ in one thing each, alternating with the default: each
# difference adds its own two kernels.
for what, kwargs in (("epsilon", {"eps": "1.0e-06"}), ("activation", {"activation": "relu"}),
                     ("depth", {"depth": 4}), ("element type", {"dtype": "bf16"}),
                     ("width", {"width": 128}), ("epilogue", {"epilogue": "tanh"})):
    if what in ("element type", "width"):
        # A stack changes neither; two functions, each a stack of its own.
        mlir = module([{}] * 3) + module([kwargs] * 3).replace("@stack", "@other")
    else:
        mlir = module([{}, kwargs] * 3)
    names, launches = kernels(mlir)
    check(len(names) == 4, f"layers differing in {what}: {len(names)} kernels {names}")
    check(len(launches) == 12 and set(launches) <= set(names), f"layers differing in {what}: launches {launches}")

# Two norm units alike but for what they return (the second also returns
# its residual sum, as GPT-2's ln_2 does and its ln_f does not): two
# kernels, with different parameters.
x = "tensor<?x64xf32>"
twins = (f"func.func @units(%x: {x}, %a: {x}, %b: {x}) -> ({x}, {x}, {x}) {{\n"
         f"  %s = arith.addf %x, %a : {x}\n  %n = fff.layer_norm %s : {x}\n"
         f"  %t = arith.addf %n, %b : {x}\n  %m = fff.layer_norm %t : {x}\n"
         f"  return %n, %t, %m : {x}, {x}, {x}\n}}\n")
names, launches = kernels(twins)
check(len(names) == 2 and launches == names, f"units differing in their results: {names}, launches {launches}")

if failures:
    sys.exit(f"{len(failures)} of {count} checks failed:\n" + "\n".join(failures))
print(f"all {count} checks passed")

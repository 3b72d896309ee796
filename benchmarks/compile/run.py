#!/usr/bin/env python3
"""Compile time: both pipelines on generated stacks of 1, 24 and 96 layers,
with the kernels emitted, peak memory and PTX size.

Two kinds of stack:
  - sublayers: pre-LN blocks of fff ops as examples/pre_ln_block.mlir writes
    them (LayerNorm + tree_ffn depth 11 + residual, RMSNorm + leaf_tree_ffn
    + residual, 768 wide), every layer with the same shapes;
  - bert / llama: a torch-mlir export of transformers' BertLayer or
    LlamaDecoderLayer (test/Frontends/Inputs/transformers) called N times
    in a chain and inlined, so that every layer's ops are in one function,
    as a whole-model export has them.

Each compile is a fresh fff-opt process; times are the median of
`--repeat` runs, peak memory is that process's maximum resident set. With
--timing, MLIR's per-pass timing of the largest stack is printed too.

    build/venv/bin/python benchmarks/compile/run.py [--layers 1 24 96] [--repeat 3] [--timing]
"""

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--bin", default=os.path.join(root, "build", "bin"))
parser.add_argument("--layers", type=int, nargs="*", default=[1, 24, 96])
parser.add_argument("--repeat", type=int, default=3)
parser.add_argument("--timing", action="store_true", help="print --mlir-timing for the largest stacks")
options = parser.parse_args()
fff_opt = os.path.join(options.bin, "fff-opt")
fff_translate = os.path.join(options.bin, "fff-translate")


def sublayer_stack(layers):
    d, nodes = 768, 4095
    x, p = f"tensor<?x{d}xf32>", f"tensor<{d}xf32>"
    w, bi = f"tensor<1x{nodes}x{d}xf32>", f"tensor<1x{nodes}xf32>"
    leaf = ["tensor<7x768xf32>", "tensor<7xf32>", "tensor<8x768x32xf32>", "tensor<8x32xf32>",
            "tensor<8x32x768xf32>", "tensor<8x768xf32>"]
    args = [f"%x: {x}", f"%g: {p}", f"%b: {p}", f"%wi: {w}", f"%bi: {bi}", f"%wo: {w}", f"%bo: {p}", f"%r: {p}"]
    args += [f"%l{i}: {t}" for i, t in enumerate(leaf)]
    body, h = [], "%x"
    for i in range(layers):
        body += [f"%n{i} = fff.layer_norm {h} scale(%g : {p}) bias(%b : {p}) : {x}",
                 f"%t{i} = fff.tree_ffn %n{i}, %wi bias(%bi : {bi}), %wo bias(%bo : {p}) {{depth = 11 : i64}} : {x}, {w}, {w}",
                 f"%a{i} = arith.addf {h}, %t{i} : {x}",
                 f"%m{i} = fff.rms_norm %a{i} scale(%r : {p}) : {x}",
                 f"%f{i} = fff.leaf_tree_ffn %m{i}, %l0, %l1, %l2, %l3, %l4, %l5 {{depth = 3 : i64}} : {x}, "
                 + ", ".join(leaf),
                 f"%h{i} = arith.addf %a{i}, %f{i} : {x}"]
        h = f"%h{i}"
    return (f"func.func @stack({', '.join(args)}) -> {x} {{\n" + "".join(f"  {line}\n" for line in body)
            + f"  return {h} : {x}\n}}\n")


def export_stack(name, layers):
    """The export's function, made private, called `layers` times in a chain
    by @stack, and inlined."""
    with open(os.path.join(root, "test", "Frontends", "Inputs", "transformers", f"{name}.mlir")) as f:
        text = f.read()
    signature = re.search(rf"func\.func @{name}\(%arg0: ([^)]*)\) -> ([^ ]*) \{{", text)
    arg, result = signature.groups()
    calls = "".join(f"    %y{i} = func.call @{name}({'%x' if i == 0 else f'%y{i - 1}'}) : ({arg}) -> {result}\n"
                    for i in range(layers))
    stack = f"func.func @stack(%x: {arg}) -> {result} {{\n{calls}    return %y{layers - 1} : {result}\n  }}\n  "
    # Beside the export's function, inside its module (resources follow it).
    text = text.replace(f"func.func @{name}(", stack + f"func.func private @{name}(", 1)
    return subprocess.run([fff_opt, "--inline", "--symbol-dce", "-"], input=text, capture_output=True, text=True,
                          check=True).stdout


def compile_once(source, pipeline, extra=()):
    """(seconds, peak resident MB, stdout, stderr) of one fff-opt run."""
    with tempfile.NamedTemporaryFile("w", suffix=".mlir") as f:
        f.write(source)
        f.flush()
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            start = time.perf_counter()
            proc = subprocess.Popen([fff_opt, f.name, f"--{pipeline}", *extra], stdout=out, stderr=err, text=True)
            _, status, usage = os.wait4(proc.pid, 0)
            seconds = time.perf_counter() - start
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
    if status:
        raise SystemExit(f"fff-opt --{pipeline} failed:\n{stderr[-2000:]}")
    return seconds, usage.ru_maxrss / 1024, stdout, stderr


def measure(kind, layers, source):
    row = {"stack": f"{kind} x{layers}"}
    for pipeline in ("fff-cpu-pipeline", "fff-gpu-pipeline"):
        runs = [compile_once(source, pipeline) for _ in range(options.repeat)]
        row[pipeline] = statistics.median(r[0] for r in runs)
        row[pipeline + " MB"] = runs[-1][1]
        if pipeline == "fff-gpu-pipeline":
            ptx = subprocess.run([fff_translate, "--fff-extract-ptx"], input=runs[-1][2], capture_output=True,
                                 text=True, check=True).stdout
            row["kernels"] = ptx.count(".entry")
            row["PTX KB"] = len(ptx) / 1024
    return row


stacks = [("sublayers", sublayer_stack), ("bert", lambda n: export_stack("bert_layer", n)),
          ("llama", lambda n: export_stack("llama_decoder_layer", n))]
print("| stack | CPU pipeline s | GPU pipeline s | GPU kernels | PTX KB | peak MB (GPU) |")
print("|---|---:|---:|---:|---:|---:|")
rows = []
for kind, make in stacks:
    for layers in sorted(options.layers):
        r = measure(kind, layers, make(layers))
        rows.append(r)
        print(f"| {r['stack']} | {r['fff-cpu-pipeline']:.2f} | {r['fff-gpu-pipeline']:.2f} | {r['kernels']} | "
              f"{r['PTX KB']:.0f} | {r['fff-gpu-pipeline MB']:.0f} |", flush=True)

if options.timing:
    for kind, make in stacks:
        layers = max(options.layers)
        _, _, _, timing = compile_once(make(layers), "fff-gpu-pipeline", ["--mlir-timing"])
        top = sorted((line for line in timing.splitlines() if re.match(r"\s+\d+\.\d+ \(", line)),
                     key=lambda line: -float(line.split()[0]))[1:9]
        print(f"\n{kind} x{layers}, --fff-gpu-pipeline, the most expensive passes:\n" + "\n".join(top))

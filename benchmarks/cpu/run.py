#!/usr/bin/env python3
"""CPU benchmark: fff's CPU pipeline (fff-run --repeat) side by side with
numpy (OpenBLAS from PyPI) and, where installed, torch eager and
torch.compile on the CPU.

    python3 -m pip install numpy threadpoolctl   # PyPI numpy, not Debian's
    python3 benchmarks/cpu/run.py [--fff-run build/bin/fff-run] [--quick]

Prints one table: median time per call of each implementation, the bytes/s or
FLOP/s it reaches, and fff's speed as a ratio to each baseline (>1: fff is
faster). Nothing here asserts a speed; the table is the result.
"""

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time

# OpenBLAS is slowed by OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE, which some of these
# machines set for old numpy builds; benchmark the baseline without them.
if [os.environ.pop(name, None) for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")] != [None, None]:
    os.execv(sys.executable, [sys.executable] + sys.argv)

import numpy as np

try:
    import torch
except ImportError:
    torch = None

here = os.path.dirname(os.path.abspath(__file__))
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--fff-run", default=os.path.join(here, "..", "..", "build", "bin", "fff-run"))
parser.add_argument("--quick", action="store_true", help="fewer repetitions and cases")
options = parser.parse_args()
# Calls per batch, for fff and the baselines alike (the dense FF at batch
# 4096 and more: 3): a median over 10 calls of a few milliseconds was
# easily moved by one slow second.
REPEAT = 3 if options.quick else 30
# This machine's speed drifts over seconds (other tenants): each case runs
# its implementations in turn, ROUNDS times, each round starting from the
# next one, and reports each one's median over the rounds, so that no
# implementation gets all the slow seconds, nor always goes first.
ROUNDS = 1 if options.quick else 3
# A batch of calls lasts at least this long, however fast the calls: a
# median over 30 calls of 0.4 ms was still moved by one slow moment.
MIN_BATCH_SECONDS = 0.02 if options.quick else 0.2
rng = np.random.default_rng(0)


def fff_time(mlir, func, args, num_results, repeat, flags=()):
    """Median ms per call reported by fff-run --repeat (compilation
    excluded), over `repeat` calls, or more where they would take less than
    MIN_BATCH_SECONDS (as a first batch measures)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.mlir")
        open(path, "w").write(mlir)
        command = [options.fff_run, path, "-e", func, *flags]
        for i, arg in enumerate(args):
            np.save(os.path.join(tmp, f"a{i}.npy"), arg)
            command += ["--arg", os.path.join(tmp, f"a{i}.npy")]
        for i in range(num_results):
            command += ["--out", os.path.join(tmp, f"o{i}.npy")]

        def batch(calls):
            out = subprocess.run(command + ["--repeat", str(calls)], check=True, capture_output=True,
                                 text=True).stdout
            return float(re.search(r"median ([0-9.]+) ms", out).group(1))

        ms = batch(repeat)
        calls = math.ceil(MIN_BATCH_SECONDS * 1e3 / max(ms, 1e-3))
        return batch(calls) if calls > repeat else ms


def median_ms(fn, repeat):
    """Median ms per call of `fn` over `repeat` calls after a warm-up, or
    over as many more as last MIN_BATCH_SECONDS."""
    fn()
    times = []
    begin = time.perf_counter()
    while len(times) < repeat or time.perf_counter() - begin < MIN_BATCH_SECONDS:
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def fff_timers(mlir, func, args, num_results, repeat, work):
    """fff's rows: as fff-run runs it, its buffers (results included) from
    fff's host buffer cache, so that each call reuses the pages the last one
    faulted in; and with malloc's, fresh pages for a large result on every
    call, as the baselines' allocators give them."""
    return [("fff", lambda: fff_time(mlir, func, args, num_results, repeat), work),
            ("fff, malloc'd buffers", lambda: fff_time(mlir, func, args, num_results, repeat,
                                                       ["--no-buffer-cache"]), work)]


def report(case, unit, timers):
    """timers: [(implementation, batch, work)], fff first, where batch()
    returns the median ms of one batch of calls. The batches run in turn,
    ROUNDS times, round k starting from implementation k. The rate column is
    each implementation's own work (bytes or FLOPs) per second."""
    rounds = []
    for k in range(ROUNDS):
        order = [(k + i) % len(timers) for i in range(len(timers))]
        times = {i: timers[i][1]() for i in order}
        rounds.append([times[i] for i in range(len(timers))])
    timings = [(name, sorted(r[i] for r in rounds)[ROUNDS // 2], work)
               for i, (name, _, work) in enumerate(timers)]
    fff_ms = timings[0][1]
    for i, (name, ms, work) in enumerate(timings):
        rate = work / (ms * 1e-3) / 1e9
        ratio = "" if i == 0 else f"{ms / fff_ms:.2f}x"
        print(f"| {case if i == 0 else '':<34} | {name:<21} | {ms:9.3f} | {rate:8.2f} {unit:<7} | {ratio:>7} |", flush=True)


def erf_gelu_np(v):
    # numpy has no erf; use the tanh form for the baseline (GELU is a small
    # share of the dense feedforward's time either way).
    return 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v * v * v)))


print("| case | implementation | ms/call | rate | fff speedup |")
print("|---|---|---:|---:|---:|")

# The machine's copy bandwidth, the norms' ceiling: a tensor as large as the
# largest norm's, and one as large as the 4096x768 rows (which the caches
# hold), read into a fresh tensor (as every implementation below allocates
# its result) and into an existing one.
if torch is not None:
    for rows, hidden in ((4096, 4096), (4096, 768)):
        big = torch.from_numpy(rng.standard_normal((rows, hidden)).astype(np.float32))
        into = torch.empty_like(big)
        moved = 2 * big.numel() * 4
        timings = [("torch clone", median_ms(lambda: big.clone(), REPEAT), moved),
                   ("torch copy_ (no alloc)", median_ms(lambda: into.copy_(big), REPEAT), moved)]
        for name, ms, work in timings:
            case = f"copy {rows}x{hidden} f32"
            print(f"| {case:<34} | {name:<21} | {ms:9.3f} | {work / (ms * 1e-3) / 1e9:8.2f} GB/s    |         |")


def bf16_bits(values):
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


# Norms: the shapes of the issue's table, f32 and bf16. Bytes moved: read x,
# write y.
NORM_SHAPES = [(1024, 768)] if options.quick else [(4096, 4096), (16384, 1024), (4096, 768)]
for (rows, hidden), dtype in [(shape, dtype) for shape in NORM_SHAPES for dtype in ("f32", "bf16")]:
    x = rng.standard_normal((rows, hidden)).astype(np.float32)
    g = rng.standard_normal(hidden).astype(np.float32)
    b = rng.standard_normal(hidden).astype(np.float32)
    if dtype == "bf16":  # fff-run takes bf16 as raw bits
        fx, fg, fb = bf16_bits(x), bf16_bits(g), bf16_bits(b)
    else:
        fx, fg, fb = x, g, b
    bytes_moved = 2 * fx.nbytes
    t = f"tensor<?x{hidden}x{dtype}>"
    p = f"tensor<{hidden}x{dtype}>"
    ln = f"func.func @ln(%x: {t}, %g: {p}, %b: {p}) -> {t} {{\n  %y = fff.layer_norm %x scale(%g : {p}) bias(%b : {p}) : {t}\n  return %y : {t}\n}}"
    rms = f"func.func @rms(%x: {t}, %g: {p}) -> {t} {{\n  %y = fff.rms_norm %x scale(%g : {p}) : {t}\n  return %y : {t}\n}}"
    baselines = {"layer_norm": [], "rms_norm": []}
    if torch is not None:
        torch_dtype = torch.float32 if dtype == "f32" else torch.bfloat16
        tx, tg, tb = (torch.from_numpy(a).to(torch_dtype) for a in (x, g, b))
        eager_ln = lambda: torch.nn.functional.layer_norm(tx, (hidden,), tg, tb)
        eager_rms = lambda: torch.nn.functional.rms_norm(tx, (hidden,), tg, 1e-5)
        compiled_ln = torch.compile(lambda x, g, b: torch.nn.functional.layer_norm(x, (hidden,), g, b))
        compiled_rms = torch.compile(lambda x, g: torch.nn.functional.rms_norm(x, (hidden,), g, 1e-5))
        baselines["layer_norm"] = [("torch eager", eager_ln), ("torch.compile", lambda: compiled_ln(tx, tg, tb))]
        baselines["rms_norm"] = [("torch eager", eager_rms), ("torch.compile", lambda: compiled_rms(tx, tg))]
    for op, func, args in (("layer_norm", "ln", [fx, fg, fb]), ("rms_norm", "rms", [fx, fg])):
        source = ln if op == "layer_norm" else rms
        timers = fff_timers(source, func, args, 1, REPEAT, bytes_moved)
        timers += [(name, lambda fn=fn: median_ms(fn, REPEAT), bytes_moved) for name, fn in baselines[op]]
        report(f"{op} {rows}x{hidden} {dtype}", "GB/s", timers)

# Elementwise work around the norms and tree layers: a residual add. Bytes
# moved: read two tensors, write one.
for rows, dtype in [(rows, dtype) for rows in ((1024,) if options.quick else (1024, 4096))
                    for dtype in ("f32", "bf16")]:
    x = rng.standard_normal((rows, 768)).astype(np.float32)
    r = rng.standard_normal((rows, 768)).astype(np.float32)
    fx, fr = (bf16_bits(a) for a in (x, r)) if dtype == "bf16" else (x, r)
    t = f"tensor<?x768x{dtype}>"
    add = f"func.func @add(%x: {t}, %r: {t}) -> {t} {{\n  %s = arith.addf %x, %r : {t}\n  return %s : {t}\n}}"
    timers = fff_timers(add, "add", [fx, fr], 1, REPEAT, 3 * fx.nbytes)
    if torch is not None:
        torch_dtype = torch.float32 if dtype == "f32" else torch.bfloat16
        tx, tr = (torch.from_numpy(a).to(torch_dtype) for a in (x, r))
        compiled_add = torch.compile(lambda a, b: a + b)
        timers += [("torch eager", lambda: median_ms(lambda: tx + tr, REPEAT), 3 * fx.nbytes),
                   ("torch.compile", lambda: median_ms(lambda: compiled_add(tx, tr), REPEAT), 3 * fx.nbytes)]
    report(f"residual add {rows}x768 {dtype}", "GB/s", timers)

# tree_ffn at UltraFastBERT-1x11's shape against the dense FF it replaces.
D, DEPTH = 768, 11
N = 2 ** (DEPTH + 1) - 1
w_in = (rng.standard_normal((1, N, D)) / math.sqrt(D)).astype(np.float32)
b_in = (rng.standard_normal((1, N)) * 0.1).astype(np.float32)
w_out = (rng.standard_normal((1, N, D)) / math.sqrt(DEPTH + 1)).astype(np.float32)
b_out = (rng.standard_normal(D) * 0.1).astype(np.float32)
w1 = (rng.standard_normal((D, 4 * D)) / math.sqrt(D)).astype(np.float32)
b1 = np.zeros(4 * D, np.float32)
w2 = (rng.standard_normal((4 * D, D)) / math.sqrt(4 * D)).astype(np.float32)
b2 = np.zeros(D, np.float32)
tree = (f"func.func @tree(%x: tensor<?x{D}xf32>, %wi: tensor<1x{N}x{D}xf32>, %bi: tensor<1x{N}xf32>, "
        f"%wo: tensor<1x{N}x{D}xf32>, %bo: tensor<{D}xf32>) -> tensor<?x{D}xf32> {{\n"
        f"  %y = fff.tree_ffn %x, %wi bias(%bi : tensor<1x{N}xf32>), %wo bias(%bo : tensor<{D}xf32>) {{depth = {DEPTH} : i64}}\n"
        f"         : tensor<?x{D}xf32>, tensor<1x{N}x{D}xf32>, tensor<1x{N}x{D}xf32>\n"
        f"  return %y : tensor<?x{D}xf32>\n}}")
for batch in ((1, 128) if options.quick else (1, 128, 4096, 16384)):
    x = rng.standard_normal((batch, D)).astype(np.float32)
    repeat = max(3, REPEAT if batch < 4096 else 3)
    if batch > 4096:
        repeat = 1
    dense_flops = 2 * batch * D * 4 * D * 2
    tree_flops = 2 * batch * (DEPTH + 1) * D * 2  # a dot and an axpy per level

    def np_dense():
        return erf_gelu_np(x @ w1 + b1) @ w2 + b2

    def np_fff():
        # UltraFastBERT's own formulation, vectorised: a gather and a batched
        # dot per level.
        y = np.tile(b_out, (batch, 1))
        node = np.zeros(batch, dtype=np.int64)
        for _ in range(DEPTH + 1):
            logit = np.einsum("bd,bd->b", x, w_in[0, node]) + b_in[0, node]
            y += erf_gelu_np(logit)[:, None] * w_out[0, node]
            node = 2 * node + 1 + (logit > 0)
        return y

    # Each implementation's rate is its own FLOP/s: the dense feedforward does
    # 4D / (depth+1) = 256x more arithmetic per token than the tree.
    # The baselines' repetitions are few where one call takes a quarter of a
    # second; fff-run's calls take milliseconds, and a median over a few
    # more of them is steadier.
    timers = fff_timers(tree, "tree", [x, w_in, b_in, w_out, b_out], 1, REPEAT, tree_flops)
    timers += [("numpy dense FF", lambda: median_ms(np_dense, repeat), dense_flops),
               ("numpy FFF (gathers)", lambda: median_ms(np_fff, repeat), tree_flops)]
    if torch is not None:
        tx, tw1, tw2 = map(torch.from_numpy, (x, w1, w2))
        timers.append(("torch dense FF (CPU)", lambda: median_ms(
            lambda: torch.nn.functional.gelu(tx @ tw1) @ tw2, repeat), dense_flops))
    report(f"tree_ffn D={D} depth={DEPTH} B={batch}", "GFLOP/s", timers)

# leaf_tree_ffn (the FFF paper's form) with the dense FF's training width:
# 2^8 leaves of 12 hidden units = 3072, as in the 768->3072->768 FF above.
LEAF_DEPTH, LEAF_WIDTH = 8, 12
LEAVES = 2**LEAF_DEPTH
node_w = (rng.standard_normal((LEAVES - 1, D)) / math.sqrt(D)).astype(np.float32)
node_b = (rng.standard_normal(LEAVES - 1) * 0.1).astype(np.float32)
leaf_w1 = (rng.standard_normal((LEAVES, D, LEAF_WIDTH)) / math.sqrt(D)).astype(np.float32)
leaf_b1 = (rng.standard_normal((LEAVES, LEAF_WIDTH)) * 0.1).astype(np.float32)
leaf_w2 = (rng.standard_normal((LEAVES, LEAF_WIDTH, D)) / math.sqrt(LEAF_WIDTH)).astype(np.float32)
leaf_b2 = (rng.standard_normal((LEAVES, D)) * 0.1).astype(np.float32)
leaf_types = [f"tensor<?x{D}xf32>", f"tensor<{LEAVES - 1}x{D}xf32>", f"tensor<{LEAVES - 1}xf32>",
              f"tensor<{LEAVES}x{D}x{LEAF_WIDTH}xf32>", f"tensor<{LEAVES}x{LEAF_WIDTH}xf32>",
              f"tensor<{LEAVES}x{LEAF_WIDTH}x{D}xf32>", f"tensor<{LEAVES}x{D}xf32>"]
leaf_names = ["x", "nw", "nb", "w1", "b1", "w2", "b2"]
leaf = (f"func.func @leaf({', '.join(f'%{n}: {t}' for n, t in zip(leaf_names, leaf_types))}) -> tensor<?x{D}xf32> {{\n"
        f"  %y = fff.leaf_tree_ffn {', '.join('%' + n for n in leaf_names)} {{depth = {LEAF_DEPTH} : i64}}\n"
        f"         : {', '.join(leaf_types)}\n"
        f"  return %y : tensor<?x{D}xf32>\n}}")
for batch in ((1, 128) if options.quick else (1, 128, 4096)):
    x = rng.standard_normal((batch, D)).astype(np.float32)
    repeat = max(3, REPEAT if batch < 4096 else 3)
    dense_flops = 2 * batch * D * 4 * D * 2
    leaf_flops = 2 * batch * (LEAF_DEPTH * D + 2 * D * LEAF_WIDTH)
    timers = fff_timers(leaf, "leaf", [x, node_w, node_b, leaf_w1, leaf_b1, leaf_w2, leaf_b2], 1, REPEAT,
                        leaf_flops)
    timers += [("numpy dense FF", lambda: median_ms(lambda: erf_gelu_np(x @ w1 + b1) @ w2 + b2, repeat), dense_flops)]
    if torch is not None:
        tx, tw1, tw2 = map(torch.from_numpy, (x, w1, w2))
        timers.append(("torch dense FF (CPU)", lambda: median_ms(
            lambda: torch.nn.functional.gelu(tx @ tw1) @ tw2, repeat), dense_flops))
    report(f"leaf_tree_ffn D={D} {LEAVES}x{LEAF_WIDTH} B={batch}", "GFLOP/s", timers)

print()
print(f"numpy {np.__version__}; torch {'not installed' if torch is None else torch.__version__}")
try:
    from threadpoolctl import threadpool_info
    for info in threadpool_info():
        print(f"BLAS: {info.get('internal_api')} {info.get('version')} {info.get('architecture')}, {info.get('num_threads')} threads")
except ImportError:
    pass

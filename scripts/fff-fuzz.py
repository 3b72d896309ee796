#!/usr/bin/env python3
"""A seeded mutation fuzzer for fff-opt: no input may crash it, hang it, or
get exit 0 with host code a pipeline did not fully lower.

It takes the MLIR of fff's lit tests and examples, cut into cases at
`// -----`, mutates each many times (shapes, element types, attributes,
SSA names, op names, deleted or repeated lines, truncation; static extents
past any memory and element types no pipeline lowers, in any position; the
case with its fff ops removed), and runs every
mutant through each pass mode: parse and verify, raising, shape checks,
fusion, both conversions, the CPU twins, and both pipelines. A run fails on

  - a signal, or an LLVM crash banner ("PLEASE submit a bug report",
    "LLVM ERROR", a stack dump), from any mutant in any mode;
  - a mutant that takes longer than the timeout;
  - a pipeline that exits 0 with anything left but LLVM dialect (and, for
    the GPU pipeline, compiled kernels and their launches).

A mutant that crashes MLIR's own parser is not fff's failure: when stock
mlir-opt (--reference-opt, Debian's) crashes on it too, with no pass at
all, it is counted and listed as an upstream crash instead, and does not
fail the run.

Mutants go to fff-opt in batches with --split-input-file, which reports
errors per case and goes on; a batch that fails is split until the
offending mutants are found, and each is written to the output directory
with its mode and seed so that it reproduces with one command.

    scripts/fff-fuzz.py --fff-opt build/bin/fff-opt --seed 1 --mutants 300
    scripts/fff-fuzz.py --fff-opt build/bin/fff-opt --seed 7 --mutants 3000 \\
        --out fuzz-failures            # a longer (nightly) run
    scripts/fff-fuzz.py --seeds 10 --mutants 1200 --out fuzz-failures
                                       # ten fresh seeds, each printed

Mutant i of seed s is the same on every machine, so a failure found at
night reproduces with the same --seed and --mutants.
"""

import argparse
import concurrent.futures
import os
import pathlib
import random
import re
import resource
import subprocess
import sys
import time

# name -> fff-opt flags. Raising and fusion read what the passes before them
# produce, as they do in the pipelines.
MODES = {
    "parse": [],
    "raise": ["--fff-raise-norms"],
    "shape-checks": ["--fff-insert-shape-checks"],
    "fuse": ["--fff-raise-norms", "--fff-fuse-norms"],
    "to-loops": ["--convert-fff-to-loops"],
    "to-gpu": ["--convert-fff-to-gpu"],
    "gpu-twin": ["--convert-fff-to-gpu=cpu-twin=1"],
    "cpu-pipeline": ["--fff-cpu-pipeline"],
    "gpu-pipeline": ["--fff-gpu-pipeline"],
}
PIPELINES = {"cpu-pipeline", "gpu-pipeline"}
CRASH_BANNERS = ("PLEASE submit a bug report", "LLVM ERROR", "Stack dump:",
                 "Assertion `", "terminate called")
SEPARATOR = "// -----"

TYPES = ["f32", "f16", "bf16", "f64", "i32", "i1", "index"]
# Element types no pipeline lowers (complex, narrow and odd floats) beside
# ones that have meanings only in some places (i1, index, i8, f64).
ELEMENT_TYPES = ["complex<f32>", "complex<f64>", "f8E4M3FN", "f8E5M2", "f4E2M1FN", "f6E2M3FN", "tf32",
                 "f80", "f128", "i1", "i8", "i64", "index", "f64", "bf16", "f16"]
# Static extents past any memory: products of them overflow int64_t.
HUGE_EXTENTS = ["2147483648", "4294967296", "4611686018427387904", "9223372036854775807",
                "281474976710656", "1099511627776"]
OPS = ["fff.layer_norm", "fff.rms_norm", "fff.tree_ffn", "fff.leaf_tree_ffn",
       "fff.fusion", "fff.yield", "linalg.generic", "arith.addf", "tensor.empty"]
EXTENTS = ["0", "1", "2", "3", "7", "8", "?", "768", "4095", "65536"]
NUMBERS = ["0", "1", "-1", "2", "3", "11", "20", "21", "63", "64", "-9223372036854775808",
           "4294967296", "1.0e-05", "0.0", "-1.0", "nan", "0x7FC00000"]
ATTRIBUTE_EDITS = [" return_stats", " normalized_rank 2", " normalized_rank 0",
                   " {depth = 0 : i64}", " {depth = 21 : i64}", " {epsilon = -1.0 : f32}",
                   " {activation = #fff.activation<silu>}"]


def load_corpus(roots, max_bytes):
    """Every `// -----` case of the .mlir files under `roots` (directories,
    or .mlir files themselves), without comments (RUN lines, CHECK lines and
    expected-error annotations), and the number of cases left out for being
    longer than `max_bytes`."""
    cases, skipped = [], 0
    for root in map(pathlib.Path, roots):
        for path in [root] if root.is_file() else sorted(root.rglob("*.mlir")):
            text = path.read_text()
            for chunk in text.split(SEPARATOR):
                lines = [l for l in chunk.splitlines() if not l.strip().startswith("//")]
                body = "\n".join(lines).strip()
                if not body or SEPARATOR in body:
                    continue
                if len(body) > max_bytes:
                    skipped += 1
                else:
                    cases.append(body + "\n")
    return cases, skipped


def mutate(text, rng):
    """One to three random edits of `text`."""
    for _ in range(rng.randint(1, 3)):
        text = rng.choice(MUTATIONS)(text, rng)
    return text


def _replace_match(text, pattern, rng, replacement):
    matches = list(re.finditer(pattern, text))
    if not matches:
        return text
    m = rng.choice(matches)
    return text[:m.start()] + replacement(m) + text[m.end():]


def change_extent(text, rng):
    return _replace_match(text, r"(?<=[<x])(\d+|\?)(?=x)", rng, lambda m: rng.choice(EXTENTS))


def rescale_extent(text, rng):
    """One extent changed in every type it appears in: shapes that still
    agree, for lowerings to take."""
    extents = sorted(set(re.findall(r"(?<=[<x])(\d+)(?=x)", text)))
    if not extents:
        return text
    old, new = rng.choice(extents), rng.choice(EXTENTS)
    return re.sub(rf"(?<=[<x]){old}(?=x)", new, text)


def retype_all(text, rng):
    """One element type changed everywhere, so that the module still verifies."""
    old, new = rng.choice(["f32", "f16", "bf16"]), rng.choice(["f32", "f16", "bf16", "f64"])
    return re.sub(rf"\b{old}\b", new, text)


def change_type(text, rng):
    return _replace_match(text, r"\b(f32|f16|bf16)\b", rng, lambda m: rng.choice(TYPES))


def huge_extent(text, rng):
    """One static extent, in any operand's or result's type, past any memory."""
    return _replace_match(text, r"(?<=[<x])(\d+|\?)(?=x)", rng, lambda m: rng.choice(HUGE_EXTENTS))


def retype_one(text, rng):
    """One element type, in one position, to a type the pipelines may not take."""
    return _replace_match(text, r"(?<=x)(f32|f16|bf16|i32|i64)(?=>)", rng, lambda m: rng.choice(ELEMENT_TYPES))


def retype_everywhere(text, rng):
    """One element type changed everywhere (the module still verifies) to a
    type the pipelines may not take."""
    old, new = rng.choice(["f32", "f16", "bf16"]), rng.choice(ELEMENT_TYPES)
    return re.sub(rf"(?<=x){old}(?=>)", new, text)


def without_fff_ops(text, rng):
    """The case with every line that names an fff op dropped: functions with
    no fff op at all (reshapes, linalg alone) for the pipelines."""
    lines = [l for l in text.splitlines() if "fff." not in l]
    return "\n".join(lines) + "\n"


def change_number(text, rng):
    return _replace_match(text, r"(?<![%#\w])-?\d+(\.\d+)?(e[-+]?\d+)?\b", rng,
                          lambda m: rng.choice(NUMBERS))


def change_value(text, rng):
    names = re.findall(r"%[\w]+", text)
    if not names:
        return text
    return _replace_match(text, r"%[\w]+", rng, lambda m: rng.choice(names))


def change_op(text, rng):
    return _replace_match(text, r"\b(fff|linalg|arith|tensor)\.\w+", rng, lambda m: rng.choice(OPS))


def add_attribute(text, rng):
    return _replace_match(text, r"(?<=fff\.\w)\w+ %\w+", rng, lambda m: m.group(0) + rng.choice(ATTRIBUTE_EDITS))


def drop_line(text, rng):
    lines = text.splitlines()
    if len(lines) > 1:
        del lines[rng.randrange(len(lines))]
    return "\n".join(lines) + "\n"


def repeat_line(text, rng):
    lines = text.splitlines()
    if lines:
        i = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[i])
    return "\n".join(lines) + "\n"


def swap_lines(text, rng):
    lines = text.splitlines()
    if len(lines) > 1:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines) + "\n"


def truncate(text, rng):
    return text[:rng.randrange(len(text) + 1)] + "\n"


def splice_token(text, rng):
    tokens = re.findall(r"[\w.%#@<>?]+|[(){}\[\],:=]", text)
    if not tokens:
        return text
    at = rng.randrange(len(text) + 1)
    return text[:at] + " " + rng.choice(tokens) + " " + text[at:]


MUTATIONS = [change_extent, rescale_extent, rescale_extent, retype_all, change_type,
             huge_extent, retype_one, retype_everywhere, without_fff_ops,
             change_number, change_number,
             change_value, change_op, add_attribute, drop_line, repeat_line, swap_lines,
             truncate, splice_token]


def make_mutants(corpus, seed, count):
    """Mutant i depends on the seed and i alone."""
    mutants = []
    for i in range(count):
        rng = random.Random(f"{seed}:{i}")
        mutants.append(mutate(rng.choice(corpus), rng))
    return mutants


def unlowered_ops(output, mode):
    """Ops a pipeline's output holds that are neither LLVM dialect nor (GPU)
    compiled kernels and their launches."""
    allowed = ("llvm.", "module", "gpu.binary", "gpu.launch_func") if mode == "gpu-pipeline" \
        else ("llvm.", "module")
    left = []
    for line in output.splitlines():
        statement = re.sub(r"^\s*(%[\w:#]+(, %[\w:#]+)* = )?", "", line)
        op = re.match(r'"?([a-z_]+\.[\w.]+)', statement)
        if op and not op.group(1).startswith(allowed) and not line.lstrip().startswith("^"):
            left.append(op.group(1))
    return left


class Failure(Exception):
    pass


# Address space per fff-opt or mlir-opt run. A mutant can name a huge static
# shape (tensor.from_elements of two values as tensor<2147483648xi64>), for
# which MLIR's parser allocates one type per element: without a cap, whether
# that ends in bad_alloc, an OOM kill or a slow success depends on the
# machine's memory, and the upstream check below could disagree with the run
# that found it.
MEMORY_CAP_BYTES = 8 << 30


def cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def run_batch(fff_opt, mode, mutants, timeout):
    """Runs `mutants` through `mode` in one fff-opt; raises Failure with the
    reason when the batch crashes, hangs or leaves unlowered code."""
    text = f"\n{SEPARATOR}\n".join(mutants)
    try:
        proc = subprocess.run([fff_opt, "--split-input-file", "--allow-unregistered-dialect",
                               *MODES[mode], "-"], input=text, capture_output=True,
                              text=True, timeout=timeout, errors="replace",
                              preexec_fn=cap_memory)
    except subprocess.TimeoutExpired:
        raise Failure(f"timeout after {timeout} s")
    if proc.returncode < 0:
        raise Failure(f"signal {-proc.returncode}")
    banner = next((b for b in CRASH_BANNERS if b in proc.stderr), None)
    if banner:
        raise Failure(f"crash banner '{banner}'")
    if mode in PIPELINES:
        left = unlowered_ops(proc.stdout, mode)
        if left:
            raise Failure(f"exit {proc.returncode} with {left[0]} left in the output")


def find_failures(fff_opt, mode, mutants, indices, timeout):
    """The (index, reason) of each failing mutant among `mutants`."""
    try:
        run_batch(fff_opt, mode, mutants, timeout)
        return []
    except Failure as failure:
        if len(mutants) == 1:
            return [(indices[0], str(failure))]
    half = len(mutants) // 2
    return (find_failures(fff_opt, mode, mutants[:half], indices[:half], timeout) +
            find_failures(fff_opt, mode, mutants[half:], indices[half:], timeout))


def crashes_upstream(reference_opt, mutant, timeout, tries=20):
    """Whether stock mlir-opt, parsing `mutant` as fff-opt did and running
    nothing, crashes. Some of MLIR's parser crashes corrupt the heap after an
    error and abort only now and then (seed 775338335, mutant 1021: a
    redefined block, 8 runs in 40), so it gets `tries` runs."""
    if not reference_opt or not os.path.exists(reference_opt):
        return False
    for _ in range(tries):
        try:
            proc = subprocess.run([reference_opt, "--split-input-file", "--allow-unregistered-dialect", "-"],
                                  input=mutant, capture_output=True, text=True, timeout=timeout, errors="replace",
                                  preexec_fn=cap_memory)
        except subprocess.TimeoutExpired:
            return False
        if proc.returncode < 0 or any(b in proc.stderr for b in CRASH_BANNERS):
            return True
    return False


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fff-opt", default=str(root / "build/bin/fff-opt"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=0,
                        help="run this many fresh seeds (each printed) instead of --seed: "
                             "for a longer run by hand")
    parser.add_argument("--mutants", type=int, default=300,
                        help="mutants, each run through every mode")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="comma-separated subset of: " + ", ".join(MODES))
    parser.add_argument("--batch", type=int, default=40, help="mutants per fff-opt run")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per batch")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--corpus", action="append",
                        help="a directory of .mlir inputs, or one .mlir file (default: test/ and examples/)")
    parser.add_argument("--out", help="directory for failing mutants")
    parser.add_argument("--max-case-bytes", type=int, default=65536,
                        help="leave out corpus cases longer than this (whole model exports, "
                             "whose mutants mostly hit their weights and cost seconds each)")
    parser.add_argument("--reference-opt", default="/usr/lib/llvm-22/bin/mlir-opt",
                        help="stock mlir-opt, to tell MLIR's own parser crashes from fff's")
    args = parser.parse_args()

    corpus, skipped = load_corpus(args.corpus or [root / "test", root / "examples"],
                                  args.max_case_bytes)
    if not corpus:
        parser.error(f"no .mlir cases under {', '.join(map(str, args.corpus))}")
    if args.seeds:
        # Fresh seeds from the OS's randomness, never a fixed list.
        seeds = [random.SystemRandom().randrange(10 ** 9) for _ in range(args.seeds)]
        print(f"fff-fuzz: seeds {' '.join(map(str, seeds))}", flush=True)
    else:
        seeds = [args.seed]
    failed = 0
    for seed in seeds:
        failed += run_seed(args, corpus, skipped, seed)
    if len(seeds) > 1:
        print(f"fff-fuzz: {len(seeds)} seeds, {args.mutants * len(args.modes.split(',')) * len(seeds)} cases, "
              f"{failed} failures")
    return 1 if failed else 0


def run_seed(args, corpus, skipped, seed):
    """Fuzzes one seed; returns its number of failures."""
    mutants = make_mutants(corpus, seed, args.mutants)
    modes = args.modes.split(",")
    start = time.monotonic()
    jobs = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for mode in modes:
            for first in range(0, len(mutants), args.batch):
                batch = mutants[first:first + args.batch]
                indices = list(range(first, first + len(batch)))
                jobs.append((mode, pool.submit(find_failures, args.fff_opt, mode, batch,
                                               indices, args.timeout)))
        found = [(mode, index, reason) for mode, job in jobs for index, reason in job.result()]
    upstream_mutants = {index for _, index, _ in found
                        if crashes_upstream(args.reference_opt, mutants[index], args.timeout)}
    failures = [f for f in found if f[1] not in upstream_mutants]
    elapsed = time.monotonic() - start

    cases = len(mutants) * len(modes)
    print(f"fff-fuzz: seed {seed}: {len(mutants)} mutants of {len(corpus)} corpus cases "
          f"({skipped} over {args.max_case_bytes} bytes left out) "
          f"through {len(modes)} modes: {cases} cases in {elapsed:.0f} s, "
          f"{len(failures)} failures", flush=True)
    for index in sorted(upstream_mutants):
        print(f"upstream: mutant {index} crashes stock mlir-opt's parser too (not counted)")
        if args.out:
            path = pathlib.Path(args.out) / f"seed{seed}-mutant{index}-upstream.mlir"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"// mlir-opt --allow-unregistered-dialect: crashes\n{mutants[index]}")
    for mode, index, reason in failures:
        print(f"FAIL mutant {index} ({mode}): {reason}")
        if args.out:
            path = pathlib.Path(args.out) / f"seed{seed}-mutant{index}-{mode}.mlir"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"// fff-opt {' '.join(MODES[mode])} --allow-unregistered-dialect: "
                            f"{reason}\n{mutants[index]}")
    return len(failures)


if __name__ == "__main__":
    sys.exit(main())

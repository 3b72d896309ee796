# Feeds fff-opt every truncation of, and seeded random byte corruptions of,
# valid fff IR. Each run must either succeed or fail with a diagnostic; a crash
# (signal, stack dump) or a silent failure fails the test.
#
# RUN: %python %s fff-opt %fff_src_root/examples/pre_ln_block.mlir %S/ops.mlir

import random
import subprocess
import sys

fff_opt, *inputs = sys.argv[1:]


def run(text: bytes) -> None:
    proc = subprocess.run([fff_opt, "--allow-unregistered-dialect", "-"],
                          input=text, capture_output=True, timeout=60)
    stderr = proc.stderr.decode(errors="replace")
    crashed = proc.returncode < 0 or "Stack dump" in stderr or "PLEASE submit" in stderr
    silent = proc.returncode != 0 and "error" not in stderr
    if crashed or silent or proc.returncode not in (0, 1):
        sys.exit(f"fff-opt misbehaved (exit {proc.returncode}) on input:\n"
                 f"{text.decode(errors='replace')}\n--- stderr ---\n{stderr}")


rng = random.Random(20261130)
runs = 0
for path in inputs:
    data = open(path, "rb").read()
    for cut in range(0, len(data), max(1, len(data) // 60)):
        run(data[:cut])
        runs += 1
    for _ in range(40):
        corrupted = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            corrupted[rng.randrange(len(corrupted))] = rng.choice(b"%<>(){}:,x0?#\"@ \x00\xff")
        run(bytes(corrupted))
        runs += 1
print(f"{runs} malformed inputs handled without a crash")

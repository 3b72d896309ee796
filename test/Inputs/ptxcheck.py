"""Helpers for fff's static PTX checks: lower a module with --fff-gpu-pipeline,
run ptxas -v on all its kernels at once, and read back each kernel's body and
resource report; plus a counter of named checks."""

import re
import subprocess
import sys
import tempfile


def compile_and_assemble(fff_opt, fff_translate, ptxas, mlir, arch="sm_90"):
    """Returns (ptx, ptxas succeeded, ptxas output, {kernel: body},
    {kernel: ptxas report}). All kernels share one gpu.module, so ptxas sees
    them together and reports each entry's resources under its name."""
    lowered = subprocess.run([fff_opt, f"--fff-gpu-pipeline=chip={arch}", "-"], input=mlir,
                             capture_output=True, text=True, check=True).stdout
    ptx = subprocess.run([fff_translate, "--fff-extract-ptx"], input=lowered,
                         capture_output=True, text=True, check=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        result = subprocess.run([ptxas, f"-arch={arch}", "-v", f.name, "-o", "/dev/null"],
                                capture_output=True, text=True)
    info = result.stdout + result.stderr
    reports = dict(re.findall(rf"Compiling entry function '(\w+)' for '{arch}'\n(.*?)(?=ptxas info    : Compiling|\Z)",
                              info, flags=re.S))
    bodies = dict(re.findall(r"\.entry (\w+)\((.*?)\n}\n", ptx, flags=re.S))
    return ptx, result.returncode == 0, info, bodies, reports


def spills(report):
    """(stack frame, spill stores, spill loads) bytes from a ptxas report, or
    None when it has none."""
    found = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", report)
    return tuple(int(n) for n in found.groups()) if found else None


def registers(report):
    found = re.search(r"Used (\d+) registers", report)
    return found.group(1) if found else "?"


def resource_line(name, report, width=66):
    """One printed line of a kernel's registers, shared memory and spills."""
    smem = re.search(r"(\d+) bytes smem", report)
    spilled = spills(report)
    return (f"{name:<{width}} {registers(report):>3} registers {smem.group(1) if smem else 0:>6} bytes smem  "
            f"{'no spills' if spilled == (0, 0, 0) else 'SPILLS'}")


class Checks:
    def __init__(self):
        self.failures, self.count = [], 0

    def check(self, ok, message):
        self.count += 1
        if not ok:
            self.failures.append(message)

    def finish(self):
        if self.failures:
            sys.exit(f"{len(self.failures)} of {self.count} checks failed:\n" + "\n".join(self.failures))
        print(f"all {self.count} checks passed")

"""Helpers for the emulator's tests: PTX modules around hand-written kernels,
elementwise kernels run over numpy arrays, exact rounding references, and a
counter of named checks."""

import ctypes
import math
import sys
from fractions import Fraction

import numpy as np

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"

# Registers every elementwise kernel declares: operands %a, %b, %c and result
# %d (then %e) in each width, predicates %p and %q.
REGISTERS = """
  .reg .pred %p, %q;
  .reg .b16 %a16, %b16, %c16, %d16, %e16;
  .reg .b32 %a32, %b32, %c32, %d32, %e32, %i, %i0, %i1;
  .reg .b64 %a64, %b64, %c64, %d64, %e64, %address, %offset;
"""


def module(*kernels):
    return HEADER + "\n".join(kernels)


def elementwise_kernel(body, input_widths, output_width, name="elementwise"):
    """A kernel whose thread i loads element i of each input (a, b, c: into
    %a<width>, ...), runs `body`, and stores %d<width> to element i of the
    output."""
    params = ", ".join([".param .u64 out"] + [f".param .u64 in{k}" for k in range(len(input_widths))])
    lines = [f".visible .entry {name}({params})", "{", REGISTERS,
             "  mov.u32 %i0, %ctaid.x;", "  mov.u32 %i1, %ntid.x;", "  mov.u32 %i, %tid.x;",
             "  mad.lo.u32 %i, %i0, %i1, %i;"]
    for k, width in enumerate(input_widths):
        lines += [f"  ld.param.u64 %address, [in{k}];",
                  f"  mul.wide.u32 %offset, %i, {width // 8};",
                  "  add.s64 %address, %address, %offset;",
                  f"  ld.global.b{width} %{'abc'[k]}{width}, [%address];"]
    lines += ["  " + line.strip() for line in body.strip().splitlines()]
    lines += ["  ld.param.u64 %address, [out];",
              f"  mul.wide.u32 %offset, %i, {output_width // 8};",
              "  add.s64 %address, %address, %offset;",
              f"  st.global.b{output_width} [%address], %d{output_width};",
              "  ret;", "}"]
    return "\n".join(lines)


def elementwise(driver, body, inputs, output_dtype, block=64):
    """Runs `body` once per element of the inputs (numpy arrays of one
    length) and returns the outputs as `output_dtype`."""
    inputs = [np.ascontiguousarray(x) for x in inputs]
    count = len(inputs[0])
    padded = -(-count // block) * block
    widths = [x.dtype.itemsize * 8 for x in inputs]
    output_width = np.dtype(output_dtype).itemsize * 8
    ptx = module(elementwise_kernel(body, widths, output_width))
    function = driver.function(driver.load(ptx), "elementwise")
    pointers = [driver.upload(np.concatenate([x, np.zeros(padded - count, x.dtype)])) for x in inputs]
    out = driver.alloc(padded * output_width // 8)
    driver.launch(function, (padded // block,), (block,), ctypes.c_uint64(out),
                  *[ctypes.c_uint64(p) for p in pointers])
    return driver.download(out, (padded,), output_dtype)[:count]


# Binary floating-point formats: (significand bits with the hidden one,
# smallest normal exponent, largest exponent).
F32 = (24, -126, 127)
F16 = (11, -14, 15)
BF16 = (8, -126, 127)


def round_exact(value, fmt, mode="rn"):
    """Rounds the rational `value` to the format: a Fraction, or +-inf as a
    float. Modes are PTX's: rn (nearest even), rz, rm (down), rp (up)."""
    precision, emin, emax = fmt
    value = Fraction(value)
    if value == 0:
        return Fraction(0)
    negative = value < 0
    magnitude = -value if negative else value
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1
    ulp = Fraction(2) ** (max(exponent, emin) - precision + 1)
    scaled = magnitude / ulp
    lower = math.floor(scaled)
    remainder = scaled - lower
    up_magnitude = {"rn": remainder > Fraction(1, 2) or (remainder == Fraction(1, 2) and lower % 2 == 1),
                    "rz": False,
                    "rm": negative and remainder > 0,
                    "rp": not negative and remainder > 0}[mode]
    result = (lower + up_magnitude) * ulp
    largest = (2 - Fraction(2) ** (1 - precision)) * Fraction(2) ** emax
    if result > largest:
        to_infinity = mode == "rn" or (mode == "rp" and not negative) or (mode == "rm" and negative)
        if to_infinity:
            return -math.inf if negative else math.inf
        result = largest
    return -result if negative else result


def f32_bits(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def bits_f32(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def exact_to_f32_bits(value, negative_zero=False):
    """The f32 bits of an exactly representable value (Fraction or inf)."""
    if value == 0:
        return 0x80000000 if negative_zero else 0
    return int(np.float32(float(value)).view(np.uint32))


def exact_to_narrow_bits(value, fmt, negative_zero=False):
    """The f16 or bf16 bits of an exactly representable value."""
    if value == 0:
        return 0x8000 if negative_zero else 0
    if fmt == F16:
        return int(np.float16(float(value)).view(np.uint16))
    return int(np.float32(float(value)).view(np.uint32)) >> 16


class Checks:
    def __init__(self):
        self.failures, self.count = [], 0

    def check(self, ok, message):
        self.count += 1
        if not ok:
            self.failures.append(message)

    def equal(self, actual, expected, message):
        """Compares integer bit patterns (arrays or scalars) exactly."""
        actual, expected = np.asarray(actual), np.asarray(expected)
        bad = np.flatnonzero(actual != expected)
        self.check(len(bad) == 0 and actual.shape == expected.shape,
                   f"{message}: {len(bad)} mismatches, first at "
                   f"{[(int(i), hex(int(actual.flat[i])), hex(int(expected.flat[i]))) for i in bad[:4]]}")

    def finish(self):
        if self.failures:
            sys.exit(f"{len(self.failures)} of {self.count} checks failed:\n" + "\n".join(self.failures))
        print(f"all {self.count} checks passed")

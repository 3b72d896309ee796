# The emulator's conversions against exact references: f32 to f16 and bf16 in
# all four rounding directions (ties, overflow, subnormals, NaN), packed x2
# conversions (the first source in the upper half), exhaustive widening of
# all 65536 f16 and bf16 values, bf16 additions rounded once from the exact
# sum, saturating float-to-integer conversions, integer rounding of floats,
# integer to float, and integer widening, narrowing and saturation.
#
# REQUIRES: numpy
# RUN: %python %s %emulator | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import math
import os
import sys
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from cudadriver import Driver
from emulatortest import (BF16, F16, F32, Checks, bits_f32, elementwise, exact_to_f32_bits,
                          exact_to_narrow_bits, f32_bits, round_exact)

driver = Driver(sys.argv[1])
checks = Checks()
rng = np.random.default_rng(7)
run = lambda body, inputs, dtype: elementwise(driver, body, inputs, dtype)


def narrow_reference(values, fmt, mode):
    result = []
    for value in values.tolist():
        if math.isnan(value):
            result.append(0x7FFF)
        elif math.isinf(value):
            result.append(exact_to_narrow_bits(value, fmt))
        else:
            result.append(exact_to_narrow_bits(round_exact(Fraction(value), fmt, mode), fmt,
                                               negative_zero=math.copysign(1, value) < 0))
    return np.array(result, np.uint16)


# f32 values around every interesting boundary of both formats: ties at
# several magnitudes, the overflow thresholds, subnormal ties, and random
# bit patterns.
special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0,
           1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-8, 1 + 3 * 2**-8,  # ties: even below, odd below
           65504.0, 65519.0, 65520.0, -65520.0, 1e6,                 # f16 largest, overflow threshold
           2.0**-24, 2.0**-25, 3 * 2.0**-25, 2.0**-26, -(2.0**-25),  # f16 subnormal ties
           2.0**-133, 2.0**-134, 3 * 2.0**-134, 2.0**-149,          # bf16 subnormals
           float(bits_f32(0x7F7FFFFF)), float(bits_f32(0x7F7F8000)), float(bits_f32(0x7F7F7FFF))]
values = np.concatenate([np.array(special, np.float32),
                         bits_f32(rng.integers(0, 2**32, 1500, dtype=np.uint64).astype(np.uint32)),
                         (rng.standard_normal(500) * 100).astype(np.float32)])
for name, fmt in (("f16", F16), ("bf16", BF16)):
    for mode in ("rn", "rz", "rm", "rp"):
        got = run(f"cvt.{mode}.{name}.f32 %d16, %a32;", [values], np.uint16)
        checks.equal(got, narrow_reference(values, fmt, mode), f"cvt.{mode}.{name}.f32")

# Packed: d = {cvt(a) upper, cvt(b) lower}.
a, b = values[:600], values[600:1200]
for name, fmt in (("f16x2", F16), ("bf16x2", BF16)):
    got = run(f"cvt.rn.{name}.f32 %d32, %a32, %b32;", [a, b], np.uint32)
    expected = (narrow_reference(a, fmt, "rn").astype(np.uint32) << 16) | narrow_reference(b, fmt, "rn")
    checks.equal(got, expected, f"cvt.rn.{name}.f32")

# Widening is exact, for every value.
every = np.arange(65536, dtype=np.uint32).astype(np.uint16)
got = run("cvt.f32.f16 %d32, %a16;", [every], np.uint32)
expected = f32_bits(every.view(np.float16).astype(np.float32))
finite = ~np.isnan(every.view(np.float16))
checks.equal(got[finite], expected[finite], "cvt.f32.f16 of every finite f16")
checks.check(np.all(np.isnan(got[~finite].view(np.float32))), "cvt.f32.f16 keeps NaN NaN")
checks.equal(run("cvt.f32.bf16 %d32, %a16;", [every], np.uint32), every.astype(np.uint32) << 16,
             "cvt.f32.bf16 of every bf16")

# add.rn.bf16 and .bf16x2: the exact sum, rounded once.
def bf16_values(count):
    bits = rng.integers(0, 2**16, count, dtype=np.uint32).astype(np.uint16)
    bits = bits[(bits & 0x7F80) != 0x7F80]  # finite
    return bits


def bf16_add_reference(x, y):
    result = []
    for p, q in zip(x, y):
        u = Fraction(float(np.uint32(int(p) << 16).view(np.float32)))
        v = Fraction(float(np.uint32(int(q) << 16).view(np.float32)))
        exact = u + v
        negative_zero = exact == 0 and (p & 0x8000) and (q & 0x8000)
        result.append(exact_to_narrow_bits(round_exact(exact, BF16, "rn"), BF16, negative_zero))
    return np.array(result, np.uint16)


x, y = bf16_values(3000)[:1000], bf16_values(3000)[:1000]
# Close exponents make ties and carries; force some.
y[:300] = (x[:300] & 0xFF80) | rng.integers(0, 128, 300).astype(np.uint16)
checks.equal(run("add.rn.bf16 %d16, %a16, %b16;", [x, y], np.uint16), bf16_add_reference(x, y), "add.rn.bf16")
pairs_x = (x[:500].astype(np.uint32) << 16) | x[500:1000]
pairs_y = (y[:500].astype(np.uint32) << 16) | y[500:1000]
expected = (bf16_add_reference(x[:500], y[:500]).astype(np.uint32) << 16) | bf16_add_reference(x[500:], y[500:])
checks.equal(run("add.rn.bf16x2 %d32, %a32, %b32;", [pairs_x, pairs_y], np.uint32), expected, "add.rn.bf16x2")

# Float to integer: round, then saturate; NaN becomes 0.
floats = np.array([0.0, -0.5, 2.5, 3.5, -2.5, 1e10, -1e10, np.inf, -np.inf, np.nan, 2147483520.0,
                   -2147483648.0, 4294967040.0, 0.99999994], np.float32)
for mode, rounder in (("rzi", math.trunc), ("rni", round), ("rmi", math.floor), ("rpi", math.ceil)):
    for name, low, high in (("s32", -2**31, 2**31 - 1), ("u32", 0, 2**32 - 1), ("s16", -2**15, 2**15 - 1)):
        expected = []
        for value in floats.tolist():
            if math.isnan(value):
                expected.append(0)
                continue
            integral = high + 1 if value == math.inf else low - 1 if value == -math.inf else rounder(value)
            expected.append(min(max(integral, low), high) & 0xFFFFFFFF)
        got = run(f"cvt.{mode}.{name}.f32 %d32, %a32;" if name != "s16" else
                  f"cvt.{mode}.{name}.f32 %d16, %a32;\ncvt.s32.s16 %d32, %d16;", [floats], np.uint32)
        checks.equal(got, expected, f"cvt.{mode}.{name}.f32")
saturated = []
for value in floats.tolist():
    if math.isnan(value):
        saturated.append(0)
    elif math.isinf(value):
        saturated.append(2**63 - 1 if value > 0 else 2**63)
    else:
        saturated.append(math.trunc(value) & (2**64 - 1))
checks.equal(run("cvt.rzi.s64.f32 %d64, %a32;", [floats], np.uint64), np.array(saturated, np.uint64),
             "cvt.rzi.s64.f32")

# Integral rounding of floats, in float.
got = run("cvt.rmi.f32.f32 %d32, %a32;", [floats], np.uint32)
expected = []
for value in floats.tolist():
    if math.isnan(value):
        expected.append(0x7FFFFFFF)
    elif math.isinf(value) or value == 0:
        expected.append(int(np.float32(value).view(np.uint32)))
    else:
        floor = math.floor(value)
        expected.append(0x80000000 if floor == 0 and value < 0 else int(np.float32(floor).view(np.uint32)))
checks.equal(got, expected, "cvt.rmi.f32.f32")
checks.equal(run("cvt.rni.f32.f32 %d32, %a32;", [np.array([0.5, 1.5, 2.5, -0.5], np.float32)], np.uint32),
             f32_bits([0.0, 2.0, 2.0, -0.0]), "cvt.rni.f32.f32 ties to even")

# Integer to float, rounded as named.
integers = np.array([0, 1, 2**24 + 1, 2**53 + 1, 2**63 - 1, 2**64 - 1, 2**31 + 2**7, 3 * 2**62 + 2**39],
                    np.uint64)
for mode in ("rn", "rz", "rm", "rp"):
    checks.equal(run(f"cvt.{mode}.f32.u64 %d32, %a64;", [integers], np.uint32),
                 [exact_to_f32_bits(round_exact(int(v), F32, mode)) for v in integers], f"cvt.{mode}.f32.u64")
    signed = integers.view(np.int64)
    checks.equal(run(f"cvt.{mode}.f32.s64 %d32, %a64;", [integers], np.uint32),
                 [exact_to_f32_bits(round_exact(int(v), F32, mode)) for v in signed], f"cvt.{mode}.f32.s64")
small = np.array([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 16777217], np.uint32)
checks.equal(run("cvt.rn.f32.s32 %d32, %a32;", [small], np.uint32),
             [exact_to_f32_bits(round_exact(int(v), F32, "rn")) for v in small.view(np.int32)], "cvt.rn.f32.s32")
checks.equal(run("cvt.rn.f32.u32 %d32, %a32;", [small], np.uint32),
             [exact_to_f32_bits(round_exact(int(v), F32, "rn")) for v in small], "cvt.rn.f32.u32")

# Integer widening, narrowing and saturation.
words = np.array([0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x12345678, 0x80000000, 0xFFFFFFFF], np.uint32)
checks.equal(run("cvt.u64.u32 %d64, %a32;", [words], np.uint64), words.astype(np.uint64), "cvt.u64.u32")
checks.equal(run("cvt.s64.s32 %d64, %a32;", [words], np.uint64),
             words.view(np.int32).astype(np.int64).view(np.uint64), "cvt.s64.s32")
checks.equal(run("cvt.u16.u32 %d16, %a32;", [words], np.uint16), (words & 0xFFFF).astype(np.uint16), "cvt.u16.u32")
checks.equal(run("cvt.u16.u32 %d16, %a32;\ncvt.u32.u16 %d32, %d16;", [words], np.uint32), words & 0xFFFF,
             "cvt.u32.u16")
checks.equal(run("cvt.u16.u32 %d16, %a32;\ncvt.s32.s16 %d32, %d16;", [words], np.uint32),
             (words & 0xFFFF).astype(np.uint16).view(np.int16).astype(np.int32).view(np.uint32), "cvt.s32.s16")
longs = np.array([0, 5, 2**40 + 7, 2**64 - 1], np.uint64)
checks.equal(run("cvt.u32.u64 %d32, %a64;", [longs], np.uint32), (longs & 0xFFFFFFFF).astype(np.uint32),
             "cvt.u32.u64")
checks.equal(run("cvt.u16.u64 %d16, %a64;", [longs], np.uint16), (longs & 0xFFFF).astype(np.uint16), "cvt.u16.u64")
checks.equal(run("cvt.sat.u16.s32 %d16, %a32;", [words], np.uint16),
             np.clip(words.view(np.int32).astype(np.int64), 0, 0xFFFF).astype(np.uint16), "cvt.sat.u16.s32")
checks.equal(run("cvt.sat.s32.u64 %d32, %a64;", [longs], np.uint32),
             np.array([min(int(v), 2**31 - 1) for v in longs], np.int64).astype(np.uint32), "cvt.sat.s32.u64")

checks.finish()

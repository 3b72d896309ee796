# The emulator's integer and bit instructions against Python's integers:
# mul.lo/.hi/.wide and mad in 16, 32 and 64 bits, signed and unsigned
# division and remainder (negative operands, division by zero and MIN/-1),
# min/max, neg/abs, shifts by the width or more, logic ops, setp's signed and
# unsigned orderings, selp, mov packing and unpacking, and prmt's byte
# permutes.
#
# REQUIRES: numpy
# RUN: %python %s %emulator | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from cudadriver import Driver
from emulatortest import Checks, elementwise

driver = Driver(sys.argv[1])
checks = Checks()
rng = np.random.default_rng(3)
UNSIGNED = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def operands(bits, count=200):
    """Random values plus the edges: 0, 1, -1, MIN, MAX and their
    neighbours."""
    mask = (1 << bits) - 1
    edges = [0, 1, 2, mask, mask - 1, 1 << (bits - 1), (1 << (bits - 1)) - 1, (1 << (bits - 1)) + 1, 7, mask - 6]
    values = edges + [int(v) & mask for v in rng.integers(0, 2**63, count, dtype=np.int64)]
    return np.array(values, UNSIGNED[bits])


def signed(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def check(body, inputs, result_bits, reference, name, signed_inputs=False):
    bits = [x.dtype.itemsize * 8 for x in inputs]
    got = elementwise(driver, body, inputs, UNSIGNED[result_bits])
    expected = []
    for values in zip(*[x.tolist() for x in inputs]):
        if signed_inputs:
            values = [signed(v, b) for v, b in zip(values, bits)]
        expected.append(reference(*values) & ((1 << result_bits) - 1))
    checks.equal(got, np.array(expected, UNSIGNED[result_bits]), name)


def truncating_division(a, b):
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


for bits in (16, 32, 64):
    a, b, c = operands(bits), np.roll(operands(bits), 3), np.roll(operands(bits), 7)
    t = lambda kind: f"{kind}{bits}"
    r = lambda name: f"%{name}{bits}"
    half = bits - 1
    check(f"add.{t('s')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits, lambda x, y: x + y, f"add.s{bits}")
    check(f"sub.{t('s')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits, lambda x, y: x - y, f"sub.s{bits}")
    check(f"mul.lo.{t('s')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits, lambda x, y: x * y, f"mul.lo.s{bits}")
    check(f"mul.hi.{t('u')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits, lambda x, y: (x * y) >> bits,
          f"mul.hi.u{bits}")
    check(f"mul.hi.{t('s')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits, lambda x, y: (x * y) >> bits,
          f"mul.hi.s{bits}", signed_inputs=True)
    check(f"mad.lo.{t('s')} {r('d')}, {r('a')}, {r('b')}, {r('c')};", [a, b, c], bits,
          lambda x, y, z: x * y + z, f"mad.lo.s{bits}")
    check(f"mad.hi.{t('u')} {r('d')}, {r('a')}, {r('b')}, {r('c')};", [a, b, c], bits,
          lambda x, y, z: ((x * y) >> bits) + z, f"mad.hi.u{bits}")
    check(f"div.{t('u')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits,
          lambda x, y: x // y if y else -1, f"div.u{bits}")
    check(f"rem.{t('u')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits,
          lambda x, y: x % y if y else x, f"rem.u{bits}")
    check(f"div.{t('s')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits,
          lambda x, y: truncating_division(x, y) if y else -1, f"div.s{bits}", signed_inputs=True)
    check(f"rem.{t('s')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits,
          lambda x, y: x - truncating_division(x, y) * y if y else x, f"rem.s{bits}", signed_inputs=True)
    check(f"min.{t('s')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits, min, f"min.s{bits}", signed_inputs=True)
    check(f"max.{t('s')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits, max, f"max.s{bits}", signed_inputs=True)
    check(f"min.{t('u')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits, min, f"min.u{bits}")
    check(f"max.{t('u')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits, max, f"max.u{bits}")
    check(f"neg.{t('s')} {r('d')}, {r('a')};", [a], bits, lambda x: -x, f"neg.s{bits}")
    check(f"abs.{t('s')} {r('d')}, {r('a')};", [a], bits, abs, f"abs.s{bits}", signed_inputs=True)
    check(f"and.{t('b')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits, lambda x, y: x & y, f"and.b{bits}")
    check(f"or.{t('b')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits, lambda x, y: x | y, f"or.b{bits}")
    check(f"xor.{t('b')} {r('d')}, {r('a')}, {r('b')};", [a, b], bits, lambda x, y: x ^ y, f"xor.b{bits}")
    check(f"not.{t('b')} {r('d')}, {r('a')};", [a], bits, lambda x: ~x, f"not.b{bits}")
    # Shift amounts are u32; those of the width or more saturate.
    amounts = np.array([0, 1, 5, half, bits, bits + 1, 200, 2**32 - 1] * 25, np.uint32)
    shifted = operands(bits)[:len(amounts)]
    check(f"shl.{t('b')} {r('d')}, {r('a')}, %b32;", [shifted, amounts], bits,
          lambda x, n: x << n if n < bits else 0, f"shl.b{bits}")
    check(f"shr.{t('u')} {r('d')}, {r('a')}, %b32;", [shifted, amounts], bits,
          lambda x, n: x >> n if n < bits else 0, f"shr.u{bits}")
    check(f"shr.{t('s')} {r('d')}, {r('a')}, %b32;", [shifted, amounts], bits,
          lambda x, n: signed(x, bits) >> min(n, bits - 1), f"shr.s{bits}")
    for compare, reference, is_signed in (("lt", lambda x, y: x < y, True), ("ge", lambda x, y: x >= y, True),
                                          ("lo", lambda x, y: x < y, False), ("hs", lambda x, y: x >= y, False),
                                          ("ls", lambda x, y: x <= y, False), ("hi", lambda x, y: x > y, False)):
        kind = "s" if is_signed else "u"
        check(f"setp.{compare}.{kind}{bits} %p, {r('a')}, {r('b')};\nselp.b32 %d32, 1, 0, %p;", [a, b], 32,
              lambda x, y: int(reference(x, y)), f"setp.{compare}.{kind}{bits}", signed_inputs=is_signed)
    check(f"setp.ne.b{bits} %p, {r('a')}, {r('b')};\nselp.b{bits} {r('d')}, {r('a')}, {r('b')}, %p;", [a, a], bits,
          lambda x, y: y, f"setp.ne.b{bits} and selp.b{bits}")

for bits, wide in ((16, 32), (32, 64)):
    a, b = operands(bits), np.roll(operands(bits), 5)
    c = operands(wide)[:len(a)]
    check(f"mul.wide.u{bits} %d{wide}, %a{bits}, %b{bits};", [a, b], wide, lambda x, y: x * y, f"mul.wide.u{bits}")
    check(f"mul.wide.s{bits} %d{wide}, %a{bits}, %b{bits};", [a, b], wide, lambda x, y: x * y,
          f"mul.wide.s{bits}", signed_inputs=True)
    check(f"mad.wide.u{bits} %d{wide}, %a{bits}, %b{bits}, %c{wide};", [a, b, c], wide,
          lambda x, y, z: x * y + z, f"mad.wide.u{bits}")

# Immediates are two's complement at the operand's width.
a16 = operands(16)
check("mul.hi.u16 %d16, %a16, -3;", [a16], 16, lambda x: (x * 0xFFFD) >> 16, "mul.hi.u16 by -3")
check("mad.lo.s64 %d64, %a64, 3200, -7;", [operands(64)], 64, lambda x: x * 3200 - 7, "mad.lo.s64 immediates")

# Predicate logic, each result weighted into one word.
a, b = operands(32), np.roll(operands(32), 1)
check("""setp.lt.u32 %p, %a32, %b32;
and.b32 %e32, %a32, 1;
setp.ne.b32 %q, %e32, 0;
and.pred %p, %p, %q;
selp.b32 %d32, 1, 0, %p;
setp.lt.u32 %p, %a32, %b32;
or.pred %p, %p, %q;
selp.b32 %e32, 2, 0, %p;
add.s32 %d32, %d32, %e32;
setp.lt.u32 %p, %a32, %b32;
xor.pred %p, %p, %q;
selp.b32 %e32, 4, 0, %p;
add.s32 %d32, %d32, %e32;
not.pred %p, %q;
selp.b32 %e32, 8, 0, %p;
add.s32 %d32, %d32, %e32;""", [a, b], 32,
      lambda x, y: (x < y and x & 1) + 2 * (x < y or x & 1) + 4 * ((x < y) != (x & 1)) + 8 * (not x & 1),
      "and/or/xor/not.pred")
check("setp.lt.u32 %p, %a32, %b32;\nnot.pred %q, %p;\nmov.pred %p, %q;\nselp.u32 %d32, 10, 20, %p;",
      [a, b], 32, lambda x, y: 20 if x < y else 10, "not.pred and mov.pred")

# mov packs and unpacks: the first element is the least significant.
words = operands(32)
check("mov.b32 {%a16, %b16}, %a32;\nmov.b32 %d32, {%b16, %a16};", [words], 32,
      lambda x: ((x & 0xFFFF) << 16) | (x >> 16), "mov.b32 unpack and pack")
check("mov.b32 {%a16, _}, %a32;\ncvt.u32.u16 %d32, %a16;", [words], 32, lambda x: x & 0xFFFF, "mov.b32 with a sink")
longs = operands(64)
check("mov.b64 {%a32, %b32}, %a64;\nmov.b64 %d64, {%b32, %a32};", [longs], 64,
      lambda x: ((x & 0xFFFFFFFF) << 32) | (x >> 32), "mov.b64 unpack and pack")
check("mov.b64 {%a16, %b16, %c16, %d16}, %a64;\nmov.b64 %d64, {%d16, %c16, %b16, %a16};", [longs], 64,
      lambda x: sum(((x >> (16 * i)) & 0xFFFF) << (16 * (3 - i)) for i in range(4)), "mov.b64 in four parts")


def permuted(a, b, selectors):
    """prmt.b32's default mode, byte by byte: a's bytes are 0-3, b's 4-7;
    bit 3 of a selector replicates the chosen byte's sign bit."""
    source = a | (b << 32)
    result = 0
    for i in range(4):
        nibble = (selectors >> (4 * i)) & 0xF
        byte = (source >> (8 * (nibble & 7))) & 0xFF
        if nibble & 8:
            byte = 0xFF if byte & 0x80 else 0
        result |= byte << (8 * i)
    return result


# Random selectors (sign replication included), and the byte extracts
# LLVM emits for an i8 vector element (0x777N: byte N, zeros above it).
a, b = operands(32), np.roll(operands(32), 2)
selectors = np.array([0x7770, 0x7771, 0x7772, 0x7773, 0x3210, 0x7654, 0x0123, 0x8888, 0xBA98, 0x4567] * 21
                     )[:len(a)].astype(np.uint32)
selectors[::3] = rng.integers(0, 2**32, len(selectors[::3]), dtype=np.uint64).astype(np.uint32)
check("prmt.b32 %d32, %a32, %b32, %c32;", [a, b, selectors], 32, permuted, "prmt.b32")
check("prmt.b32 %d32, %a32, 0, 0x7772;", [a], 32, lambda x: (x >> 16) & 0xFF, "prmt.b32 with immediates")

checks.finish()

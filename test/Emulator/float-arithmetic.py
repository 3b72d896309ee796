# The emulator's f32 and f64 arithmetic against exact references: rounding
# as each instruction names it (fma rounds once, mul then add twice; .rz, .rm
# and .rp), subnormals kept (and flushed by .ftz), canonical NaN results,
# max/min with and without .NaN, signed zeros, .sat, div/rcp/sqrt to nearest,
# and setp's ordered and unordered comparisons.
#
# REQUIRES: numpy
# RUN: %python %s %emulator | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import math
import sys
from fractions import Fraction

import numpy as np

sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "Inputs"))
from cudadriver import Driver
from emulatortest import F32, Checks, bits_f32, elementwise, exact_to_f32_bits, f32_bits, round_exact

driver = Driver(sys.argv[1])
checks = Checks()
rng = np.random.default_rng(13)
NAN = 0x7FFFFFFF  # the canonical NaN NVIDIA GPUs produce


def f32(body, *inputs):
    return elementwise(driver, body, [np.asarray(x, np.float32) for x in inputs], np.uint32)


def reference(op, mode, *operands):
    """Bits of op(operands) rounded once to f32 in `mode`, from exact
    rationals; NaN and infinities by IEEE rules."""
    result = []
    for values in zip(*operands):
        values = [float(v) for v in values]
        if any(math.isnan(v) or math.isinf(v) for v in values):
            exact = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
                     "fma": lambda a, b, c: a * b + c, "div": lambda a, b: a / b if b else math.nan}[op](*values)
            result.append(NAN if math.isnan(exact) else exact_to_f32_bits(exact))
            continue
        q = [Fraction(v) for v in values]
        exact = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
                 "fma": lambda a, b, c: a * b + c, "div": lambda a, b: a / b}[op](*q)
        # Exact zeros here come from cancellation: +0, or -0 rounding down.
        negative_zero = exact == 0 and mode == "rm"
        result.append(exact_to_f32_bits(round_exact(exact, F32, mode), negative_zero))
    return np.array(result, np.uint32)


# fma rounds once; mul then add rounds twice. (1 + 2^-12)^2 - (1 + 2^-11) is
# 2^-24 exactly, a tie that mul.rn.f32 rounds away.
a, b, c = [1 + 2**-12], [1 + 2**-12], [-(1 + 2**-11)]
checks.equal(f32("fma.rn.f32 %d32, %a32, %b32, %c32;", a, b, c), f32_bits([2**-24]), "fma rounds once")
checks.equal(f32("mul.rn.f32 %e32, %a32, %b32;\nadd.rn.f32 %d32, %e32, %c32;", a, b, c), [0],
             "mul then add rounds twice")

# Random operands over a wide range of exponents, and directed rounding.
count = 512
x = (rng.standard_normal(count) * np.exp2(rng.integers(-30, 30, count))).astype(np.float32)
y = (rng.standard_normal(count) * np.exp2(rng.integers(-30, 30, count))).astype(np.float32)
z = (rng.standard_normal(count) * np.exp2(rng.integers(-30, 30, count))).astype(np.float32)
for mode in ("rn", "rz", "rm", "rp"):
    for op in ("add", "sub", "mul", "div"):
        checks.equal(f32(f"{op}.{mode}.f32 %d32, %a32, %b32;", x, y), reference(op, mode, x, y), f"{op}.{mode}.f32")
    checks.equal(f32(f"fma.{mode}.f32 %d32, %a32, %b32, %c32;", x, y, z), reference("fma", mode, x, y, z),
                 f"fma.{mode}.f32")
    checks.equal(f32(f"mad.{mode}.f32 %d32, %a32, %b32, %c32;", x, y, z), reference("fma", mode, x, y, z),
                 f"mad.{mode}.f32")
# Cancellation: products that cancel the addend exactly leave tiny remainders.
near = np.float32(1) + np.float32(2**-23) * rng.integers(0, 64, count).astype(np.float32)
checks.equal(f32("fma.rn.f32 %d32, %a32, %b32, %c32;", near, near, -near * near),
             reference("fma", "rn", near, near, -near * near), "fma.rn.f32 remainders")

# div, rcp and sqrt to nearest are IEEE's, as numpy's f32 operations are.
positive = np.abs(x) + np.float32(1e-30)
with np.errstate(all="ignore"):
    checks.equal(f32("rcp.rn.f32 %d32, %a32;", x), f32_bits(np.float32(1) / x), "rcp.rn.f32")
    checks.equal(f32("sqrt.rn.f32 %d32, %a32;", positive), f32_bits(np.sqrt(positive)), "sqrt.rn.f32")
specials = np.array([0.0, -0.0, np.inf, -np.inf, -1.0, 4.0, 2.0**-149, np.nan], np.float32)
checks.equal(f32("sqrt.rn.f32 %d32, %a32;", specials),
             [0, 0x80000000, 0x7F800000, NAN, NAN, 0x40000000, 0x1A3504F3, NAN], "sqrt.rn.f32 specials")
checks.equal(f32("rcp.rn.f32 %d32, %a32;", specials),
             [0x7F800000, 0xFF800000, 0, 0x80000000, 0xBF800000, 0x3E800000, 0x7F800000, NAN],
             "rcp.rn.f32 specials")
checks.equal(f32("div.rn.f32 %d32, %a32, %b32;", [0.0, 1.0, -1.0, np.inf], [0.0, 0.0, 0.0, np.inf]),
             [NAN, 0x7F800000, 0xFF800000, NAN], "div.rn.f32 by zero and inf/inf")

# NaN results are canonical, whatever the NaN operands were.
payload_nan = bits_f32([0x7FC00001, 0xFFC12345])
checks.equal(f32("add.rn.f32 %d32, %a32, %b32;", payload_nan, [1.0, 1.0]), [NAN, NAN], "add of NaN")
checks.equal(f32("add.rn.f32 %d32, %a32, %b32;", [np.inf], [-np.inf]), [NAN], "inf - inf")
checks.equal(f32("mul.rn.f32 %d32, %a32, %b32;", [0.0], [np.inf]), [NAN], "0 * inf")
# neg and abs change the sign bit only.
checks.equal(f32("neg.f32 %d32, %a32;", payload_nan), [0xFFC00001, 0x7FC12345], "neg.f32 of NaN")
checks.equal(f32("abs.f32 %d32, %a32;", bits_f32([0x80000000, 0xFFC12345, 0x80000001])),
             [0, 0x7FC12345, 1], "abs.f32")

# max and min: a NaN operand gives the other (both NaN: NaN); .NaN gives NaN;
# +0 is above -0.
pairs_a = bits_f32([0x7FC00001, 0x3F800000, 0x7FC00001, 0x80000000, 0x00000000, 0xFF800000])
pairs_b = bits_f32([0x3F800000, 0x7FC00001, 0x7FC00002, 0x00000000, 0x80000000, 0x7F800000])
checks.equal(f32("max.f32 %d32, %a32, %b32;", pairs_a, pairs_b),
             [0x3F800000, 0x3F800000, NAN, 0, 0, 0x7F800000], "max.f32")
checks.equal(f32("min.f32 %d32, %a32, %b32;", pairs_a, pairs_b),
             [0x3F800000, 0x3F800000, NAN, 0x80000000, 0x80000000, 0xFF800000], "min.f32")
checks.equal(f32("max.NaN.f32 %d32, %a32, %b32;", pairs_a, pairs_b),
             [NAN, NAN, NAN, 0, 0, 0x7F800000], "max.NaN.f32")
checks.equal(f32("min.NaN.f32 %d32, %a32, %b32;", pairs_a, pairs_b),
             [NAN, NAN, NAN, 0x80000000, 0x80000000, 0xFF800000], "min.NaN.f32")

# Subnormals are kept; .ftz flushes operands and results to signed zeros.
tiny = bits_f32([0x00000001, 0x00400000, 0x80000003])
checks.equal(f32("add.rn.f32 %d32, %a32, %b32;", tiny, tiny), [2, 0x00800000, 0x80000006], "subnormal sums")
checks.equal(f32("mul.rn.f32 %d32, %a32, %b32;", [2.0**-70, 2.0**-75], [2.0**-70, 2.0**-75]),
             [0x00000200, 0], "products into and below the subnormal range")
checks.equal(f32("add.ftz.rn.f32 %d32, %a32, %b32;", tiny, [0.0, 0.0, -0.0]), [0, 0, 0x80000000],
             "add.ftz flushes subnormal operands")
checks.equal(f32("mul.ftz.rn.f32 %d32, %a32, %b32;", [2.0**-70], [2.0**-70]), [0], "mul.ftz flushes results")

# .sat clamps to [0, 1] and turns NaN into 0.
checks.equal(f32("add.sat.f32 %d32, %a32, %b32;", [0.5, -3.0, 0.75, np.nan], [0.25, 1.0, 0.75, 1.0]),
             f32_bits([0.75, 0.0, 1.0, 0.0]), "add.sat.f32")

# setp: ordered comparisons are false with a NaN, unordered ones true.
values = np.array([1.0, 2.0, np.nan, -0.0, np.inf], np.float32)
left, right = np.repeat(values, len(values)), np.tile(values, len(values))
comparisons = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: not (math.isnan(a) or math.isnan(b)) and a != b,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "equ": lambda a, b: math.isnan(a) or math.isnan(b) or a == b, "neu": lambda a, b: a != b,
    "ltu": lambda a, b: not a >= b, "leu": lambda a, b: not a > b,
    "gtu": lambda a, b: not a <= b, "geu": lambda a, b: not a < b,
    "num": lambda a, b: not (math.isnan(a) or math.isnan(b)), "nan": lambda a, b: math.isnan(a) or math.isnan(b),
}
for name, predicate in comparisons.items():
    got = f32(f"setp.{name}.f32 %p, %a32, %b32;\nselp.b32 %d32, 1, 0, %p;", left, right)
    checks.equal(got, [int(predicate(float(a), float(b))) for a, b in zip(left, right)], f"setp.{name}.f32")
checks.equal(f32("setp.lt.f32 %p, %a32, %b32;\nselp.f32 %d32, %a32, %b32, %p;", [1.0, 3.0], [2.0, -1.0]),
             f32_bits([1.0, -1.0]), "selp.f32")
checks.equal(f32("setp.gt.f32 %p, %a32, %b32;\n@%p bra SKIP;\nmov.b32 %d32, 0f40490FDB;\nbra.uni DONE;\n"
                 "SKIP:\nmov.b32 %d32, 0fC0490FDB;\nDONE:", [1.0, 3.0], [2.0, -1.0]),
             f32_bits([np.float32(np.pi), np.float32(-np.pi)]), "float immediates")

# f64 arithmetic.
dx, dy, dz = rng.standard_normal(64), rng.standard_normal(64), rng.standard_normal(64)
f64 = lambda body, *inputs: elementwise(driver, body, [np.asarray(v, np.float64) for v in inputs], np.uint64)
checks.equal(f64("add.rn.f64 %d64, %a64, %b64;", dx, dy), (dx + dy).view(np.uint64), "add.rn.f64")
checks.equal(f64("fma.rn.f64 %d64, %a64, %b64, %c64;", dx, dy, dz),
             np.array([np.float64(float(Fraction(a) * Fraction(b) + Fraction(c))) for a, b, c in zip(dx, dy, dz)]).view(np.uint64),
             "fma.rn.f64")
checks.equal(f64("div.rn.f64 %d64, %a64, %b64;", dx, dy), (dx / dy).view(np.uint64), "div.rn.f64")

checks.finish()

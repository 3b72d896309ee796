//===- Semantics.h - Instruction semantics, chosen at load ------*- C++ -*-===//
//
// The decoder picks each instruction's semantics here, once, from its
// operation, types and modifiers; a null result means the combination is
// not supported, which the decoder reports as a load error. Arithmetic.cpp
// implements the register-to-register operations, DataMovement.cpp the
// loads, stores and shuffles.
//
// Semantics follow the PTX ISA. Where it leaves a result unspecified, the
// emulator's choice is documented in docs/Emulator.md.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_SEMANTICS_H
#define FFF_EMULATOR_SEMANTICS_H

#include "Program.h"

namespace fff::emulator {

enum class IntegerOp : uint8_t {
  Add,
  Sub,
  MulLo,
  MulHi,
  MulWide,
  MadLo,
  MadHi,
  MadWide,
  Div,
  Rem,
  Min,
  Max,
  Neg,
  Abs,
  And,
  Or,
  Xor,
  Not,
  Shl,
  Shr,
};

enum class FloatOp : uint8_t {
  Add,
  Sub,
  Mul,
  Fma,
  Div,
  Rcp,
  Sqrt,
  Min,
  Max,
  Neg,
  Abs,
};

/// setp's comparisons. Eq to Ge are ordered for floats (false when either
/// is NaN) and signed for .sN; Lo to Hs compare unsigned integers; Equ to
/// Geu are unordered (true when either is NaN); Num: neither is NaN; Nan:
/// either is.
enum class CompareOp : uint8_t {
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  Lo,
  Ls,
  Hi,
  Hs,
  Equ,
  Neu,
  Ltu,
  Leu,
  Gtu,
  Geu,
  Num,
  Nan,
};

/// add, sub, mul.lo/hi/wide, mad.lo/hi/wide, div, rem, min, max, neg, abs,
/// and, or, xor, not, shl, shr over `type` (the operands' type, or the
/// sources' for .wide).
ExecuteFn selectIntegerOp(IntegerOp op, ScalarType type);

/// Float arithmetic; `propagateNaN` is min/max's .NaN.
ExecuteFn selectFloatOp(FloatOp op, ScalarType type, const FloatModes &modes,
                        bool propagateNaN);

/// setp.op.type: the predicate destination gets 0 or 1.
ExecuteFn selectCompare(CompareOp op, ScalarType type);

/// selp: d = c ? a : b, for any type.
ExecuteFn selectSelect();

/// mov d, a, for any type.
ExecuteFn selectMove();

/// prmt.b32 d, a, b, c (the default mode): each byte of d is the byte of
/// {b, a} (a's bytes 0-3, b's 4-7) that the low 3 bits of c's nibble for
/// it name, or that byte's sign bit replicated where the nibble's bit 3 is
/// set.
ExecuteFn selectPermute();

/// mov.bN d, {a, b, ...} and mov.bN {a, b, ...}, s: `parts` values of
/// N / parts bits, the first the least significant.
ExecuteFn selectPack(unsigned totalBits, unsigned parts);
ExecuteFn selectUnpack(unsigned totalBits, unsigned parts);

/// cvt.to.from with the instruction's rounding (`integerRounding` for the
/// .rni/.rzi/.rmi/.rpi forms), .ftz and .sat.
ExecuteFn selectConvert(ScalarType to, ScalarType from, const FloatModes &modes,
                        bool integerRounding);

/// cvt.frnd.f16x2.f32 and cvt.frnd.bf16x2.f32 d, a, b: a to the upper half,
/// rounded as the instruction's FloatModes say.
ExecuteFn selectPackedConvert(ScalarType to);

/// ld and st in `space`, of the instruction's MemoryOperand shape.
ExecuteFn selectLoad(StateSpace space);
ExecuteFn selectStore(StateSpace space);

/// shfl.sync.mode.b32 d[|p], a, b, c, membermask.
ExecuteFn selectShuffle();
ExecuteFn selectWarpSync();

} // namespace fff::emulator

#endif // FFF_EMULATOR_SEMANTICS_H

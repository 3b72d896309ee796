//===- Arithmetic.cpp - Integer, float, compare and move ops ----*- C++ -*-===//
//
// Each operation is a small function of one lane's operands, which the
// handlers of LaneOperations.h run over the lanes of a warp. Operations are
// chosen at load time for their exact types and modifiers, so the lane loops
// contain nothing but the operation.
//
//===----------------------------------------------------------------------===//

#include "DirectedRounding.h"
#include "LaneOperations.h"
#include "Semantics.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace fff::emulator {
namespace {

using namespace laneops;

//===----------------------------------------------------------------------===//
// Integer operations
//===----------------------------------------------------------------------===//

/// Unsigned arithmetic of T's width, at least int's width so that 16-bit
/// products do not overflow int: wrap-around without undefined behavior.
template <typename T>
using Wrapping = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                                    std::make_unsigned_t<T>>;

/// The integer of twice T's width and T's signedness.
template <typename T> struct DoubleWidth;
template <> struct DoubleWidth<uint16_t> { using type = uint32_t; };
template <> struct DoubleWidth<int16_t> { using type = int32_t; };
template <> struct DoubleWidth<uint32_t> { using type = uint64_t; };
template <> struct DoubleWidth<int32_t> { using type = int64_t; };
template <> struct DoubleWidth<uint64_t> { using type = unsigned __int128; };
template <> struct DoubleWidth<int64_t> { using type = __int128; };
template <typename T> using Wide = typename DoubleWidth<T>::type;

struct AddOp {
  template <typename T> static T apply(T a, T b) {
    return T(Wrapping<T>(a) + Wrapping<T>(b));
  }
};
struct SubOp {
  template <typename T> static T apply(T a, T b) {
    return T(Wrapping<T>(a) - Wrapping<T>(b));
  }
};
struct MulLoOp {
  template <typename T> static T apply(T a, T b) {
    return T(Wrapping<T>(a) * Wrapping<T>(b));
  }
};
struct MulHiOp {
  template <typename T> static T apply(T a, T b) {
    return T((Wide<T>(a) * Wide<T>(b)) >> (8 * sizeof(T)));
  }
};
struct MulWideOp {
  template <typename T> static Wide<T> apply(T a, T b) {
    return Wide<T>(a) * Wide<T>(b);
  }
};
struct MadLoOp {
  template <typename T> static T apply(T a, T b, T c) {
    return T(Wrapping<T>(a) * Wrapping<T>(b) + Wrapping<T>(c));
  }
};
struct MadHiOp {
  template <typename T> static T apply(T a, T b, T c) {
    return AddOp::apply(MulHiOp::apply(a, b), c);
  }
};
struct MadWideOp {
  template <typename T> static Wide<T> apply(T a, T b, Wide<T> c) {
    using U = std::make_unsigned_t<Wide<T>>;
    return Wide<T>(U(MulWideOp::apply(a, b)) + U(c));
  }
};
// Division by zero is unspecified in PTX: the quotient is all ones and the
// remainder the dividend. The one overflowing quotient, MIN / -1, wraps.
struct DivOp {
  template <typename T> static T apply(T a, T b) {
    if (b == 0)
      return T(~T(0));
    if (std::is_signed_v<T> && b == T(-1))
      return SubOp::apply(T(0), a);
    return T(a / b);
  }
};
struct RemOp {
  template <typename T> static T apply(T a, T b) {
    if (b == 0)
      return a;
    if (std::is_signed_v<T> && b == T(-1))
      return T(0);
    return T(a % b);
  }
};
struct MinOp {
  template <typename T> static T apply(T a, T b) { return b < a ? b : a; }
};
struct MaxOp {
  template <typename T> static T apply(T a, T b) { return a < b ? b : a; }
};
struct NegOp {
  template <typename T> static T apply(T a) { return SubOp::apply(T(0), a); }
};
struct AbsOp {
  template <typename T> static T apply(T a) {
    return a < 0 ? NegOp::apply(a) : a;
  }
};
struct AndOp {
  template <typename T> static T apply(T a, T b) { return T(a & b); }
};
struct OrOp {
  template <typename T> static T apply(T a, T b) { return T(a | b); }
};
struct XorOp {
  template <typename T> static T apply(T a, T b) { return T(a ^ b); }
};
struct NotOp {
  template <typename T> static T apply(T a) { return T(~a); }
};
struct NotPredicateOp {
  static uint8_t apply(uint8_t a) { return a ? 0 : 1; }
};
// Shift amounts of the type's width or more give all zeros, or all sign
// bits for an arithmetic right shift.
struct ShlOp {
  template <typename T> static T apply(T a, uint32_t amount) {
    return amount >= 8 * sizeof(T) ? T(0) : T(Wrapping<T>(a) << amount);
  }
};
struct ShrOp {
  template <typename T> static T apply(T a, uint32_t amount) {
    constexpr uint32_t bits = 8 * sizeof(T);
    if constexpr (std::is_signed_v<T>)
      return T(a >> (amount >= bits ? bits - 1 : amount));
    else
      return amount >= bits ? T(0) : T(a >> amount);
  }
};

template <typename T> ExecuteFn integerOpFor(IntegerOp op) {
  constexpr bool isSigned = std::is_signed_v<T>;
  switch (op) {
  case IntegerOp::Add:
    return binary<T, T, AddOp>;
  case IntegerOp::Sub:
    return binary<T, T, SubOp>;
  case IntegerOp::MulLo:
    return binary<T, T, MulLoOp>;
  case IntegerOp::MulHi:
    return binary<T, T, MulHiOp>;
  case IntegerOp::MulWide:
    if constexpr (sizeof(T) <= 4)
      return binary<T, T, MulWideOp>;
    return nullptr;
  case IntegerOp::MadLo:
    return ternary<T, T, T, MadLoOp>;
  case IntegerOp::MadHi:
    return ternary<T, T, T, MadHiOp>;
  case IntegerOp::MadWide:
    if constexpr (sizeof(T) <= 4)
      return ternary<T, T, Wide<T>, MadWideOp>;
    return nullptr;
  case IntegerOp::Div:
    return binary<T, T, DivOp>;
  case IntegerOp::Rem:
    return binary<T, T, RemOp>;
  case IntegerOp::Min:
    return binary<T, T, MinOp>;
  case IntegerOp::Max:
    return binary<T, T, MaxOp>;
  case IntegerOp::Neg:
    return isSigned ? unary<T, NegOp> : nullptr;
  case IntegerOp::Abs:
    return isSigned ? unary<T, AbsOp> : nullptr;
  case IntegerOp::Shr:
    return binary<T, uint32_t, ShrOp>;
  case IntegerOp::And:
  case IntegerOp::Or:
  case IntegerOp::Xor:
  case IntegerOp::Not:
  case IntegerOp::Shl:
    return nullptr; // bit types only
  }
  return nullptr;
}

template <typename T> ExecuteFn bitOpFor(IntegerOp op) {
  switch (op) {
  case IntegerOp::And:
    return binary<T, T, AndOp>;
  case IntegerOp::Or:
    return binary<T, T, OrOp>;
  case IntegerOp::Xor:
    return binary<T, T, XorOp>;
  case IntegerOp::Not:
    return unary<T, NotOp>;
  case IntegerOp::Shl:
    return binary<T, uint32_t, ShlOp>;
  case IntegerOp::Shr:
    return binary<T, uint32_t, ShrOp>;
  default:
    return nullptr;
  }
}

//===----------------------------------------------------------------------===//
// Float operations
//===----------------------------------------------------------------------===//

constexpr unsigned arity(FloatOp op) {
  switch (op) {
  case FloatOp::Rcp:
  case FloatOp::Sqrt:
  case FloatOp::Neg:
  case FloatOp::Abs:
    return 1;
  case FloatOp::Fma:
    return 3;
  default:
    return 2;
  }
}

/// max and min: a NaN operand yields the other one (.NaN: yields NaN), and
/// +0 is above -0.
template <bool isMax, bool propagateNaN, typename T> T minMax(T a, T b) {
  bool aNaN = a != a, bNaN = b != b;
  if (aNaN || bNaN) {
    if (propagateNaN || (aNaN && bNaN))
      return canonicalNaN<T>();
    return aNaN ? b : a;
  }
  if (a == b) // equal values differ at most in the sign of zero
    return isMax == std::signbit(a) ? b : a;
  return (a < b) == isMax ? b : a;
}

/// One float operation in direction `rounding`; round to nearest even
/// stays inline.
template <FloatOp op, bool propagateNaN, typename T>
T compute(T a, T b, T c, Rounding rounding) {
  bool nearest = rounding == Rounding::NearestEven;
  if constexpr (op == FloatOp::Add)
    return nearest ? a + b : addRounded(a, b, rounding);
  else if constexpr (op == FloatOp::Sub)
    return nearest ? a - b : subRounded(a, b, rounding);
  else if constexpr (op == FloatOp::Mul)
    return nearest ? a * b : mulRounded(a, b, rounding);
  else if constexpr (op == FloatOp::Fma)
    return nearest ? std::fma(a, b, c) : fmaRounded(a, b, c, rounding);
  else if constexpr (op == FloatOp::Div)
    return nearest ? a / b : divRounded(a, b, rounding);
  else if constexpr (op == FloatOp::Rcp)
    return nearest ? T(1) / a : divRounded(T(1), a, rounding);
  else if constexpr (op == FloatOp::Sqrt)
    return nearest ? std::sqrt(a) : sqrtRounded(a, rounding);
  else if constexpr (op == FloatOp::Min)
    return minMax<false, propagateNaN>(a, b);
  else if constexpr (op == FloatOp::Max)
    return minMax<true, propagateNaN>(a, b);
  else if constexpr (op == FloatOp::Neg)
    return -a; // the sign flips, NaN or not
  else
    return std::fabs(a);
}

/// Whether the operation computes a new value (whose NaN is canonical)
/// rather than choosing or adjusting an operand.
constexpr bool isArithmetic(FloatOp op) {
  return op != FloatOp::Min && op != FloatOp::Max && op != FloatOp::Neg &&
         op != FloatOp::Abs;
}

/// Round to nearest even, no .ftz, no .sat: the common case.
template <FloatOp op, bool propagateNaN, typename T>
void floatNearest(ExecContext &context, const Instruction &instruction,
                  LaneMask lanes) {
  constexpr unsigned operands = arity(op);
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  const uint64_t *b =
      operands > 1 ? context.warp->lane(instruction.sources[1]) : nullptr;
  const uint64_t *c =
      operands > 2 ? context.warp->lane(instruction.sources[2]) : nullptr;
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    T x = as<T>(a[lane]);
    T y = operands > 1 ? as<T>(b[lane]) : T();
    T z = operands > 2 ? as<T>(c[lane]) : T();
    T result = compute<op, propagateNaN>(x, y, z, Rounding::NearestEven);
    return bitsFrom(isArithmetic(op) ? canonicalize(result) : result);
  });
}

/// Any rounding, .ftz (subnormal operands and results become zeros of the
/// same sign) and .sat (results clamped to [0, 1], NaN to 0).
template <FloatOp op, bool propagateNaN, typename T>
void floatWithModes(ExecContext &context, const Instruction &instruction,
                    LaneMask lanes) {
  constexpr unsigned operands = arity(op);
  const FloatModes modes = instruction.floatModes;
  auto operand = [&](unsigned index, unsigned lane) {
    T value = as<T>(context.warp->lane(instruction.sources[index])[lane]);
    return modes.flushSubnormals ? flushSubnormal(value) : value;
  };
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    T x = operand(0, lane);
    T y = operands > 1 ? operand(1, lane) : T();
    T z = operands > 2 ? operand(2, lane) : T();
    T result = compute<op, propagateNaN>(x, y, z, modes.rounding);
    if (modes.flushSubnormals)
      result = flushSubnormal(result);
    if (modes.saturate)
      result =
          result != result ? T(0) : std::fmin(std::fmax(result, T(0)), T(1));
    return bitsFrom(isArithmetic(op) ? canonicalize(result) : result);
  });
}

template <FloatOp op, bool propagateNaN, typename T>
ExecuteFn floatHandler(const FloatModes &modes) {
  bool common = modes.rounding == Rounding::NearestEven &&
                !modes.flushSubnormals && !modes.saturate;
  return common ? floatNearest<op, propagateNaN, T>
                : floatWithModes<op, propagateNaN, T>;
}

template <typename T>
ExecuteFn floatOpFor(FloatOp op, const FloatModes &modes, bool propagateNaN) {
  switch (op) {
  case FloatOp::Add:
    return floatHandler<FloatOp::Add, false, T>(modes);
  case FloatOp::Sub:
    return floatHandler<FloatOp::Sub, false, T>(modes);
  case FloatOp::Mul:
    return floatHandler<FloatOp::Mul, false, T>(modes);
  case FloatOp::Fma:
    return floatHandler<FloatOp::Fma, false, T>(modes);
  case FloatOp::Div:
    return floatHandler<FloatOp::Div, false, T>(modes);
  case FloatOp::Rcp:
    return floatHandler<FloatOp::Rcp, false, T>(modes);
  case FloatOp::Sqrt:
    return floatHandler<FloatOp::Sqrt, false, T>(modes);
  case FloatOp::Min:
    return propagateNaN ? floatHandler<FloatOp::Min, true, T>(modes)
                        : floatHandler<FloatOp::Min, false, T>(modes);
  case FloatOp::Max:
    return propagateNaN ? floatHandler<FloatOp::Max, true, T>(modes)
                        : floatHandler<FloatOp::Max, false, T>(modes);
  case FloatOp::Neg:
    return floatHandler<FloatOp::Neg, false, T>(modes);
  case FloatOp::Abs:
    return floatHandler<FloatOp::Abs, false, T>(modes);
  }
  return nullptr;
}

/// add, sub and mul on f16, bf16 and their x2 forms: exact in double,
/// rounded once to nearest even.
template <FloatOp op, bool isBFloat, unsigned halves>
void narrowArithmetic(ExecContext &context, const Instruction &instruction,
                      LaneMask lanes) {
  constexpr NarrowFormat format = isBFloat ? BFloat16 : Half;
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  const uint64_t *b = context.warp->lane(instruction.sources[1]);
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    uint64_t result = 0;
    for (unsigned half = 0; half < halves; ++half) {
      unsigned shift = 16 * half;
      double x = floatFromNarrow(uint16_t(a[lane] >> shift), format);
      double y = floatFromNarrow(uint16_t(b[lane] >> shift), format);
      double exact = op == FloatOp::Add   ? x + y
                     : op == FloatOp::Sub ? x - y
                                          : x * y;
      result |= uint64_t(narrowFromDouble(exact, format, Rounding::NearestEven))
                << shift;
    }
    return result;
  });
}

template <FloatOp op> ExecuteFn narrowOpFor(ScalarType type) {
  switch (type) {
  case ScalarType::F16:
    return narrowArithmetic<op, false, 1>;
  case ScalarType::F16x2:
    return narrowArithmetic<op, false, 2>;
  case ScalarType::BF16:
    return narrowArithmetic<op, true, 1>;
  case ScalarType::BF16x2:
    return narrowArithmetic<op, true, 2>;
  default:
    return nullptr;
  }
}

//===----------------------------------------------------------------------===//
// Comparison, selection and moves
//===----------------------------------------------------------------------===//

template <CompareOp op> struct Compare {
  template <typename T> static uint8_t apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      bool unordered = a != a || b != b;
      switch (op) {
      case CompareOp::Eq:
        return a == b;
      case CompareOp::Ne:
        return !unordered && a != b;
      case CompareOp::Lt:
        return a < b;
      case CompareOp::Le:
        return a <= b;
      case CompareOp::Gt:
        return a > b;
      case CompareOp::Ge:
        return a >= b;
      case CompareOp::Equ:
        return unordered || a == b;
      case CompareOp::Neu:
        return a != b;
      case CompareOp::Ltu:
        return !(a >= b);
      case CompareOp::Leu:
        return !(a > b);
      case CompareOp::Gtu:
        return !(a <= b);
      case CompareOp::Geu:
        return !(a < b);
      case CompareOp::Num:
        return !unordered;
      case CompareOp::Nan:
        return unordered;
      default:
        return 0;
      }
    } else {
      using U = std::make_unsigned_t<T>;
      switch (op) {
      case CompareOp::Eq:
        return a == b;
      case CompareOp::Ne:
        return a != b;
      case CompareOp::Lt:
        return a < b;
      case CompareOp::Le:
        return a <= b;
      case CompareOp::Gt:
        return a > b;
      case CompareOp::Ge:
        return a >= b;
      case CompareOp::Lo:
        return U(a) < U(b);
      case CompareOp::Ls:
        return U(a) <= U(b);
      case CompareOp::Hi:
        return U(a) > U(b);
      case CompareOp::Hs:
        return U(a) >= U(b);
      default:
        return 0;
      }
    }
  }
};

template <typename T> ExecuteFn compareFor(CompareOp op) {
  switch (op) {
#define COMPARE(NAME)                                                          \
  case CompareOp::NAME:                                                        \
    return binary<T, T, Compare<CompareOp::NAME>>;
    COMPARE(Eq)
    COMPARE(Ne)
    COMPARE(Lt)
    COMPARE(Le)
    COMPARE(Gt)
    COMPARE(Ge)
    COMPARE(Lo)
    COMPARE(Ls)
    COMPARE(Hi)
    COMPARE(Hs)
    COMPARE(Equ)
    COMPARE(Neu)
    COMPARE(Ltu)
    COMPARE(Leu)
    COMPARE(Gtu)
    COMPARE(Geu)
    COMPARE(Num)
    COMPARE(Nan)
#undef COMPARE
  }
  return nullptr;
}

void select(ExecContext &context, const Instruction &instruction,
            LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  const uint64_t *b = context.warp->lane(instruction.sources[1]);
  const uint64_t *condition = context.warp->lane(instruction.sources[2]);
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    return condition[lane] ? a[lane] : b[lane];
  });
}

void move(ExecContext &context, const Instruction &instruction,
          LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  writeLanes(context, instruction.destinations[0], lanes,
             [&](unsigned lane) { return a[lane]; });
}

void permute(ExecContext &context, const Instruction &instruction,
             LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  const uint64_t *b = context.warp->lane(instruction.sources[1]);
  const uint64_t *selectors = context.warp->lane(instruction.sources[2]);
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    uint64_t bytes = (a[lane] & 0xffffffffu) | ((b[lane] & 0xffffffffu) << 32);
    uint64_t result = 0;
    for (unsigned i = 0; i < 4; ++i) {
      unsigned nibble = (selectors[lane] >> (4 * i)) & 0xf;
      uint64_t byte = (bytes >> (8 * (nibble & 7))) & 0xff;
      if (nibble & 8)
        byte = (byte & 0x80) ? 0xff : 0;
      result |= byte << (8 * i);
    }
    return result;
  });
}

template <unsigned partBits, unsigned parts>
void pack(ExecContext &context, const Instruction &instruction,
          LaneMask lanes) {
  constexpr uint64_t partMask = (uint64_t(1) << partBits) - 1;
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    uint64_t packed = 0;
    for (unsigned part = 0; part < parts; ++part)
      packed |= (context.warp->lane(instruction.sources[part])[lane] & partMask)
                << (part * partBits);
    return packed;
  });
}

template <unsigned partBits, unsigned parts>
void unpack(ExecContext &context, const Instruction &instruction,
            LaneMask lanes) {
  constexpr uint64_t partMask = (uint64_t(1) << partBits) - 1;
  // Copied first: a destination may be the source register.
  uint64_t source[WarpSize];
  const uint64_t *packed = context.warp->lane(instruction.sources[0]);
  std::copy(packed, packed + WarpSize, source);
  for (unsigned part = 0; part < parts; ++part) {
    if (instruction.destinations[part] == NoRegister) // the sink `_`
      continue;
    writeLanes(context, instruction.destinations[part], lanes,
               [&](unsigned lane) {
                 return (source[lane] >> (part * partBits)) & partMask;
               });
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Selection
//===----------------------------------------------------------------------===//

ExecuteFn selectIntegerOp(IntegerOp op, ScalarType type) {
  switch (type) {
  case ScalarType::Pred:
    if (op == IntegerOp::Not)
      return unary<uint8_t, NotPredicateOp>;
    if (op == IntegerOp::Shl || op == IntegerOp::Shr)
      return nullptr;
    return bitOpFor<uint8_t>(op);
  case ScalarType::B16:
    return bitOpFor<uint16_t>(op);
  case ScalarType::B32:
    return bitOpFor<uint32_t>(op);
  case ScalarType::B64:
    return bitOpFor<uint64_t>(op);
  case ScalarType::U16:
    return integerOpFor<uint16_t>(op);
  case ScalarType::U32:
    return integerOpFor<uint32_t>(op);
  case ScalarType::U64:
    return integerOpFor<uint64_t>(op);
  case ScalarType::S16:
    return integerOpFor<int16_t>(op);
  case ScalarType::S32:
    return integerOpFor<int32_t>(op);
  case ScalarType::S64:
    return integerOpFor<int64_t>(op);
  default:
    return nullptr;
  }
}

ExecuteFn selectFloatOp(FloatOp op, ScalarType type, const FloatModes &modes,
                        bool propagateNaN) {
  if (type == ScalarType::F32)
    return floatOpFor<float>(op, modes, propagateNaN);
  if (type == ScalarType::F64)
    return floatOpFor<double>(op, modes, propagateNaN);
  // 16-bit formats: add, sub and mul, to nearest even.
  if (modes.rounding != Rounding::NearestEven || modes.flushSubnormals ||
      modes.saturate || propagateNaN)
    return nullptr;
  switch (op) {
  case FloatOp::Add:
    return narrowOpFor<FloatOp::Add>(type);
  case FloatOp::Sub:
    return narrowOpFor<FloatOp::Sub>(type);
  case FloatOp::Mul:
    return narrowOpFor<FloatOp::Mul>(type);
  default:
    return nullptr;
  }
}

ExecuteFn selectCompare(CompareOp op, ScalarType type) {
  bool unsignedOrdering = op == CompareOp::Lo || op == CompareOp::Ls ||
                          op == CompareOp::Hi || op == CompareOp::Hs;
  bool equality = op == CompareOp::Eq || op == CompareOp::Ne;
  bool integerOp = equality || unsignedOrdering || op == CompareOp::Lt ||
                   op == CompareOp::Le || op == CompareOp::Gt ||
                   op == CompareOp::Ge;
  if (type == ScalarType::F32 || type == ScalarType::F64)
    return unsignedOrdering ? nullptr : withFloatType(type, [&](auto tag) {
      return compareFor<typename decltype(tag)::type>(op);
    });
  if (!integerOp || bitWidth(type) < 16 || type == ScalarType::Pred)
    return nullptr;
  if (isBitType(type) && !equality)
    return nullptr;
  if (isSignedInteger(type) && unsignedOrdering)
    return nullptr;
  return withIntegerType(type, [&](auto tag) {
    return compareFor<typename decltype(tag)::type>(op);
  });
}

ExecuteFn selectSelect() { return select; }

ExecuteFn selectMove() { return move; }

ExecuteFn selectPermute() { return permute; }

ExecuteFn selectPack(unsigned totalBits, unsigned parts) {
  if (totalBits == 32 && parts == 2)
    return pack<16, 2>;
  if (totalBits == 64 && parts == 2)
    return pack<32, 2>;
  if (totalBits == 64 && parts == 4)
    return pack<16, 4>;
  return nullptr;
}

ExecuteFn selectUnpack(unsigned totalBits, unsigned parts) {
  if (totalBits == 32 && parts == 2)
    return unpack<16, 2>;
  if (totalBits == 64 && parts == 2)
    return unpack<32, 2>;
  if (totalBits == 64 && parts == 4)
    return unpack<16, 4>;
  return nullptr;
}

} // namespace fff::emulator

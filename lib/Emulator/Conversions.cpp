//===- Conversions.cpp - cvt: between float and integer types ---*- C++ -*-===//
//
// Every cvt the emulator implements: f32 and f64 to and from the 16-bit
// float formats (Float16.h) and the integer types, rounding as the
// instruction names it, float-to-integer conversions saturating as PTX
// defines them, and integer widening, narrowing and saturation.
//
//===----------------------------------------------------------------------===//

#include "DirectedRounding.h"
#include "LaneOperations.h"
#include "Semantics.h"

#include <limits>

namespace fff::emulator {
namespace {

using namespace laneops;

NarrowFormat narrowFormatOf(ScalarType type) {
  return type == ScalarType::BF16 || type == ScalarType::BF16x2 ? BFloat16
                                                                : Half;
}

/// cvt.f32.f16 and cvt.f32.bf16 (and to f64): exact.
template <bool isBFloat, typename To>
void widenNarrow(ExecContext &context, const Instruction &instruction,
                 LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    return bitsFrom(
        To(floatFromNarrow(uint16_t(a[lane]), isBFloat ? BFloat16 : Half)));
  });
}

/// cvt.frnd.f16.f32, cvt.frnd.bf16.f32 (and from f64).
template <typename From>
void narrowFloat(ExecContext &context, const Instruction &instruction,
                 LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  NarrowFormat format = narrowFormatOf(instruction.type);
  Rounding rounding = instruction.floatModes.rounding;
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    return uint64_t(
        narrowFromDouble(double(as<From>(a[lane])), format, rounding));
  });
}

/// cvt.frnd.f16x2.f32 and cvt.frnd.bf16x2.f32 d, a, b.
void packNarrow(ExecContext &context, const Instruction &instruction,
                LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  const uint64_t *b = context.warp->lane(instruction.sources[1]);
  NarrowFormat format = narrowFormatOf(instruction.type);
  Rounding rounding = instruction.floatModes.rounding;
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    uint64_t upper = narrowFromFloat(as<float>(a[lane]), format, rounding);
    uint64_t lower = narrowFromFloat(as<float>(b[lane]), format, rounding);
    return upper << 16 | lower;
  });
}

/// Between f32 and f64, or to the same type with .rni/.rzi/.rmi/.rpi
/// (`integral`), .ftz or .sat.
template <typename To, typename From, bool integral>
void convertFloat(ExecContext &context, const Instruction &instruction,
                  LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  const FloatModes modes = instruction.floatModes;
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    From value = as<From>(a[lane]);
    if (modes.flushSubnormals)
      value = flushSubnormal(value);
    To result;
    if constexpr (integral)
      result = To(roundToIntegral(value, modes.rounding));
    else if constexpr (sizeof(To) < sizeof(From))
      result = modes.rounding == Rounding::NearestEven
                   ? To(value)
                   : convertRounded<To>(double(value), modes.rounding);
    else
      result = To(value);
    if (modes.flushSubnormals)
      result = flushSubnormal(result);
    if (modes.saturate)
      result =
          result != result ? To(0) : std::fmin(std::fmax(result, To(0)), To(1));
    return bitsFrom(canonicalize(result));
  });
}

/// Float to integer: rounded to an integral value, then saturated to the
/// destination's range; NaN becomes 0.
template <typename To, typename From>
void floatToInteger(ExecContext &context, const Instruction &instruction,
                    LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  const FloatModes modes = instruction.floatModes;
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    From value = as<From>(a[lane]);
    if (modes.flushSubnormals)
      value = flushSubnormal(value);
    if (value != value)
      return bitsFrom(To(0));
    // Both bounds are powers of two or zero, so exact in double.
    double rounded = roundToIntegral(double(value), modes.rounding);
    constexpr double lowest = double(std::numeric_limits<To>::min());
    constexpr double aboveHighest =
        2.0 * double(std::numeric_limits<To>::max() / 2 + 1);
    if (rounded < lowest)
      return bitsFrom(std::numeric_limits<To>::min());
    if (rounded >= aboveHighest)
      return bitsFrom(std::numeric_limits<To>::max());
    return bitsFrom(To(rounded));
  });
}

/// Integer to float, rounded as the instruction says.
template <typename To, typename From>
void integerToFloat(ExecContext &context, const Instruction &instruction,
                    LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  Rounding rounding = instruction.floatModes.rounding;
  using Wide64 = std::conditional_t<std::is_signed_v<From>, int64_t, uint64_t>;
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    Wide64 value = as<From>(a[lane]);
    return bitsFrom(rounding == Rounding::NearestEven
                        ? To(value)
                        : convertRounded<To>(value, rounding));
  });
}

/// Integer to integer without .sat: the source value, extended by its own
/// signedness; the destination keeps the low bits it reads.
template <typename From>
void integerToInteger(ExecContext &context, const Instruction &instruction,
                      LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  writeLanes(context, instruction.destinations[0], lanes,
             [&](unsigned lane) { return bitsFrom(as<From>(a[lane])); });
}

/// Integer to integer with .sat: clamped to the destination's range.
template <typename To, typename From>
void saturateInteger(ExecContext &context, const Instruction &instruction,
                     LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    __int128 value = as<From>(a[lane]);
    __int128 lowest = std::numeric_limits<To>::min();
    __int128 highest = std::numeric_limits<To>::max();
    return bitsFrom(To(value < lowest    ? lowest
                       : value > highest ? highest
                                         : value));
  });
}

bool isNarrowFloat(ScalarType type) {
  return type == ScalarType::F16 || type == ScalarType::BF16;
}

} // namespace

ExecuteFn selectConvert(ScalarType to, ScalarType from, const FloatModes &modes,
                        bool integerRounding) {
  bool toFloat = to == ScalarType::F32 || to == ScalarType::F64;
  bool fromFloat = from == ScalarType::F32 || from == ScalarType::F64;
  bool toInteger = !isFloat(to) && to != ScalarType::Pred;
  bool fromInteger = !isFloat(from) && from != ScalarType::Pred;

  // .ftz and .sat apply to float results and operands only.
  if (modes.flushSubnormals && from != ScalarType::F32 && to != ScalarType::F32)
    return nullptr;
  if (modes.saturate && !toFloat && !(toInteger && fromInteger))
    return nullptr;

  if (isNarrowFloat(from) && toFloat && !integerRounding) {
    bool isBFloat = from == ScalarType::BF16;
    if (to == ScalarType::F32)
      return isBFloat ? widenNarrow<true, float> : widenNarrow<false, float>;
    return isBFloat ? widenNarrow<true, double> : widenNarrow<false, double>;
  }
  if (isNarrowFloat(to) && fromFloat && !integerRounding && !modes.saturate &&
      !modes.flushSubnormals)
    return from == ScalarType::F32 ? narrowFloat<float> : narrowFloat<double>;
  if (toFloat && fromFloat) {
    if (integerRounding && to != from)
      return nullptr;
    return withFloatType(to, [&](auto toTag) {
      return withFloatType(from, [&](auto fromTag) -> ExecuteFn {
        using To = typename decltype(toTag)::type;
        using From = typename decltype(fromTag)::type;
        if (integerRounding)
          return convertFloat<To, From, true>;
        return convertFloat<To, From, false>;
      });
    });
  }
  if (toInteger && fromFloat && integerRounding)
    return withIntegerType(to, [&](auto toTag) {
      return withFloatType(from, [&](auto fromTag) {
        return floatToInteger<typename decltype(toTag)::type,
                              typename decltype(fromTag)::type>;
      });
    });
  if (toFloat && fromInteger && !integerRounding && !modes.saturate)
    return withFloatType(to, [&](auto toTag) {
      return withIntegerType(from, [&](auto fromTag) {
        return integerToFloat<typename decltype(toTag)::type,
                              typename decltype(fromTag)::type>;
      });
    });
  if (toInteger && fromInteger && !integerRounding) {
    if (!modes.saturate)
      return withIntegerType(from, [&](auto fromTag) {
        return integerToInteger<typename decltype(fromTag)::type>;
      });
    return withIntegerType(to, [&](auto toTag) {
      return withIntegerType(from, [&](auto fromTag) {
        return saturateInteger<typename decltype(toTag)::type,
                               typename decltype(fromTag)::type>;
      });
    });
  }
  return nullptr;
}

ExecuteFn selectPackedConvert(ScalarType to) {
  if (to != ScalarType::F16x2 && to != ScalarType::BF16x2)
    return nullptr;
  return packNarrow;
}

} // namespace fff::emulator

//===- Float16.h - Bit-exact f16 and bf16 conversions -----------*- C++ -*-===//
//
// Conversions between f32 and the two 16-bit float formats PTX knows, as the
// PTX ISA defines them: correctly rounded in the requested direction,
// subnormals kept, overflow to infinity or to the largest finite value as
// the rounding direction implies, and NaN to the canonical NaN 0x7fff.
// Widening is exact.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_FLOAT16_H
#define FFF_EMULATOR_FLOAT16_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fff::emulator {

/// IEEE rounding directions, named as PTX names them: .rn, .rz, .rm, .rp.
enum class Rounding : uint8_t { NearestEven, TowardZero, Down, Up };

/// A binary16-like format: 1 sign bit, then exponent and mantissa fields.
struct NarrowFormat {
  int exponentBits;
  int mantissaBits;

  int bias() const { return (1 << (exponentBits - 1)) - 1; }
  uint16_t infinity() const {
    return uint16_t(((1u << exponentBits) - 1) << mantissaBits);
  }
  uint16_t largestFinite() const { return uint16_t(infinity() - 1); }
};

constexpr NarrowFormat Half{5, 10};
constexpr NarrowFormat BFloat16{8, 7};

/// The canonical NaN of both formats, as NVIDIA GPUs produce it.
constexpr uint16_t CanonicalNarrowNaN = 0x7fff;

inline uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float floatFromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline uint64_t bitsOf(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline double doubleFromBits(uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

/// Rounds `value` to `format`, once, in direction `rounding`. Every f16,
/// bf16 and f32 value is exact in double, and so are their products; their
/// sums round in double first, which for formats of at most 24 significant
/// bits never changes the final rounding (53 >= 2 * 24 + 2), so 16-bit
/// arithmetic computes in double and rounds here once.
inline uint16_t narrowFromDouble(double value, NarrowFormat format,
                                 Rounding rounding) {
  uint64_t bits = bitsOf(value);
  bool negative = bits >> 63;
  uint16_t sign = uint16_t(negative) << 15;
  uint32_t exponentField = uint32_t(bits >> 52) & 0x7ff;
  uint64_t fraction = bits & ((uint64_t(1) << 52) - 1);
  if (exponentField == 0x7ff)
    return fraction ? CanonicalNarrowNaN : uint16_t(sign | format.infinity());
  if (exponentField == 0 && fraction == 0)
    return sign;

  // value = significand * 2^exponent with an integer significand.
  uint64_t significand =
      exponentField ? (fraction | (uint64_t(1) << 52)) : fraction;
  int exponent = exponentField ? int(exponentField) - 1075 : -1074;
  int leadingBit = 63 - __builtin_clzll(significand);
  int magnitudeExponent = exponent + leadingBit; // floor(log2 |value|)

  // The result's unit in the last place: that of its binade, or of the
  // subnormal range when the value falls below the smallest normal.
  int minimumExponent = 1 - format.bias();
  int ulpExponent = (magnitudeExponent > minimumExponent ? magnitudeExponent
                                                         : minimumExponent) -
                    format.mantissaBits;
  // Positive: the narrow format is coarser than double at any magnitude.
  int shift = ulpExponent - exponent;
  uint64_t kept, remainder, half;
  if (shift >= 64) {
    kept = 0;
    remainder = significand;
    half = ~uint64_t(0); // the value is below half an ulp: never a tie
  } else {
    kept = significand >> shift;
    remainder = significand & ((uint64_t(1) << shift) - 1);
    half = uint64_t(1) << (shift - 1);
  }
  bool roundUp = false;
  switch (rounding) {
  case Rounding::NearestEven:
    roundUp = remainder > half || (remainder == half && (kept & 1));
    break;
  case Rounding::TowardZero:
    break;
  case Rounding::Down:
    roundUp = negative && remainder != 0;
    break;
  case Rounding::Up:
    roundUp = !negative && remainder != 0;
    break;
  }
  kept += roundUp;
  if (kept >> (format.mantissaBits + 1)) { // rounded up into the next binade
    kept >>= 1;
    ++ulpExponent;
  }

  bool normal = kept >> format.mantissaBits;
  uint32_t biased =
      normal ? uint32_t(ulpExponent + format.mantissaBits + format.bias()) : 0;
  if (biased >= (1u << format.exponentBits) - 1) {
    bool toInfinity = rounding == Rounding::NearestEven ||
                      (rounding == Rounding::Up && !negative) ||
                      (rounding == Rounding::Down && negative);
    return sign | (toInfinity ? format.infinity() : format.largestFinite());
  }
  uint32_t mantissa = uint32_t(kept) & ((1u << format.mantissaBits) - 1);
  return uint16_t(sign | (biased << format.mantissaBits) | mantissa);
}

/// Rounds `value` to `format`, once (f32 to double is exact).
inline uint16_t narrowFromFloat(float value, NarrowFormat format,
                                Rounding rounding) {
  return narrowFromDouble(double(value), format, rounding);
}

/// The exact f32 value of `bits` in `format`; NaN payloads are kept.
inline float floatFromNarrow(uint16_t bits, NarrowFormat format) {
  uint32_t sign = uint32_t(bits >> 15) << 31;
  uint32_t exponentField =
      (bits >> format.mantissaBits) & ((1u << format.exponentBits) - 1);
  uint32_t mantissa = bits & ((1u << format.mantissaBits) - 1);
  int widen = 23 - format.mantissaBits;
  if (exponentField == (1u << format.exponentBits) - 1)
    return floatFromBits(sign | 0x7f800000 | (mantissa << widen));
  if (exponentField == 0) {
    float magnitude =
        std::ldexp(float(mantissa), 1 - format.bias() - format.mantissaBits);
    return floatFromBits(sign | bitsOf(magnitude));
  }
  uint32_t exponent = exponentField - format.bias() + 127;
  return floatFromBits(sign | (exponent << 23) | (mantissa << widen));
}

} // namespace fff::emulator

#endif // FFF_EMULATOR_FLOAT16_H

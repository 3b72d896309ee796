//===- DirectedRounding.cpp - Float arithmetic in .rz/.rm/.rp ---*- C++ -*-===//
//
// Operands pass through volatile objects so that the operation happens
// between the two rounding-mode changes, never folded or moved across them.
//
//===----------------------------------------------------------------------===//

#include "DirectedRounding.h"

#include <cfenv>
#include <cmath>

namespace fff::emulator {
namespace {

int fenvModeOf(Rounding rounding) {
  switch (rounding) {
  case Rounding::NearestEven:
    return FE_TONEAREST;
  case Rounding::TowardZero:
    return FE_TOWARDZERO;
  case Rounding::Down:
    return FE_DOWNWARD;
  case Rounding::Up:
    return FE_UPWARD;
  }
  return FE_TONEAREST;
}

class RoundingScope {
public:
  explicit RoundingScope(Rounding rounding) : saved(std::fegetround()) {
    std::fesetround(fenvModeOf(rounding));
  }
  ~RoundingScope() { std::fesetround(saved); }

private:
  int saved;
};

} // namespace

template <typename T> T addRounded(T a, T b, Rounding rounding) {
  volatile T x = a, y = b, result;
  RoundingScope scope(rounding);
  result = x + y;
  return result;
}

template <typename T> T subRounded(T a, T b, Rounding rounding) {
  volatile T x = a, y = b, result;
  RoundingScope scope(rounding);
  result = x - y;
  return result;
}

template <typename T> T mulRounded(T a, T b, Rounding rounding) {
  volatile T x = a, y = b, result;
  RoundingScope scope(rounding);
  result = x * y;
  return result;
}

template <typename T> T fmaRounded(T a, T b, T c, Rounding rounding) {
  volatile T x = a, y = b, z = c, result;
  RoundingScope scope(rounding);
  result = std::fma(T(x), T(y), T(z));
  return result;
}

template <typename T> T divRounded(T a, T b, Rounding rounding) {
  volatile T x = a, y = b, result;
  RoundingScope scope(rounding);
  result = x / y;
  return result;
}

template <typename T> T sqrtRounded(T a, Rounding rounding) {
  volatile T x = a, result;
  RoundingScope scope(rounding);
  result = std::sqrt(T(x));
  return result;
}

template <typename T, typename From>
T convertRounded(From value, Rounding rounding) {
  volatile From x = value;
  volatile T result;
  RoundingScope scope(rounding);
  result = T(x);
  return result;
}

template <typename T> T roundToIntegral(T value, Rounding rounding) {
  switch (rounding) {
  case Rounding::NearestEven:
    return std::nearbyint(value); // the default mode: ties to even
  case Rounding::TowardZero:
    return std::trunc(value);
  case Rounding::Down:
    return std::floor(value);
  case Rounding::Up:
    return std::ceil(value);
  }
  return value;
}

#define INSTANTIATE(T)                                                         \
  template T addRounded<T>(T, T, Rounding);                                    \
  template T subRounded<T>(T, T, Rounding);                                    \
  template T mulRounded<T>(T, T, Rounding);                                    \
  template T fmaRounded<T>(T, T, T, Rounding);                                 \
  template T divRounded<T>(T, T, Rounding);                                    \
  template T sqrtRounded<T>(T, Rounding);                                      \
  template T convertRounded<T, int64_t>(int64_t, Rounding);                    \
  template T convertRounded<T, uint64_t>(uint64_t, Rounding);                  \
  template T convertRounded<T, double>(double, Rounding);                      \
  template T roundToIntegral<T>(T, Rounding);
INSTANTIATE(float)
INSTANTIATE(double)
#undef INSTANTIATE

} // namespace fff::emulator

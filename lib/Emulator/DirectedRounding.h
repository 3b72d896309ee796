//===- DirectedRounding.h - Float arithmetic in .rz/.rm/.rp -----*- C++ -*-===//
//
// PTX names a rounding direction on each float instruction. Round to nearest
// even is the C++ default and runs inline; the directed modes are rare in
// fff's PTX, so they run out of line under the FPU's dynamic rounding mode
// (DirectedRounding.cpp is compiled with -frounding-math).
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_DIRECTEDROUNDING_H
#define FFF_EMULATOR_DIRECTEDROUNDING_H

#include "Float16.h"

#include <cstdint>

namespace fff::emulator {

// Each is correctly rounded in direction `rounding`; T is float or double.
template <typename T> T addRounded(T a, T b, Rounding rounding);
template <typename T> T subRounded(T a, T b, Rounding rounding);
template <typename T> T mulRounded(T a, T b, Rounding rounding);
template <typename T> T fmaRounded(T a, T b, T c, Rounding rounding);
template <typename T> T divRounded(T a, T b, Rounding rounding);
template <typename T> T sqrtRounded(T a, Rounding rounding);

/// Integer (int64_t or uint64_t) or double to T, rounded in `rounding`.
template <typename T, typename From>
T convertRounded(From value, Rounding rounding);

/// The integral value nearest `value` in direction `rounding` (.rni, .rzi,
/// .rmi, .rpi), ties to even.
template <typename T> T roundToIntegral(T value, Rounding rounding);

} // namespace fff::emulator

#endif // FFF_EMULATOR_DIRECTEDROUNDING_H

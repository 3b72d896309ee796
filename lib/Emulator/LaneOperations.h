//===- LaneOperations.h - One lane's operation over a warp ------*- C++ -*-===//
//
// The building blocks of register-to-register semantics: reading a
// register's bits as a C++ value and back, running a per-lane operation over
// the lanes of a warp, and choosing template instantiations by PTX type.
// Shared by Arithmetic.cpp and Conversions.cpp; everything here is internal
// to the library.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_LANEOPERATIONS_H
#define FFF_EMULATOR_LANEOPERATIONS_H

#include "Execution.h"

#include <cmath>
#include <type_traits>

namespace fff::emulator::laneops {

/// The low bits of a register as a T.
template <typename T> T as(uint64_t bits) {
  if constexpr (std::is_same_v<T, float>)
    return floatFromBits(uint32_t(bits));
  else if constexpr (std::is_same_v<T, double>)
    return doubleFromBits(bits);
  else
    return static_cast<T>(bits);
}

/// A T as register bits: signed integers sign-extended, others zero-extended.
template <typename T> uint64_t bitsFrom(T value) {
  if constexpr (std::is_floating_point_v<T>)
    return bitsOf(value);
  else if constexpr (std::is_signed_v<T>)
    return uint64_t(int64_t(value));
  else
    return uint64_t(value);
}

/// Sets register `destination` of each lane in `lanes` to `value(lane)`.
/// When no live lane is left out, all lanes are written (harmless for lanes
/// that exited or do not exist), so the loop has no per-lane test and
/// vectorizes.
template <typename ValueFn>
inline void writeLanes(ExecContext &context, RegisterIndex destination,
                       LaneMask lanes, ValueFn value) {
  uint64_t *result = context.warp->lane(destination);
  if ((lanes | ~context.warp->live()) == AllLanes) {
    for (unsigned lane = 0; lane < WarpSize; ++lane)
      result[lane] = value(lane);
    return;
  }
  forEachLane(lanes, [&](unsigned lane) { result[lane] = value(lane); });
}

/// d = Op(a) for operands of type A.
template <typename A, typename Op>
void unary(ExecContext &context, const Instruction &instruction,
           LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    return bitsFrom(Op::apply(as<A>(a[lane])));
  });
}

template <typename A, typename B, typename Op>
void binary(ExecContext &context, const Instruction &instruction,
            LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  const uint64_t *b = context.warp->lane(instruction.sources[1]);
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    return bitsFrom(Op::apply(as<A>(a[lane]), as<B>(b[lane])));
  });
}

template <typename A, typename B, typename C, typename Op>
void ternary(ExecContext &context, const Instruction &instruction,
             LaneMask lanes) {
  const uint64_t *a = context.warp->lane(instruction.sources[0]);
  const uint64_t *b = context.warp->lane(instruction.sources[1]);
  const uint64_t *c = context.warp->lane(instruction.sources[2]);
  writeLanes(context, instruction.destinations[0], lanes, [&](unsigned lane) {
    return bitsFrom(Op::apply(as<A>(a[lane]), as<B>(b[lane]), as<C>(c[lane])));
  });
}

//===----------------------------------------------------------------------===//
// Floats
//===----------------------------------------------------------------------===//

/// NVIDIA GPUs return this NaN from any float operation whose result is NaN.
template <typename T> T canonicalNaN() {
  if constexpr (std::is_same_v<T, float>)
    return floatFromBits(0x7fffffff);
  else
    return doubleFromBits(0x7fffffffffffffff);
}

template <typename T> T canonicalize(T value) {
  return value != value ? canonicalNaN<T>() : value;
}

template <typename T> T flushSubnormal(T value) {
  return std::fpclassify(value) == FP_SUBNORMAL ? std::copysign(T(0), value)
                                                : value;
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

/// Names a C++ type for the generic lambdas below.
template <typename T> struct TypeTag { using type = T; };

/// `select(TypeTag<T>())` for the C++ type T of integer type `type`; null for
/// a type that is not an integer.
template <typename Select>
ExecuteFn withIntegerType(ScalarType type, Select select) {
  switch (type) {
  case ScalarType::U8:
  case ScalarType::B8:
    return select(TypeTag<uint8_t>());
  case ScalarType::U16:
  case ScalarType::B16:
    return select(TypeTag<uint16_t>());
  case ScalarType::U32:
  case ScalarType::B32:
    return select(TypeTag<uint32_t>());
  case ScalarType::U64:
  case ScalarType::B64:
    return select(TypeTag<uint64_t>());
  case ScalarType::S8:
    return select(TypeTag<int8_t>());
  case ScalarType::S16:
    return select(TypeTag<int16_t>());
  case ScalarType::S32:
    return select(TypeTag<int32_t>());
  case ScalarType::S64:
    return select(TypeTag<int64_t>());
  default:
    return nullptr;
  }
}

/// `select(TypeTag<T>())` for f32 (float) and f64 (double); null otherwise.
template <typename Select>
ExecuteFn withFloatType(ScalarType type, Select select) {
  if (type == ScalarType::F32)
    return select(TypeTag<float>());
  if (type == ScalarType::F64)
    return select(TypeTag<double>());
  return nullptr;
}

} // namespace fff::emulator::laneops

#endif // FFF_EMULATOR_LANEOPERATIONS_H

//===- Activation.h - scalar IR for fff activations -------------*- C++ -*-===//
//
// One definition of every activation, shared by the CPU and GPU lowerings so
// that both compute exactly the same function.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_DIALECT_FFF_UTILS_ACTIVATION_H
#define FFF_DIALECT_FFF_UTILS_ACTIVATION_H

#include "fff/Dialect/FFF/IR/FFFOps.h"

namespace mlir {
class OpBuilder;
} // namespace mlir

namespace fff {

/// Emits `activation(x)` for an f32 scalar or vector `x` with arith/math ops.
mlir::Value buildActivation(mlir::OpBuilder &builder, mlir::Location loc,
                            Activation activation, mlir::Value x);

/// Emits `activation'(x)`, the derivative, for an f32 scalar or vector `x`
/// (relu's is 0 at 0, as torch's).
mlir::Value buildActivationSlope(mlir::OpBuilder &builder, mlir::Location loc,
                                 Activation activation, mlir::Value x);

} // namespace fff

#endif // FFF_DIALECT_FFF_UTILS_ACTIVATION_H

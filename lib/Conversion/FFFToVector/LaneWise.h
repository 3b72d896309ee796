//===- LaneWise.h - elementwise payloads evaluated on vectors ---*- C++ -*-===//
//
// An elementwise linalg.generic's payload computes one element from one
// element of each operand. Applied to vectors instead, lane by lane, it
// computes `lanes` elements with the same ops in the same order: the CPU
// lowerings use this to evaluate a norm's prologue as the norm reads its
// rows, and elementwise work a vector at a time.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOVECTOR_LANEWISE_H
#define FFF_LIB_CONVERSION_FFFTOVECTOR_LANEWISE_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Block.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace fff {

/// Whether `body` can be evaluated lane by lane: its ops are elementwise
/// (arith, math) without regions, or constants, and whatever they take from
/// outside the body is a scalar. Not math.fpowi, whose vector form LLVM
/// cannot lower, nor integer division or remainder: a masked-off lane (a
/// zero) would trap.
bool isLaneWisePayload(mlir::Block &body);

/// Whether buffers of `type` hold elements that a vector load reads as
/// scalar loads do: floats, and integers of whole bytes. (A vector of i1 is
/// packed into bits, a buffer of i1 holds a byte per element.)
bool isVectorElement(mlir::Type type);

/// Whether `generic` computes its one result elementwise from tensors of
/// the result's shape alone: all loops parallel, identity maps, its result
/// not read, elements vector loads read, a lane-wise payload. Such an op
/// can be computed a vector at a time wherever a row of its result is.
bool isSameShapeElementwise(mlir::linalg::GenericOp generic);

/// The elementwise linalg.generic that computes `input` for its one
/// reader alone (a norm's prologue, such as a residual add or a dropout
/// mask applied to a gradient), if there is one: isSameShapeElementwise,
/// with one input at least (the reader takes the rows' extents from it;
/// elementwise fusion drops the inputs of a generic that yields a
/// constant). The reader then computes it as it reads each row, instead of
/// reading a buffer the generic would have written.
mlir::linalg::GenericOp elementwisePrologue(mlir::Value input);

/// The elementwise linalg.generic that alone reads `result`, `producer`'s,
/// shaped like it (a residual add, a cast), if whatever else it reads is
/// ready where `producer` is: the producer then applies it to each vector
/// of `result` as it writes it, and `result` itself is never stored. With
/// `extentsKept`, readers of `result`'s extents alone (tensor.dim, which
/// elementwise-to-linalg leaves to size the epilogue's init) do not count:
/// the producer leaves a tensor of `result`'s shape in its place.
mlir::linalg::GenericOp elementwiseEpilogue(mlir::Value result,
                                            mlir::Operation *producer,
                                            bool extentsKept = false);

/// Whether `epilogue` (an elementwiseEpilogue) only narrows its one input,
/// an f32 row, to its own float type, rounding to nearest even: what a
/// store of the f32 row into a buffer of that type does (VectorEmitter's
/// narrow() gives arith.truncf's bits), so the writer stores the row there
/// instead of evaluating the cast.
bool isNarrowingEpilogue(mlir::linalg::GenericOp epilogue);

/// The values `body` yields when its leading block arguments are
/// `operands`: scalars (`lanes` 0) or vectors of `lanes` elements, to which
/// each of its ops applies lane by lane. Scalars from outside the body are
/// the same in every lane.
llvm::SmallVector<mlir::Value> evaluateLaneWise(mlir::ImplicitLocOpBuilder &b,
                                                mlir::Block &body,
                                                mlir::ValueRange operands,
                                                int64_t lanes);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOVECTOR_LANEWISE_H

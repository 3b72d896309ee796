//===- CPUElementwiseStrategy.h - elementwise work on CPU vectors -*- C++ -*-//
//
// The one place where the CPU lowering decides the shape of an elementwise
// op's loops (convert-elementwise-to-vector): its vectors, and from what
// size its rows are split across threads. The choice is recorded on the
// row loop as `fff.strategy`.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_CONVERSION_FFFTOVECTOR_CPUELEMENTWISESTRATEGY_H
#define FFF_CONVERSION_FFFTOVECTOR_CPUELEMENTWISESTRATEGY_H

#include "fff/Conversion/FFFToVector/CPUVectorShape.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cstdint>

namespace fff {

/// Of the vector shape, only the width and lanes matter here: a vector holds
/// as many elements as f32 lanes fill a register, whatever the element types
/// (LLVM splits a vector of wider elements in two).
struct CPUElementwiseStrategy : CPUVectorShape {
  /// The fewest elements from which the rows are split across threads.
  int64_t minParallelElements;

  /// The strategy as an attribute, for `fff.strategy` on the row loop.
  mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
};

/// The strategy for elementwise ops on `target`.
CPUElementwiseStrategy selectCPUElementwiseStrategy(const CPUTarget &target);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOVECTOR_CPUELEMENTWISESTRATEGY_H

//===- RowLoops.h - loops over independent rows, threaded when large -*- C++
//-*-===//
//
// The CPU lowerings compute each row (a norm's row, a tree layer's token)
// independently of the others. This is the one place that decides how such
// rows are looped over: split across threads (an scf.parallel, which the CPU
// pipeline hands to MLIR's async runtime) when there is enough work to pay
// for waking the threads, else in the calling thread. A row is computed the
// same way in either loop, so the thread count never changes a result.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_CONVERSION_ROWLOOPS_H
#define FFF_CONVERSION_ROWLOOPS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace fff {

/// Points `b` at `nested`'s insertion point (inside a region a builder
/// callback is filling) for the guard's lifetime, so that code written
/// against `b` builds there.
struct BuildInside {
  BuildInside(mlir::ImplicitLocOpBuilder &b, mlir::OpBuilder &nested)
      : guard(b) {
    b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
  }
  mlir::OpBuilder::InsertionGuard guard;
};

/// Builds, at `b`'s insertion point, `if (work >= minParallelWork)
/// scf.parallel (row) in [0, rows) else scf.for (row) in [0, rows)`, each
/// calling `body(row)` with `b` inside the loop. `strategy`, if given, is
/// recorded on the parallel loop as `fff.strategy`.
void buildRowLoop(mlir::ImplicitLocOpBuilder &b, mlir::Value rows,
                  mlir::Value work, int64_t minParallelWork,
                  mlir::DictionaryAttr strategy,
                  llvm::function_ref<void(mlir::Value row)> body);

} // namespace fff

#endif // FFF_CONVERSION_ROWLOOPS_H

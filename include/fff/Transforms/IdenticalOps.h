//===- IdenticalOps.h - ops that do the same work on other values -*- C++ -*-===//
//
// Repeated layers repeat their ops. The lowerings emit one kernel (GPU) or
// one function (CPU) for each kind of op, and find the kinds here.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_TRANSFORMS_IDENTICALOPS_H
#define FFF_TRANSFORMS_IDENTICALOPS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

namespace fff {

/// For each op, the index of the first op identical to it: the same op,
/// attributes, operand and result types and body, whatever values it is
/// applied to. What a body reads from outside must be the same constant in
/// both (the kernel or function holds it) or, in both, no constant (a
/// parameter).
llvm::SmallVector<unsigned>
kindsOfIdenticalOps(llvm::ArrayRef<mlir::Operation *> ops);

} // namespace fff

#endif // FFF_TRANSFORMS_IDENTICALOPS_H

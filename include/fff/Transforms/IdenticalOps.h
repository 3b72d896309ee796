//===- IdenticalOps.h - ops that do the same work on other values -*- C++
//-*-===//
//
// Repeated layers repeat their ops. The lowerings emit one kernel (GPU) or
// one function (CPU) for each kind of op: they find the kinds here, and
// outline an op into its kind's function here.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_TRANSFORMS_IDENTICALOPS_H
#define FFF_TRANSFORMS_IDENTICALOPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SmallVector.h"

namespace fff {

/// For each op, the index of the first op identical to it: the same op,
/// attributes, operand and result types and body, whatever values it is
/// applied to. What a body reads from outside must be the same constant in
/// both (the kernel or function holds it) or, in both, no constant (a
/// parameter).
llvm::SmallVector<unsigned>
kindsOfIdenticalOps(llvm::ArrayRef<mlir::Operation *> ops);

/// A private function `name` (renamed if the name is taken) at the end of
/// `module`, whose body is a copy of `op`; and the copy. The function takes
/// `op`'s operands, then `captured`: the values `op`'s regions read from
/// outside it, which are not constants. It holds copies of `constants`, the
/// constants they read from outside. Identical ops (kindsOfIdenticalOps)
/// capture corresponding values in the same order.
std::pair<mlir::func::FuncOp, mlir::Operation *>
outlineOp(mlir::OpBuilder &b, mlir::SymbolTable &symbols, mlir::ModuleOp module,
          mlir::Operation *op, llvm::StringRef name,
          mlir::ValueRange captured = {}, mlir::ValueRange constants = {});

} // namespace fff

#endif // FFF_TRANSFORMS_IDENTICALOPS_H

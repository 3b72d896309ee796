//===- FFFOps.h - fff operations --------------------------------*- C++ -*-===//

#ifndef FFF_DIALECT_FFF_IR_FFFOPS_H
#define FFF_DIALECT_FFF_IR_FFFOPS_H

#include "fff/Dialect/FFF/IR/FFFDialect.h"
#include "fff/Dialect/FFF/IR/ShapeContract.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fff/Dialect/FFF/IR/FFFEnums.h.inc"
#include "fff/Dialect/FFF/IR/FFFInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fff/Dialect/FFF/IR/FFFAttrs.h.inc"

#define GET_OP_CLASSES
#include "fff/Dialect/FFF/IR/FFFOps.h.inc"

namespace fff {
/// Largest tree depth the ops accept. A depth-20 tree_ffn already has 2M
/// neurons per tree; beyond that node indices stop fitting comfortably in the
/// i32 arithmetic the kernels use.
constexpr int64_t kMaxTreeDepth = 20;
} // namespace fff

#endif // FFF_DIALECT_FFF_IR_FFFOPS_H

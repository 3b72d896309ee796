//===- FFFDialect.cpp - fff dialect registration ----------------*- C++ -*-===//

#include "fff/Dialect/FFF/IR/FFFDialect.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace fff;

#include "fff/Dialect/FFF/IR/FFFOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fff/Dialect/FFF/IR/FFFAttrs.cpp.inc"

void FFFDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fff/Dialect/FFF/IR/FFFOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fff/Dialect/FFF/IR/FFFAttrs.cpp.inc"
      >();
}

//===- FFFDialect.h - fff dialect -------------------------------*- C++ -*-===//

#ifndef FFF_DIALECT_FFF_IR_FFFDIALECT_H
#define FFF_DIALECT_FFF_IR_FFFDIALECT_H

#include "mlir/IR/Dialect.h"

#include "fff/Dialect/FFF/IR/FFFOpsDialect.h.inc"

#endif // FFF_DIALECT_FFF_IR_FFFDIALECT_H

//===- Passes.h - fff dialect transformations -------------------*- C++ -*-===//

#ifndef FFF_DIALECT_FFF_TRANSFORMS_PASSES_H
#define FFF_DIALECT_FFF_TRANSFORMS_PASSES_H

#include "fff/Dialect/FFF/IR/FFFDialect.h"
#include "mlir/Pass/Pass.h"

namespace fff {

#define GEN_PASS_DECL
#include "fff/Dialect/FFF/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fff/Dialect/FFF/Transforms/Passes.h.inc"

} // namespace fff

#endif // FFF_DIALECT_FFF_TRANSFORMS_PASSES_H

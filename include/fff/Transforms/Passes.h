//===- Passes.h - fff passes over any dialect -------------------*- C++ -*-===//

#ifndef FFF_TRANSFORMS_PASSES_H
#define FFF_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

namespace fff {

#define GEN_PASS_DECL
#include "fff/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fff/Transforms/Passes.h.inc"

} // namespace fff

#endif // FFF_TRANSFORMS_PASSES_H

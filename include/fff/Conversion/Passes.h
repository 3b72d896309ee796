//===- Passes.h - fff conversion passes -------------------------*- C++ -*-===//

#ifndef FFF_CONVERSION_PASSES_H
#define FFF_CONVERSION_PASSES_H

#include "fff/Conversion/FFFToGPU/FFFToGPU.h"
#include "fff/Conversion/FFFToLoops/FFFToLoops.h"
#include "fff/Conversion/FFFToVector/FFFToVector.h"
#include "mlir/Pass/Pass.h"

namespace fff {

#define GEN_PASS_DECL
#include "fff/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fff/Conversion/Passes.h.inc"

} // namespace fff

#endif // FFF_CONVERSION_PASSES_H

//===- ExtractPTX.h - the PTX of a compiled module's kernels ----*- C++ -*-===//

#ifndef FFF_TARGET_PTX_EXTRACTPTX_H
#define FFF_TARGET_PTX_EXTRACTPTX_H

#include "llvm/Support/LogicalResult.h"

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir {
class Operation;
} // namespace mlir

namespace fff {

/// Prints the PTX of every kernel in `module`, a module after
/// --fff-gpu-pipeline (the text objects of its gpu.binary ops). Fails, with
/// an error on the module, when it holds no PTX.
llvm::LogicalResult extractPTX(mlir::Operation *module, llvm::raw_ostream &os);

/// Registers `extractPTX` as the translation --fff-extract-ptx.
void registerExtractPTXTranslation();

} // namespace fff

#endif // FFF_TARGET_PTX_EXTRACTPTX_H

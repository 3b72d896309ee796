//===- InitFFF.h - registration entry points for embedders ------*- C++ -*-===//
//
// The one header another compiler includes to use fff. Its two calls are
// all a tool needs to run every fff pass and pipeline, and fff's
// translations: they register nothing fff does not use, and need none of
// MLIR's registerAll* functions.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_INITFFF_H
#define FFF_INITFFF_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace fff {

/// Adds to `registry` the fff dialect, every dialect fff's passes create,
/// the external models the pipelines need (bufferization, lowering to LLVM,
/// the NVVM target) and the translations to LLVM IR that compiling kernels
/// to PTX uses.
void registerFFFDialects(mlir::DialectRegistry &registry);

/// Registers fff's passes, its pipelines (fff-cpu-pipeline,
/// fff-gpu-pipeline) and its translation (fff-extract-ptx) with MLIR's
/// global registries, so that they can be named on a command line or in a
/// textual pipeline.
void registerFFFPasses();

} // namespace fff

#endif // FFF_INITFFF_H

//===- InitFFF.h - registration entry points for embedders ------*- C++ -*-===//
//
// The one header another compiler includes to use fff: it registers fff's
// dialect, the dialects fff's passes produce, and fff's passes and pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_INITFFF_H
#define FFF_INITFFF_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace fff {

/// Adds the fff dialect and every dialect that fff's passes create to
/// `registry`.
void registerFFFDialects(mlir::DialectRegistry &registry);

/// Registers fff's passes and pass pipelines with MLIR's global registry, so
/// that they can be named on a command line or in a textual pipeline.
void registerFFFPasses();

} // namespace fff

#endif // FFF_INITFFF_H

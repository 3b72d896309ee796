//===- FFFToGPU.h - fff ops to GPU kernels ----------------------*- C++ -*-===//

#ifndef FFF_CONVERSION_FFFTOGPU_FFFTOGPU_H
#define FFF_CONVERSION_FFFTOGPU_FFFTOGPU_H

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace fff {

/// Patterns lowering fff.layer_norm and fff.rms_norm to one gpu.launch each,
/// with the kernel strategy from selectNormStrategy; with `cpuTwin`, to the
/// kernels' CPU-executable twins instead.
void populateFFFNormsToGPUPatterns(mlir::RewritePatternSet &patterns,
                                   bool cpuTwin = false);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOGPU_FFFTOGPU_H

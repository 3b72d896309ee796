//===- FFFToVector.h - fff norms and trees to CPU vector loops --*- C++ -*-===//

#ifndef FFF_CONVERSION_FFFTOVECTOR_FFFTOVECTOR_H
#define FFF_CONVERSION_FFFTOVECTOR_FFFTOVECTOR_H

#include "fff/Conversion/FFFToVector/CPUVectorShape.h"

#include <cstdint>

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace fff {

/// Patterns lowering fff.layer_norm and fff.rms_norm to row loops of
/// vector code over buffers, for `target`; see the
/// `convert-fff-norms-to-vector` pass.
void populateFFFNormsToVectorPatterns(mlir::RewritePatternSet &patterns,
                                      const CPUTarget &target);

/// Patterns lowering fff.layer_norm_grad and fff.rms_norm_grad to loops over
/// blocks of rows of vector code, for `target` (part of
/// populateFFFNormsToVectorPatterns).
void populateFFFNormGradsToVectorPatterns(mlir::RewritePatternSet &patterns,
                                          const CPUTarget &target);

/// Patterns lowering fff.tree_ffn and fff.leaf_tree_ffn to token loops of
/// vector code over buffers, for `target` and a per-core cache of
/// `cacheBytes` (0: this host's); see the `convert-fff-trees-to-vector`
/// pass.
void populateFFFTreesToVectorPatterns(mlir::RewritePatternSet &patterns,
                                      const CPUTarget &target,
                                      int64_t cacheBytes);

/// The pattern lowering fff.tree_ffn_grad to loops of vector code over
/// buffers, for `target`, its walk's strategy sized for `cacheBytes` (0:
/// this host's) as the forward's is (part of
/// populateFFFTreesToVectorPatterns).
void populateFFFTreeGradsToVectorPatterns(mlir::RewritePatternSet &patterns,
                                          const CPUTarget &target,
                                          int64_t cacheBytes);

/// The pattern lowering fff.leaf_tree_ffn_grad to loops of vector code over
/// buffers, for `target`, its routing's strategy sized for `cacheBytes` (0:
/// this host's) as the forward's is (part of
/// populateFFFTreesToVectorPatterns).
void populateFFFLeafTreeGradsToVectorPatterns(
    mlir::RewritePatternSet &patterns, const CPUTarget &target,
    int64_t cacheBytes);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOVECTOR_FFFTOVECTOR_H

//===- FFFToLoops.h - fff to linalg/scf reference lowering ------*- C++ -*-===//

#ifndef FFF_CONVERSION_FFFTOLOOPS_FFFTOLOOPS_H
#define FFF_CONVERSION_FFFTOLOOPS_FFFTOLOOPS_H

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace fff {

/// Patterns lowering every fff op to linalg.generic (norms) or scf loops over
/// buffers (tree ops); see the `convert-fff-to-loops` pass.
void populateFFFToLoopsPatterns(mlir::RewritePatternSet &patterns);

/// Patterns lowering fff.layer_norm_grad and fff.rms_norm_grad to
/// linalg.generic ops (part of populateFFFToLoopsPatterns).
void populateNormGradsToLoopsPatterns(mlir::RewritePatternSet &patterns);

/// The pattern lowering fff.tree_ffn_grad to scf loops over buffers (part of
/// populateFFFToLoopsPatterns).
void populateTreeGradsToLoopsPatterns(mlir::RewritePatternSet &patterns);

/// The pattern lowering fff.leaf_tree_ffn_grad to scf loops over buffers
/// (part of populateFFFToLoopsPatterns).
void populateLeafTreeGradsToLoopsPatterns(mlir::RewritePatternSet &patterns);

/// The pattern that inlines each fff.fusion unit's body in its place, as the
/// CPU runs a unit.
void populateInlineFusionPatterns(mlir::RewritePatternSet &patterns);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOLOOPS_FFFTOLOOPS_H

//===- FFFToVector.h - fff norms to CPU vector loops ------------*- C++ -*-===//

#ifndef FFF_CONVERSION_FFFTOVECTOR_FFFTOVECTOR_H
#define FFF_CONVERSION_FFFTOVECTOR_FFFTOVECTOR_H

#include <cstdint>

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace fff {

/// Patterns lowering fff.layer_norm and fff.rms_norm to row loops of
/// vector code over buffers, for vector registers of `vectorBits` (0: this
/// host's); see the `convert-fff-norms-to-vector` pass.
void populateFFFNormsToVectorPatterns(mlir::RewritePatternSet &patterns,
                                      int64_t vectorBits);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOVECTOR_FFFTOVECTOR_H

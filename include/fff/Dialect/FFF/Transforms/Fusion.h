//===- Fusion.h - forming fff.fusion units ----------------------*- C++ -*-===//
//
// What fff-fuse-norms does, for the lowerings that take a unit apart again:
// a unit that no kernel takes is inlined (and a sublayer's norm fused with
// its pointwise neighbours on its own), as the CPU runs every unit.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_DIALECT_FFF_TRANSFORMS_FUSION_H
#define FFF_DIALECT_FFF_TRANSFORMS_FUSION_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Support/LLVM.h"

namespace fff {

class FusionOp;

/// Replaces the unit `unit` by its body, run on `inputs` (its own inputs,
/// or a conversion's remapped ones) as written.
void inlineUnit(mlir::RewriterBase &rewriter, FusionOp unit,
                mlir::ValueRange inputs);

/// Replaces the norm `norm` (not in a unit) and the pointwise ops around it
/// by one fff.fusion; fails, changing nothing, when no op joins it or the
/// unit cannot be placed.
mlir::LogicalResult fuseNormWithNeighbours(mlir::Operation *norm);

} // namespace fff

#endif // FFF_DIALECT_FFF_TRANSFORMS_FUSION_H

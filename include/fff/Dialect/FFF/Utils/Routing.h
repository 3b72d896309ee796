//===- Routing.h - the routing decision of fff's tree walks -----*- C++ -*-===//
//
// One definition of which way a row goes at a tree node, shared by every
// lowering of a tree walk (loops, CPU vectors, GPU kernels, forward and
// backward) so that all of them route a row alike.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_DIALECT_FFF_UTILS_ROUTING_H
#define FFF_DIALECT_FFF_UTILS_ROUTING_H

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace fff {

/// The comparison of a node's logit with 0 that sends a row to the right
/// child. A logit of exactly 0 (either sign; NaN never goes right) goes left
/// (`ogt`), or right where `zeroGoesRight` (`oge`): tree_ffn's
/// `zero_goes_right`, and leaf_tree_ffn's walk, which always sends it right.
inline mlir::arith::CmpFPredicate goRightPredicate(bool zeroGoesRight) {
  return zeroGoesRight ? mlir::arith::CmpFPredicate::OGE
                       : mlir::arith::CmpFPredicate::OGT;
}

} // namespace fff

#endif // FFF_DIALECT_FFF_UTILS_ROUTING_H

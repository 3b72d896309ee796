//===- NormTerms.h - what the norm matchers share ---------------*- C++ -*-===//
//
// The pieces of Term matching that the forward norms (RaiseNorms.cpp) and
// their backward (RaiseNormGrads.cpp) share: constants, the row shape a
// match assumes, flattened products, and the tensors a Term reads.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_DIALECT_FFF_TRANSFORMS_NORMTERMS_H
#define FFF_LIB_DIALECT_FFF_TRANSFORMS_NORMTERMS_H

#include "ScalarTerms.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

#include <optional>

namespace fff {

inline bool isConstant(const Term *t, double value) {
  return t->is(Term::Kind::Constant) && sameConstant(t->constant, value);
}

/// What the row statistics of one norm must agree on.
struct RowShape {
  int64_t rank;    // of the root iteration space
  int64_t reduced; // trailing dims normalized over
  double count;    // N, their static element count
};

/// mean(inner) over the trailing dims: sum(inner) / N or sum(inner) * (1/N).
inline Term *matchMean(Term *t, const RowShape &row) {
  auto sumOf = [&](Term *s) -> Term * {
    return s->is(Term::Kind::RowSum) && s->reduced == row.reduced
               ? s->operand(0)
               : nullptr;
  };
  if (t->is(Term::Kind::Div) && isConstant(t->operand(1), row.count))
    return sumOf(t->operand(0));
  if (t->is(Term::Kind::Mul))
    for (int i : {0, 1})
      if (t->operand(i)->is(Term::Kind::Constant) &&
          sameConstant(t->operand(i)->constant * row.count, 1.0))
        return sumOf(t->operand(1 - i));
  return nullptr;
}

/// `t` squared: t * t.
inline bool isSquareOf(const Term *square, const Term *t) {
  return square->is(Term::Kind::Mul) && equal(square->operand(0), t) &&
         equal(square->operand(1), t);
}

/// `match(row)` for each row shape of a root of `type` (one trailing dim
/// reduced, two, ...) until one matches; N must be static.
template <typename Match>
auto matchEachRowShape(mlir::RankedTensorType type, Match match)
    -> decltype(match(RowShape{})) {
  int64_t rank = type.getRank();
  for (int64_t reduced = 1; reduced <= rank; ++reduced) {
    llvm::ArrayRef<int64_t> trailing = type.getShape().take_back(reduced);
    if (llvm::any_of(trailing, mlir::ShapedType::isDynamic))
      break;
    RowShape row{rank, reduced, 1.0};
    for (int64_t extent : trailing)
      row.count *= extent;
    if (auto found = match(row))
      return found;
  }
  return std::nullopt;
}

/// The multiplicands and divisors of a product, flattened through
/// multiplications and divisions; false past `limit` of them (a norm has
/// at most three, and a product DAG can be exponentially wide).
struct Factors {
  llvm::SmallVector<Term *, 4> numerators, denominators;

  bool add(Term *t, bool divides, size_t limit = 4) {
    if (t->is(Term::Kind::Mul))
      return add(t->operand(0), divides, limit) &&
             add(t->operand(1), divides, limit);
    if (t->is(Term::Kind::Div))
      return add(t->operand(0), divides, limit) &&
             add(t->operand(1), !divides, limit);
    if (!isConstant(t, 1.0))
      (divides ? denominators : numerators).push_back(t);
    return numerators.size() + denominators.size() <= limit;
  }
};

/// The tensor whose every element `t` reads at the root's own index, of the
/// root's type if several are (an input and its upcast, say).
inline mlir::Value fullRead(const Term *t, mlir::RankedTensorType preferred) {
  mlir::Value found;
  for (auto [tensor, map] : t->origins) {
    if (!map.isIdentity() || map.getNumDims() != unsigned(preferred.getRank()))
      continue;
    if (tensor.getType() == preferred)
      return tensor;
    if (!found)
      found = tensor;
  }
  return found;
}

/// A tensor `t` reads as a norm parameter: shaped like the trailing dims and
/// read at them, of element type `preferred` if several are.
inline mlir::Value trailingRead(const Term *t, const RowShape &row,
                                mlir::Type preferred) {
  mlir::Value found;
  for (auto [tensor, map] : t->origins) {
    if (map.getNumResults() != unsigned(row.reduced) ||
        llvm::any_of(llvm::enumerate(map.getResults()), [&](auto result) {
          return result.value() !=
                 mlir::getAffineDimExpr(row.rank - row.reduced + result.index(),
                                        map.getContext());
        }))
      continue;
    if (mlir::getElementTypeOrSelf(tensor.getType()) == preferred)
      return tensor;
    if (!found)
      found = tensor;
  }
  return found;
}

/// What a matched norm backward needs to be rebuilt as fff.layer_norm_grad
/// or fff.rms_norm_grad (no mean; rstd null where it is recomputed from
/// x with `epsilon`).
struct NormGradMatch {
  mlir::Value gradOutput, input, mean, rstd, gamma;
  int64_t normalizedRank;
  double epsilon = 0;
};

/// The LayerNorm backward's dx that `root` computes, as torch's
/// decomposition of native_layer_norm_backward writes it; nullopt if it is
/// not one (RaiseNormGrads.cpp).
std::optional<NormGradMatch> matchLayerNormGrad(Term *root,
                                                mlir::RankedTensorType type);

/// The RMSNorm backward's dx that `root` computes, as AOTAutograd
/// decomposes the backward of a hand-written RMSNorm; nullopt if it is not
/// one (RaiseNormGrads.cpp).
std::optional<NormGradMatch> matchRMSNormGrad(Term *root,
                                              mlir::RankedTensorType type);

/// Replaces the sums over the rows that compute `grad`'s dgamma
/// (dy * xhat) and dbeta (dy) by the results of one fff.layer_norm_grad,
/// which then stands for `grad` too (RaiseNormGrads.cpp).
void raiseParameterGradients(mlir::RewriterBase &rewriter,
                             LayerNormGradOp grad);

} // namespace fff

#endif // FFF_LIB_DIALECT_FFF_TRANSFORMS_NORMTERMS_H

//===- RaiseNormGrads.cpp - a decomposed LayerNorm backward -----*- C++ -*-===//
//
// fff-raise-norms' matcher for the dx of a LayerNorm backward, in the form
// torch's decomposition of aten.native_layer_norm_backward writes it (and
// torch-mlir and AOTAutograd emit):
//
//   xhat = (x - mean) * rstd,   g = dy * gamma (or dy)
//   dx   = (rstd / N) * ((g * N - sum(g)) - xhat * sum(g * xhat))
//
// with mean and rstd the forward's saved statistics: f32 tensors shaped
// [leading dims, ones] read at each row. Products commute; the 1/N may be
// a division or a multiplication. Anything else (another N, another rstd in
// xhat than outside, sums over other dims) is not a LayerNorm's gradient
// and stays as it is. dgamma and dbeta, sums over the rows, stay linalg.
//
//===----------------------------------------------------------------------===//

#include "NormTerms.h"

using namespace mlir;
using namespace fff;

namespace {

using Kind = Term::Kind;

/// The tensor `t` reads as a per-row statistic: an f32 tensor of the
/// root's rank, shaped [leading dims, ones], read at (leading dims, 0...).
Value statisticRead(const Term *t, const RowShape &row) {
  int64_t leading = row.rank - row.reduced;
  for (auto [tensor, map] : t->origins) {
    auto type = dyn_cast<RankedTensorType>(tensor.getType());
    if (!type || !type.getElementType().isF32() ||
        type.getRank() != row.rank || map.getNumResults() != row.rank)
      continue;
    bool fits = true;
    for (int64_t dim = 0; dim < row.rank && fits; ++dim) {
      AffineExpr expr = map.getResult(dim);
      if (dim < leading) {
        fits = expr == getAffineDimExpr(dim, map.getContext());
        continue;
      }
      auto constant = dyn_cast<AffineConstantExpr>(expr);
      fits = constant && constant.getValue() == 0 && type.getDimSize(dim) == 1;
    }
    if (fits)
      return tensor;
  }
  return Value();
}

bool isRowSum(const Term *t, const RowShape &row) {
  return t->is(Kind::RowSum) && t->reduced == row.reduced;
}

/// Whether `product` is a * b, in either order.
bool isProductOf(const Term *product, const Term *a, const Term *b) {
  if (!product->is(Kind::Mul))
    return false;
  for (int i : {0, 1})
    if (equal(product->operand(i), a) && equal(product->operand(1 - i), b))
      return true;
  return false;
}

/// Whether `scaled` is t * N.
bool isTimesCount(const Term *scaled, const Term *t, const RowShape &row) {
  if (!scaled->is(Kind::Mul))
    return false;
  for (int i : {0, 1})
    if (isConstant(scaled->operand(i), row.count) &&
        equal(scaled->operand(1 - i), t))
      return true;
  return false;
}

class GradMatcher {
public:
  GradMatcher(const RowShape &row, RankedTensorType type)
      : row(row), type(type) {}

  /// root = (1/N) * rstd * inner, the factors in any order.
  std::optional<NormGradMatch> match(Term *root) {
    Factors factors;
    if (!factors.add(root, /*divides=*/false))
      return std::nullopt;
    double scale = 1.0;
    SmallVector<Term *, 2> rest;
    for (Term *t : factors.numerators) {
      if (t->is(Kind::Constant))
        scale *= t->constant;
      else
        rest.push_back(t);
    }
    for (Term *t : factors.denominators) {
      if (!t->is(Kind::Constant) || t->constant == 0)
        return std::nullopt;
      scale /= t->constant;
    }
    if (!sameConstant(scale * row.count, 1.0) || rest.size() != 2)
      return std::nullopt;
    for (int i : {0, 1})
      if (auto found = matchInner(rest[i], rest[1 - i]))
        return found;
    return std::nullopt;
  }

private:
  /// inner = (g * N - sum(g)) - xhat * sum(g * xhat).
  std::optional<NormGradMatch> matchInner(Term *rstd, Term *inner) {
    if (!inner->is(Kind::Sub) || !inner->operand(0)->is(Kind::Sub))
      return std::nullopt;
    Term *centred = inner->operand(0), *projection = inner->operand(1);
    Term *sumG = centred->operand(1);
    if (!isRowSum(sumG, row))
      return std::nullopt;
    Term *g = sumG->operand(0);
    if (!isTimesCount(centred->operand(0), g, row) ||
        !projection->is(Kind::Mul))
      return std::nullopt;
    for (int i : {0, 1}) {
      Term *xhat = projection->operand(i), *sum = projection->operand(1 - i);
      if (isRowSum(sum, row) && isProductOf(sum->operand(0), g, xhat))
        if (auto found = matchOperands(rstd, xhat, g))
          return found;
    }
    return std::nullopt;
  }

  /// xhat = (x - mean) * rstd, with the rstd outside; g = dy [* gamma].
  std::optional<NormGradMatch> matchOperands(Term *rstd, Term *xhat, Term *g) {
    if (!xhat->is(Kind::Mul))
      return std::nullopt;
    for (int i : {0, 1}) {
      Term *centred = xhat->operand(i);
      if (!equal(xhat->operand(1 - i), rstd) || !centred->is(Kind::Sub))
        continue;
      NormGradMatch match{Value(),
                          fullRead(centred->operand(0), type),
                          statisticRead(centred->operand(1), row),
                          statisticRead(rstd, row),
                          Value(),
                          row.reduced};
      if (!match.input || match.input.getType() != type || !match.mean ||
          !match.rstd)
        continue;
      if (withGradient(match, g))
        return match;
    }
    return std::nullopt;
  }

  /// dy and gamma of g = dy * gamma; or, failing that, g itself as dy (its
  /// dx is the same: the backward reads dy only through g).
  bool withGradient(NormGradMatch &match, Term *g) {
    Type element = type.getElementType();
    if (g->is(Kind::Mul))
      for (int i : {0, 1}) {
        Value dy = fullRead(g->operand(i), type);
        Value gamma = trailingRead(g->operand(1 - i), row, element);
        if (dy && dy.getType() == type && gamma &&
            getElementTypeOrSelf(gamma.getType()) == element) {
          match.gradOutput = dy;
          match.gamma = gamma;
          return true;
        }
      }
    match.gradOutput = fullRead(g, type);
    return match.gradOutput && match.gradOutput.getType() == type;
  }

  RowShape row;
  RankedTensorType type;
};

} // namespace

std::optional<NormGradMatch> fff::matchLayerNormGrad(Term *root,
                                                     RankedTensorType type) {
  if (!isa<Float32Type, Float16Type, BFloat16Type>(type.getElementType()))
    return std::nullopt;
  int64_t rank = type.getRank();
  for (int64_t reduced = 1; reduced <= rank; ++reduced) {
    ArrayRef<int64_t> trailing = type.getShape().take_back(reduced);
    if (llvm::any_of(trailing, ShapedType::isDynamic))
      break; // N must be static
    RowShape row{rank, reduced, 1.0};
    for (int64_t extent : trailing)
      row.count *= extent;
    if (auto found = GradMatcher(row, type).match(root))
      return found;
  }
  return std::nullopt;
}

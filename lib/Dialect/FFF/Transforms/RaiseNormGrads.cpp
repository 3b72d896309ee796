//===- RaiseNormGrads.cpp - decomposed norm backwards -----------*- C++ -*-===//
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
// and stays as it is. Then dgamma and dbeta: sums over the rows of dy * xhat
// and of dy, each a reduction of its own reading the raised op's dy and an
// xhat of its x, mean and rstd, become the op's own results.
//
// The dx of an RMSNorm backward, as AOTAutograd decomposes that of a
// hand-written RMSNorm (RMSGradMatcher below), becomes fff.rms_norm_grad;
// its dgamma, a sum of dy times the forward's saved normalized row, stays
// as it is.
//
//===----------------------------------------------------------------------===//

#include "NormTerms.h"

#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SetVector.h"

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
    if (!type || !type.getElementType().isF32() || type.getRank() != row.rank ||
        map.getNumResults() != row.rank)
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

/// dy and gamma of g = dy * gamma; or, failing that, g itself as dy (its
/// dx is the same: the backward reads dy only through g).
bool withGradient(NormGradMatch &match, Term *g, RankedTensorType type,
                  const RowShape &row) {
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
      if (withGradient(match, g, type, row))
        return match;
    }
    return std::nullopt;
  }

  RowShape row;
  RankedTensorType type;
};

} // namespace

namespace {
/// `Matcher(row, type).match(root)` for each row shape of a root of a type
/// the backward ops take.
template <typename Matcher>
std::optional<NormGradMatch> matchGrad(Term *root, RankedTensorType type) {
  if (!isa<Float32Type, Float16Type, BFloat16Type>(type.getElementType()))
    return std::nullopt;
  return matchEachRowShape(type, [&](const RowShape &row) {
    return Matcher(row, type).match(root);
  });
}
} // namespace

std::optional<NormGradMatch> fff::matchLayerNormGrad(Term *root,
                                                     RankedTensorType type) {
  return matchGrad<GradMatcher>(root, type);
}

//===----------------------------------------------------------------------===//
// RMSNorm's dx
//===----------------------------------------------------------------------===//

namespace {

/// Matches the dx of a hand-written RMSNorm's backward as AOTAutograd
/// decomposes it (rsqrt's, mean's and pow's gradients in turn):
///
///   dx = g * rstd + (sum(g * x) * -0.5 * rstd^3 / N) * (2 * x)
///
/// with g = dy * gamma (or dy), the constants in any grouping, and the
/// difference written as a subtraction too. rstd must be one value in both
/// places: the forward's saved statistic (two saved tensors, even of equal
/// values, are not known to be one) or rsqrt(mean(x^2) + eps) of the same x.
class RMSGradMatcher {
public:
  RMSGradMatcher(const RowShape &row, RankedTensorType type)
      : row(row), type(type) {}

  std::optional<NormGradMatch> match(Term *root) {
    if (!root->is(Kind::Add) && !root->is(Kind::Sub))
      return std::nullopt;
    double sign = root->is(Kind::Add) ? -1.0 : 1.0;
    for (int i : {0, 1}) {
      if (root->is(Kind::Sub) && i == 1)
        break; // only a - b, the projection subtracted
      if (auto found = matchTerms(root->operand(i), root->operand(1 - i), sign))
        return found;
    }
    return std::nullopt;
  }

private:
  /// direct = g * rstd; projection = sign * (1/N) * sum(g * x) * rstd^3 * x.
  std::optional<NormGradMatch> matchTerms(Term *direct, Term *projection,
                                          double sign) {
    Factors factors;
    if (!factors.add(projection, /*divides=*/false, /*limit=*/10))
      return std::nullopt;
    double scale = 1.0;
    SmallVector<Term *, 6> rest;
    Term *sum = nullptr;
    for (Term *t : factors.numerators) {
      if (t->is(Kind::Constant))
        scale *= t->constant;
      else if (t->is(Kind::RowSum) && t->reduced == row.reduced && !sum)
        sum = t;
      else
        rest.push_back(t);
    }
    for (Term *t : factors.denominators) {
      if (!t->is(Kind::Constant) || t->constant == 0)
        return std::nullopt;
      scale /= t->constant;
    }
    if (!sum || rest.size() != 4 || !sameConstant(scale * row.count, sign))
      return std::nullopt;
    // Three of the four are rstd, the fourth x.
    for (int xIndex = 0; xIndex < 4; ++xIndex) {
      Term *x = rest[xIndex];
      Term *rstd = rest[(xIndex + 1) % 4];
      bool cubed = llvm::all_of(llvm::seq(0, 4), [&](int i) {
        return i == xIndex || equal(rest[i], rstd);
      });
      if (!cubed || !sum->operand(0)->is(Kind::Mul))
        continue;
      Term *product = sum->operand(0);
      for (int i : {0, 1}) {
        if (!equal(product->operand(1 - i), x))
          continue;
        Term *g = product->operand(i);
        if (isProductOf(direct, g, rstd))
          if (auto found = withOperands(x, rstd, g))
            return found;
      }
    }
    return std::nullopt;
  }

  /// The op's operands: x and dy of the row's type, gamma, and rstd as the
  /// epsilon it adds when it is recomputed, else a saved statistic.
  std::optional<NormGradMatch> withOperands(Term *x, Term *rstd, Term *g) {
    NormGradMatch match{Value(), fullRead(x, type), Value(),
                        Value(), Value(),           row.reduced};
    if (!match.input || match.input.getType() != type)
      return std::nullopt;
    // An rstd this module computes from x is recomputed by the op, so that
    // its sums die once the forward is raised too.
    if (!recomputedFrom(rstd, x, match.epsilon) &&
        !(match.rstd = statisticRead(rstd, row)))
      return std::nullopt;
    if (!withGradient(match, g, type, row))
      return std::nullopt;
    return match;
  }

  /// Whether `rstd` is rsqrt(mean(x * x) + epsilon), and its epsilon.
  bool recomputedFrom(Term *rstd, Term *x, double &epsilon) {
    if (!rstd->is(Kind::Rsqrt) || !rstd->operand(0)->is(Kind::Add))
      return false;
    Term *shifted = rstd->operand(0);
    for (int i : {0, 1}) {
      Term *squares = matchMean(shifted->operand(i), row);
      Term *eps = shifted->operand(1 - i);
      if (squares && isSquareOf(squares, x) && eps->is(Kind::Constant) &&
          eps->constant > 0) {
        epsilon = eps->constant;
        return true;
      }
    }
    return false;
  }

  RowShape row;
  RankedTensorType type;
};

} // namespace

std::optional<NormGradMatch> fff::matchRMSNormGrad(Term *root,
                                                   RankedTensorType type) {
  return matchGrad<RMSGradMatcher>(root, type);
}

//===----------------------------------------------------------------------===//
// dgamma and dbeta
//===----------------------------------------------------------------------===//

namespace {

enum class ColumnSum { None, OfGradXhat, OfGrad };

/// Whether `value` is 0.0 filled into a tensor.
bool isZeroFill(Value value) {
  auto fill = value.getDefiningOp<linalg::FillOp>();
  if (!fill)
    return false;
  auto constant = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
  auto attr = constant ? dyn_cast<FloatAttr>(constant.getValue()) : nullptr;
  return attr && attr.getValueAsDouble() == 0.0;
}

/// Whether `xhat` is (x - mean) * rstd of `grad`'s own x, mean and rstd.
bool isXhatOf(const Term *xhat, LayerNormGradOp grad, const RowShape &row) {
  if (!xhat->is(Kind::Mul))
    return false;
  auto type = cast<RankedTensorType>(grad.getInput().getType());
  for (int i : {0, 1}) {
    Term *centred = xhat->operand(i);
    if (centred->is(Kind::Sub) &&
        fullRead(centred->operand(0), type) == grad.getInput() &&
        statisticRead(centred->operand(1), row) == grad.getMean() &&
        statisticRead(xhat->operand(1 - i), row) == grad.getRstd())
      return true;
  }
  return false;
}

/// What the summand `factors` (a value read whole, or a product of two)
/// is: dy * xhat, dy, or neither.
ColumnSum classify(ArrayRef<Term *> factors, LayerNormGradOp grad,
                   const RowShape &row) {
  auto type = cast<RankedTensorType>(grad.getInput().getType());
  auto isDy = [&](const Term *t) {
    return t && fullRead(t, type) == grad.getGradOutput();
  };
  if (factors.size() == 1 && isDy(factors[0]))
    return ColumnSum::OfGrad;
  SmallVector<Term *, 2> product(factors);
  if (product.size() == 1 && product[0] && product[0]->is(Kind::Mul))
    product = {product[0]->operand(0), product[0]->operand(1)};
  if (product.size() != 2 || !product[0] || !product[1])
    return ColumnSum::None;
  for (int i : {0, 1})
    if (isDy(product[i]) && isXhatOf(product[1 - i], grad, row))
      return ColumnSum::OfGradXhat;
  return ColumnSum::None;
}

/// What `generic` sums over the rows of `grad`'s input: dy * xhat (its
/// dgamma), dy (its dbeta), or neither. Its result must be of the type the
/// op gives the gradient (a 16-bit one summed in f32 and then narrowed is
/// left as it is).
ColumnSum columnSum(linalg::GenericOp generic, LayerNormGradOp grad,
                    const RowShape &row) {
  int64_t leading = row.rank - row.reduced;
  if (generic->getNumResults() != 1 || generic.getNumDpsInits() != 1 ||
      generic.getNumLoops() != unsigned(row.rank) ||
      !isZeroFill(generic.getDpsInits()[0]))
    return ColumnSum::None;
  auto iterators = generic.getIteratorTypesArray();
  for (int64_t dim = 0; dim < row.rank; ++dim)
    if ((iterators[dim] == utils::IteratorType::reduction) != (dim < leading))
      return ColumnSum::None;
  MLIRContext *context = generic.getContext();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(row.rank, context);
  SmallVector<AffineExpr> columns;
  for (int64_t dim = leading; dim < row.rank; ++dim)
    columns.push_back(getAffineDimExpr(dim, context));
  if (generic.getIndexingMapsArray().back() !=
      AffineMap::get(row.rank, 0, columns, context))
    return ColumnSum::None;

  // The body: yield (summand + acc), summand a block argument (dy) or the
  // product of two (dy and xhat), each an input read at the root's index.
  Block &body = generic.getRegion().front();
  Value acc = body.getArguments().back();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getValues()[0].getDefiningOp<arith::AddFOp>();
  if (!add)
    return ColumnSum::None;
  Value summand = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  if (add.getLhs() != acc && add.getRhs() != acc)
    return ColumnSum::None;
  auto inputRead = [&](Value arg) -> Value {
    auto blockArg = dyn_cast<BlockArgument>(arg);
    if (!blockArg || blockArg.getOwner() != &body ||
        blockArg.getArgNumber() >= generic.getNumDpsInputs() ||
        generic.getIndexingMapsArray()[blockArg.getArgNumber()] != identity)
      return Value();
    return generic.getDpsInputs()[blockArg.getArgNumber()];
  };
  // The summand's factors, each an input read at the root's index.
  TermBuilder builder;
  SmallVector<Term *, 2> factors;
  if (Value read = inputRead(summand)) {
    factors.push_back(builder.read(read, identity));
  } else if (auto product = summand.getDefiningOp<arith::MulFOp>()) {
    for (Value factor : product->getOperands()) {
      Value read = inputRead(factor);
      if (!read)
        return ColumnSum::None;
      factors.push_back(builder.read(read, identity));
    }
  }
  ColumnSum kind = classify(factors, grad, row);
  // The op gives dgamma only with a scale, and each in the input's element
  // type (a 16-bit one summed in f32 and then narrowed stays as it is).
  auto dyType = cast<RankedTensorType>(grad.getGradOutput().getType());
  Type expected =
      grad.getGamma()
          ? grad.getGamma().getType()
          : RankedTensorType::get(dyType.getShape().take_back(row.reduced),
                                  dyType.getElementType());
  if ((kind == ColumnSum::OfGradXhat && !grad.getGamma()) ||
      generic->getResult(0).getType() != expected)
    return ColumnSum::None;
  return kind;
}

} // namespace

void fff::raiseParameterGradients(RewriterBase &rewriter,
                                  LayerNormGradOp grad) {
  auto type = cast<RankedTensorType>(grad.getInput().getType());
  RowShape row{type.getRank(), int64_t(grad.getNormalizedRank()), 0.0};
  // The sums read dy, or a product of dy computed apart (dy * xhat).
  SetVector<Operation *> candidates;
  for (Operation *user : grad.getGradOutput().getUsers()) {
    candidates.insert(user);
    if (isa<linalg::GenericOp>(user) && user->getNumResults() == 1)
      for (Operation *next : user->getResult(0).getUsers())
        candidates.insert(next);
  }
  linalg::GenericOp gammaSum, betaSum;
  for (Operation *candidate : candidates) {
    auto generic = dyn_cast<linalg::GenericOp>(candidate);
    if (!generic)
      continue;
    ColumnSum kind = columnSum(generic, grad, row);
    if (kind == ColumnSum::OfGradXhat && !gammaSum)
      gammaSum = generic;
    if (kind == ColumnSum::OfGrad && !betaSum)
      betaSum = generic;
  }
  if (!gammaSum && !betaSum)
    return;
  // The op with dbeta too, where one is summed, put where the first of the
  // old op and the sums was (so that it comes before every use of theirs),
  // if its operands are defined there; its dx and dgamma stand for the old
  // op's and the sums'.
  Operation *first = grad;
  for (linalg::GenericOp sum : {gammaSum, betaSum}) {
    if (sum && sum->getBlock() != grad->getBlock())
      return;
    if (sum && sum->isBeforeInBlock(first))
      first = sum;
  }
  for (Value operand : grad->getOperands()) {
    Operation *definition = operand.getDefiningOp();
    if (definition && (definition->getBlock() != first->getBlock() ||
                       !definition->isBeforeInBlock(first)))
      return;
  }
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(first);
  auto raised =
      LayerNormGradOp::create(rewriter, grad.getLoc(), grad.getGradOutput(),
                              grad.getInput(), grad.getMean(), grad.getRstd(),
                              grad.getGamma(), grad.getNormalizedRankAttr(),
                              betaSum ? rewriter.getUnitAttr() : UnitAttr());
  rewriter.replaceAllUsesWith(grad.getGradInput(), raised.getGradInput());
  if (gammaSum)
    rewriter.replaceAllUsesWith(gammaSum->getResult(0), raised.getGammaGrad());
  if (betaSum)
    rewriter.replaceAllUsesWith(betaSum->getResult(0), raised.getBetaGrad());
  rewriter.eraseOp(grad);
}

//===- RaiseNorms.cpp - decomposed norms in linalg -> fff ops ---*- C++ -*-===//
//
// Each elementwise linalg.generic is a candidate root. The value it computes
// is rebuilt as a Term (ScalarTerms.h) and compared with the definitions of
// RMSNorm and LayerNorm, in the forms frontends write them: the mean as a
// sum divided by N or times 1/N; the variance centred or as E[x^2] - E[x]^2,
// clamped at zero or not; the inverse standard deviation as rsqrt, 1/sqrt,
// pow(v, -0.5), or a division by sqrt; gamma and beta anywhere in the product and sum.
// The norm's input and parameters are whatever tensors those reads come
// from: block arguments, or the results of elementwise ops (a residual add,
// a bias add, an upcast), which stay in place for fusion to take. Roots are
// tried from the last op backwards, so that the largest match (with gamma
// and beta) wins. A root that is no norm may be a LayerNorm or RMSNorm
// backward's dx (RaiseNormGrads.cpp). Rounds repeat while one raises
// something, so that a norm of a norm's result is found too.
//
//===----------------------------------------------------------------------===//

#include "fff/Dialect/FFF/Transforms/Passes.h"

#include "NormTerms.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace fff {
#define GEN_PASS_DEF_RAISENORMS
#include "fff/Dialect/FFF/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

using Kind = Term::Kind;

/// var + eps; returns var (without a clamp at zero, which a variance never
/// needs) and sets `epsilon`.
Term *matchVariancePlusEpsilon(Term *t, double &epsilon) {
  if (!t->is(Kind::Add))
    return nullptr;
  for (int i : {0, 1}) {
    Term *eps = t->operand(i);
    Term *variance = t->operand(1 - i);
    if (!eps->is(Kind::Constant) || eps->constant < 0)
      continue;
    epsilon = eps->constant;
    if (variance->is(Kind::Max))
      for (int j : {0, 1})
        if (isConstant(variance->operand(j), 0.0))
          return variance->operand(1 - j);
    return variance;
  }
  return nullptr;
}

/// Takes the one inverse standard deviation out of `factors`: rsqrt(var +
/// eps) multiplying, or sqrt(var + eps) dividing. Returns var.
Term *takeInverseStd(Factors &factors, double &epsilon) {
  auto take = [&](SmallVectorImpl<Term *> &list, Kind root) -> Term * {
    for (auto *it = list.begin(); it != list.end(); ++it) {
      if (!(*it)->is(root))
        continue;
      if (Term *variance = matchVariancePlusEpsilon((*it)->operand(0), epsilon)) {
        list.erase(it);
        return variance;
      }
    }
    return nullptr;
  };
  if (Term *variance = take(factors.numerators, Kind::Rsqrt))
    return variance;
  return take(factors.denominators, Kind::Sqrt);
}

/// What a matched norm needs to be rebuilt.
struct NormMatch {
  bool layerNorm;
  Value input, gamma, beta;
  double epsilon;
  int64_t normalizedRank;
};

/// RMSNorm's x, if `normalized` is x and `variance` is mean(x * x).
Term *rmsNormInput(Term *normalized, Term *variance, const RowShape &row) {
  Term *squares = matchMean(variance, row);
  return squares && isSquareOf(squares, normalized) ? normalized : nullptr;
}

/// LayerNorm's x, if `normalized` is x - mean(x) and `variance` is
/// mean((x - mean(x))^2) or mean(x * x) - mean(x)^2.
Term *layerNormInput(Term *normalized, Term *variance, const RowShape &row) {
  if (!normalized->is(Kind::Sub))
    return nullptr;
  Term *x = normalized->operand(0);
  Term *mean = normalized->operand(1);
  Term *meanOf = matchMean(mean, row);
  if (!meanOf || !equal(meanOf, x))
    return nullptr;
  if (Term *centredSquares = matchMean(variance, row))
    return isSquareOf(centredSquares, normalized) ? x : nullptr;
  if (!variance->is(Kind::Sub))
    return nullptr;
  Term *squares = matchMean(variance->operand(0), row);
  return squares && isSquareOf(squares, x) &&
                 isSquareOf(variance->operand(1), mean)
             ? x
             : nullptr;
}

/// The element types the fff ops take: f32, f16 or bf16, one for the input
/// and its parameters.
bool typesFit(const NormMatch &match) {
  Type element = getElementTypeOrSelf(match.input.getType());
  if (!isa<Float32Type, Float16Type, BFloat16Type>(element))
    return false;
  return llvm::all_of(ValueRange{match.gamma, match.beta}, [&](Value param) {
    return !param || getElementTypeOrSelf(param.getType()) == element;
  });
}

/// Matches the norm of one row shape, given how the root splits into
/// `normalized * rstd * gamma + beta` (gamma and beta possibly null).
class NormMatcher {
public:
  NormMatcher(const RowShape &row, RankedTensorType resultType)
      : row(row), resultType(resultType) {}

  /// The root as [product] + beta, with beta a parameter, then as a product.
  std::optional<NormMatch> match(Term *root) {
    if (root->is(Kind::Add))
      for (int i : {0, 1})
        if (auto found = matchProduct(root->operand(1 - i), root->operand(i)))
          return found;
    return matchProduct(root, nullptr);
  }

private:
  std::optional<NormMatch> matchProduct(Term *product, Term *beta) {
    Factors factors;
    double epsilon = 0;
    if (!factors.add(product, /*divides=*/false))
      return std::nullopt;
    Term *variance = takeInverseStd(factors, epsilon);
    if (!variance || !factors.denominators.empty())
      return std::nullopt;
    SmallVectorImpl<Term *> &rest = factors.numerators;
    if (rest.size() == 1)
      return matchNormalized(rest[0], nullptr, beta, variance, epsilon);
    if (rest.size() == 2)
      for (int i : {0, 1})
        if (auto found = matchNormalized(rest[i], rest[1 - i], beta, variance,
                                         epsilon))
          return found;
    if (!beta)
      return matchProductInput(rest, variance, epsilon);
    return std::nullopt;
  }

  /// RMSNorm of an input that is itself a product computed where the norm
  /// reads it (Gemma's `embeddings * sqrt(hidden)`): the product's factors
  /// are among `rest`, flattened beside gamma's.
  std::optional<NormMatch> matchProductInput(ArrayRef<Term *> rest,
                                             Term *variance, double epsilon) {
    Term *squares = matchMean(variance, row);
    if (!squares || !squares->is(Kind::Mul) ||
        !equal(squares->operand(0), squares->operand(1)))
      return std::nullopt;
    Term *x = squares->operand(0);
    Factors inputFactors;
    if (!inputFactors.add(x, /*divides=*/false) ||
        !inputFactors.denominators.empty())
      return std::nullopt;
    SmallVector<Term *, 4> others(rest);
    for (Term *factor : inputFactors.numerators) {
      auto *it =
          llvm::find_if(others, [&](Term *t) { return equal(t, factor); });
      if (it == others.end())
        return std::nullopt;
      others.erase(it);
    }
    if (others.size() > 1)
      return std::nullopt;
    return withOperands(/*layerNorm=*/false, x,
                        others.empty() ? nullptr : others.front(), nullptr,
                        epsilon);
  }

  /// LayerNorm if `normalized` is x - mean(x), else RMSNorm. The centred
  /// input's RMS is the input's standard deviation, so an RMSNorm of
  /// x - mean(x) fits too: it is the LayerNorm of x, which the ops after
  /// raising (the GPU kernels, the report) must see as one.
  std::optional<NormMatch> matchNormalized(Term *normalized, Term *gamma,
                                           Term *beta, Term *variance,
                                           double epsilon) {
    if (Term *x = layerNormInput(normalized, variance, row))
      if (auto found =
              withOperands(/*layerNorm=*/true, x, gamma, beta, epsilon))
        return found;
    if (!beta)
      if (Term *x = rmsNormInput(normalized, variance, row))
        return withOperands(/*layerNorm=*/false, x, gamma, beta, epsilon);
    return std::nullopt;
  }

  /// The match, if x, gamma and beta are reads of tensors the op can take.
  std::optional<NormMatch> withOperands(bool layerNorm, Term *x, Term *gamma,
                                        Term *beta, double epsilon) {
    NormMatch match{layerNorm, fullRead(x, resultType), Value(), Value(),
                    epsilon, row.reduced};
    if (!match.input || match.input.getType() != resultType)
      return std::nullopt;
    Type element = resultType.getElementType();
    if (gamma && !(match.gamma = trailingRead(gamma, row, element)))
      return std::nullopt;
    if (beta && !(match.beta = trailingRead(beta, row, element)))
      return std::nullopt;
    if (!typesFit(match))
      return std::nullopt;
    return match;
  }

  RowShape row;
  RankedTensorType resultType;
};

/// Tries every trailing-dims count: the reductions decide which is right.
std::optional<NormMatch> matchNorm(Term *root, RankedTensorType type) {
  return matchEachRowShape(type, [&](const RowShape &row) {
    return NormMatcher(row, type).match(root);
  });
}

struct RaiseNormsPass : fff::impl::RaiseNormsBase<RaiseNormsPass> {
  void runOnOperation() override {
    // Rounds until one raises nothing. A norm of another norm's result
    // (`rms_norm(rms_norm(x) * 2)`) reads, decomposed, as more factors than
    // a match looks through; once the inner norm is an op, its result is
    // one term, and the next round matches the outer norm.
    bool raised = true;
    while (raised) {
      raised = raiseRound();
      // The decomposed chains are dead now, except where they had other
      // uses; gone before the next round, they are not matched again.
      if (failed(applyPatternsGreedily(getOperation(),
                                       RewritePatternSet(&getContext()))))
        return signalPassFailure();
    }
  }

  /// Tries every elementwise root once; whether any was raised.
  bool raiseRound() {
    bool raised = false;
    SmallVector<linalg::GenericOp> candidates;
    getOperation()->walk([&](linalg::GenericOp op) {
      if (op->getNumResults() == 1 && op.getNumReductionLoops() == 0)
        candidates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    // Last first: the op computing `... * gamma + beta` must be matched
    // before the op computing its `(x - mean) * rstd` part.
    for (linalg::GenericOp op : llvm::reverse(candidates)) {
      if (op->use_empty())
        continue; // already replaced by a larger match
      auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
      if (!resultType)
        continue;
      TermBuilder builder;
      Term *term = builder.read(op->getResult(0),
                                AffineMap::getMultiDimIdentityMap(
                                    resultType.getRank(), &getContext()));
      if (!term)
        continue;
      rewriter.setInsertionPoint(op);
      if (std::optional<NormMatch> match = matchNorm(term, resultType)) {
        Value norm = buildNorm(rewriter, op.getLoc(), *match);
        rewriter.replaceAllUsesWith(op->getResult(0), norm);
        raised = true;
      } else if (std::optional<NormGradMatch> grad =
                     matchLayerNormGrad(term, resultType)) {
        auto gradOp = LayerNormGradOp::create(
            rewriter, op.getLoc(), grad->gradOutput, grad->input, grad->mean,
            grad->rstd, grad->gamma,
            rewriter.getI64IntegerAttr(grad->normalizedRank), UnitAttr());
        rewriter.replaceAllUsesWith(op->getResult(0), gradOp.getGradInput());
        raiseParameterGradients(rewriter, gradOp);
        // The root goes now, so that the ops it read (an f32 dx before its
        // narrowing to bf16) are not roots of a second match.
        rewriter.eraseOp(op);
        raised = true;
      } else if (std::optional<NormGradMatch> grad =
                     matchRMSNormGrad(term, resultType)) {
        auto gradOp = RMSNormGradOp::create(
            rewriter, op.getLoc(), grad->gradOutput, grad->input, grad->rstd,
            grad->gamma,
            grad->rstd ? FloatAttr() : rewriter.getF32FloatAttr(grad->epsilon),
            rewriter.getI64IntegerAttr(grad->normalizedRank));
        rewriter.replaceAllUsesWith(op->getResult(0), gradOp.getGradInput());
        rewriter.eraseOp(op);
        raised = true;
      }
    }
    return raised;
  }

  static Value buildNorm(RewriterBase &rewriter, Location loc,
                         const NormMatch &match) {
    auto epsilon = rewriter.getF32FloatAttr(match.epsilon);
    auto rank = rewriter.getI64IntegerAttr(match.normalizedRank);
    if (match.layerNorm)
      return LayerNormOp::create(rewriter, loc, match.input, match.gamma,
                                 match.beta, epsilon, rank, UnitAttr())
          .getOutput();
    return RMSNormOp::create(rewriter, loc, match.input.getType(), match.input,
                             match.gamma, epsilon, rank)
        .getOutput();
  }
};

} // namespace

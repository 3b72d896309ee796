//===- RaiseNorms.cpp - decomposed norms in linalg -> fff ops ----*- C++
//-*-===//
//
// Each elementwise linalg.generic is a candidate root. The value it computes
// is rebuilt as a Term: a scalar expression over the root's iteration space
// whose leaves are tensors read through affine maps, looking through
// elementwise producers, row sums and float casts. The Term is then compared
// with the definitions of RMSNorm and LayerNorm. Roots are tried from the
// last op backwards, so that the largest match (with gamma and beta) wins.
//
//===----------------------------------------------------------------------===//

#include "fff/Dialect/FFF/Transforms/Passes.h"

#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <deque>

namespace fff {
#define GEN_PASS_DEF_RAISENORMS
#include "fff/Dialect/FFF/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// A scalar computed at every point of the root op's iteration space.
struct Term {
  enum class Kind { Input, Constant, Add, Sub, Mul, Div, Rsqrt, Sqrt, RowSum };
  Kind kind;
  Value tensor; // Input: read at `map` (root dims -> tensor dims)
  AffineMap map;
  double constant = 0; // Constant
  int64_t reduced = 0; // RowSum: over the trailing `reduced` root dims
  SmallVector<Term *, 2> operands;
};

using Kind = Term::Kind;

/// Rebuilds the value of tensors as Terms; null where the IR is not a
/// supported shape (a cast to an integer, a max, a non-zero initial sum...).
class TermBuilder {
public:
  /// `tensor` read at `map` from the root's iteration space. Shared
  /// producers are built once (the Terms form a DAG), and a root whose
  /// expression grows past a budget is not a norm worth the time.
  Term *read(Value tensor, AffineMap map) {
    auto key =
        std::make_pair(tensor.getAsOpaquePointer(), map.getAsOpaquePointer());
    auto it = memo.find(key);
    if (it != memo.end())
      return it->second;
    Term *term =
        storage.size() < kMaxTerms ? readUncached(tensor, map) : nullptr;
    memo[key] = term;
    return term;
  }

private:
  static constexpr size_t kMaxTerms = 4096;

  Term *readUncached(Value tensor, AffineMap map) {
    FloatAttr splat;
    if (matchPattern(tensor, m_Constant(&splat)))
      return constant(splat.getValueAsDouble());
    if (auto expand = tensor.getDefiningOp<tensor::ExpandShapeOp>())
      return readThroughUnitDims(expand, map);
    auto producer = tensor.getDefiningOp<linalg::GenericOp>();
    if (!producer || producer->getNumResults() != 1)
      return input(tensor, map);
    if (producer.getNumReductionLoops() == 0)
      return readElementwise(producer, map);
    return readRowSum(producer, map);
  }

  Term *make(Kind kind, ArrayRef<Term *> operands = {}) {
    for (Term *operand : operands)
      if (!operand)
        return nullptr;
    storage.push_back(Term{kind, Value(), AffineMap(), 0, 0, {}});
    storage.back().operands.assign(operands.begin(), operands.end());
    return &storage.back();
  }
  Term *constant(double value) {
    Term *t = make(Kind::Constant);
    t->constant = value;
    return t;
  }
  Term *input(Value tensor, AffineMap map) {
    Term *t = make(Kind::Input);
    t->tensor = tensor;
    t->map = map;
    return t;
  }

  /// An elementwise producer: its body, with each input read through its
  /// indexing map composed with the root's.
  Term *readElementwise(linalg::GenericOp producer, AffineMap map) {
    OpResult result = producer->getResult(0);
    if (!producer.getIndexingMapMatchingResult(result).isIdentity())
      return input(result, map);
    SmallVector<Term *> args;
    for (OpOperand *operand : producer.getDpsInputOperands())
      args.push_back(
          read(operand->get(),
               producer.getMatchingIndexingMap(operand).compose(map)));
    Term *body = fromBody(producer, yielded(producer), args);
    return body ? body : input(result, map);
  }

  /// An expand_shape that only adds unit dims (as a keepdim reshape does):
  /// reading it is reading its source with those dims dropped from the map.
  Term *readThroughUnitDims(tensor::ExpandShapeOp expand, AffineMap map) {
    ArrayRef<int64_t> shape = expand.getResultType().getShape();
    SmallVector<AffineExpr> sourceResults;
    for (const ReassociationIndices &group : expand.getReassociationIndices()) {
      SmallVector<int64_t> nonUnit;
      for (int64_t dim : group) {
        // The verifier lets through indices past the rank (they wrap in
        // its 32-bit affine dims); such a reshape is read as an input.
        if (dim < 0 || dim >= int64_t(shape.size()))
          return input(expand.getResult(), map);
        if (shape[dim] != 1)
          nonUnit.push_back(dim);
      }
      if (nonUnit.size() > 1)
        return input(expand.getResult(), map);
      // A group of unit dims maps to a source dim of size 1, read at 0.
      sourceResults.push_back(nonUnit.empty()
                                  ? getAffineConstantExpr(0, map.getContext())
                                  : map.getResult(nonUnit.front()));
    }
    return read(
        expand.getSrc(),
        AffineMap::get(map.getNumDims(), 0, sourceResults, map.getContext()));
  }

  /// A sum over trailing dims, read back with the map it was written with
  /// (keepdim `(d0, 0)` or not `(d0)`), so that the producer's dims are the
  /// root's.
  Term *readRowSum(linalg::GenericOp producer, AffineMap map) {
    OpResult result = producer->getResult(0);
    int64_t rank = producer.getNumLoops();
    int64_t reduced = producer.getNumReductionLoops();
    auto iterators = producer.getIteratorTypesArray();
    bool trailing = map.getNumDims() == unsigned(rank) &&
                    llvm::all_of(llvm::seq<int64_t>(0, rank), [&](int64_t d) {
                      return (iterators[d] == utils::IteratorType::reduction) ==
                             (d >= rank - reduced);
                    });
    if (!trailing || producer.getIndexingMapMatchingResult(result) != map ||
        !startsAtZero(producer.getDpsInitOperand(0)->get()))
      return input(result, map);
    // The body must be acc + term (either order) and use acc nowhere else.
    auto add = yielded(producer).getDefiningOp<arith::AddFOp>();
    Value acc = producer.getRegionOutputArgs()[0];
    if (!add || !acc.hasOneUse())
      return input(result, map);
    Value term = add.getLhs() == acc ? add.getRhs() : add.getLhs();
    SmallVector<Term *> args;
    for (OpOperand *operand : producer.getDpsInputOperands())
      args.push_back(
          read(operand->get(), producer.getMatchingIndexingMap(operand)));
    Term *summed = make(Kind::RowSum, {fromBody(producer, term, args)});
    if (!summed)
      return input(result, map);
    summed->reduced = reduced;
    return summed;
  }

  static Value yielded(linalg::GenericOp op) {
    return op.getBody()->getTerminator()->getOperand(0);
  }

  static bool startsAtZero(Value init) {
    FloatAttr zero;
    if (auto fill = init.getDefiningOp<linalg::FillOp>())
      return matchPattern(fill.getInputs()[0], m_Constant(&zero)) &&
             zero.getValue().isZero();
    return matchPattern(init, m_Constant(&zero)) && zero.getValue().isZero();
  }

  /// The scalar `value` of `op`'s body as a Term; `args` are the inputs'.
  Term *fromBody(linalg::GenericOp op, Value value, ArrayRef<Term *> args) {
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      if (arg.getOwner() != op.getBody() || arg.getArgNumber() >= args.size())
        return nullptr; // the output, or a value from elsewhere
      return args[arg.getArgNumber()];
    }
    FloatAttr scalar;
    if (matchPattern(value, m_Constant(&scalar)))
      return constant(scalar.getValueAsDouble());
    Operation *def = value.getDefiningOp();
    auto sub = [&](unsigned i) {
      return fromBody(op, def->getOperand(i), args);
    };
    return TypeSwitch<Operation *, Term *>(def)
        // Float casts only change the precision the reference computes in.
        .Case<arith::ExtFOp, arith::TruncFOp>(
            [&](Operation *) { return sub(0); })
        .Case([&](arith::AddFOp) {
          return make(Kind::Add, {sub(0), sub(1)});
        })
        .Case([&](arith::SubFOp) {
          return make(Kind::Sub, {sub(0), sub(1)});
        })
        .Case([&](arith::MulFOp) {
          return make(Kind::Mul, {sub(0), sub(1)});
        })
        .Case([&](arith::DivFOp) {
          return make(Kind::Div, {sub(0), sub(1)});
        })
        .Case<math::FPowIOp, math::PowFOp>([&](Operation *pow) -> Term * {
          // x^2, as torch's x.pow(2) becomes.
          APInt intExponent;
          FloatAttr floatExponent;
          bool square =
              matchPattern(pow->getOperand(1), m_ConstantInt(&intExponent))
                  ? intExponent == 2
                  : matchPattern(pow->getOperand(1),
                                 m_Constant(&floatExponent)) &&
                        floatExponent.getValueAsDouble() == 2.0;
          Term *base = sub(0);
          return square ? make(Kind::Mul, {base, base}) : nullptr;
        })
        .Case([&](math::RsqrtOp) { return make(Kind::Rsqrt, {sub(0)}); })
        .Case([&](math::SqrtOp) { return make(Kind::Sqrt, {sub(0)}); })
        .Default([](Operation *) { return nullptr; });
  }

  std::deque<Term> storage;
  llvm::DenseMap<std::pair<void *, const void *>, Term *> memo;
};

//===----------------------------------------------------------------------===//
// Matching
//===----------------------------------------------------------------------===//

bool sameConstant(double a, double b) {
  return std::abs(a - b) <= 1e-6 * std::max(std::abs(a), std::abs(b));
}

bool equal(const Term *a, const Term *b) {
  if (a == b)
    return true;
  if (a->kind != b->kind || a->operands.size() != b->operands.size())
    return false;
  switch (a->kind) {
  case Kind::Input:
    return a->tensor == b->tensor && a->map == b->map;
  case Kind::Constant:
    return sameConstant(a->constant, b->constant);
  case Kind::RowSum:
    return a->reduced == b->reduced && equal(a->operands[0], b->operands[0]);
  case Kind::Add:
  case Kind::Mul: // commutative
    if (equal(a->operands[0], b->operands[1]) &&
        equal(a->operands[1], b->operands[0]))
      return true;
    [[fallthrough]];
  default:
    return llvm::all_of(llvm::zip(a->operands, b->operands), [](auto pair) {
      return equal(std::get<0>(pair), std::get<1>(pair));
    });
  }
}

bool isConstant(const Term *t, double &value) {
  if (t->kind != Kind::Constant)
    return false;
  value = t->constant;
  return true;
}

/// The multiplicands of a product, flattened; false past `limit` of them
/// (a norm has at most three, and a product DAG can be exponentially wide).
bool factors(Term *t, SmallVectorImpl<Term *> &out, size_t limit = 4) {
  if (t->kind != Kind::Mul) {
    out.push_back(t);
    return out.size() <= limit;
  }
  return factors(t->operands[0], out, limit) &&
         factors(t->operands[1], out, limit);
}

/// What the row statistics of one norm must agree on.
struct RowShape {
  int64_t rank;    // of the root iteration space
  int64_t reduced; // trailing dims normalized over
  double count;    // N, their static element count
};

/// mean(inner) over the trailing dims: sum(inner) / N or sum(inner) * (1/N).
Term *matchMean(Term *t, const RowShape &row) {
  double c;
  auto sumOf = [&](Term *s) -> Term * {
    return s->kind == Kind::RowSum && s->reduced == row.reduced ? s->operands[0]
                                                                : nullptr;
  };
  if (t->kind == Kind::Div && isConstant(t->operands[1], c) &&
      sameConstant(c, row.count))
    return sumOf(t->operands[0]);
  if (t->kind == Kind::Mul)
    for (int i : {0, 1})
      if (isConstant(t->operands[i], c) && sameConstant(c * row.count, 1.0))
        return sumOf(t->operands[1 - i]);
  return nullptr;
}

/// rsqrt(variance + eps) or 1 / sqrt(variance + eps); returns the variance.
Term *matchInverseStd(Term *t, double &epsilon) {
  double one;
  Term *root = nullptr;
  if (t->kind == Kind::Rsqrt)
    root = t->operands[0];
  else if (t->kind == Kind::Div && isConstant(t->operands[0], one) &&
           one == 1.0 && t->operands[1]->kind == Kind::Sqrt)
    root = t->operands[1]->operands[0];
  if (!root || root->kind != Kind::Add)
    return nullptr;
  for (int i : {0, 1})
    if (isConstant(root->operands[i], epsilon) && epsilon >= 0)
      return root->operands[1 - i];
  return nullptr;
}

/// The root's input read at every point: the tensor being normalized.
bool isFullInput(const Term *t, int64_t rank) {
  return t->kind == Kind::Input && t->map.isIdentity() &&
         t->map.getNumDims() == unsigned(rank);
}

/// An affine parameter: a tensor of the trailing dims' shape, read at them.
bool isTrailingParameter(const Term *t, const RowShape &row) {
  if (t->kind != Kind::Input || t->map.getNumResults() != unsigned(row.reduced))
    return false;
  for (auto [i, expr] : llvm::enumerate(t->map.getResults()))
    if (expr !=
        getAffineDimExpr(row.rank - row.reduced + i, t->map.getContext()))
      return false;
  return true;
}

/// What a matched norm needs to be rebuilt.
struct NormMatch {
  bool layerNorm;
  Value input, gamma, beta;
  double epsilon;
  int64_t normalizedRank;
};

/// Finds the one factor that `accept`s, or null if none or several do.
Term *takeFactor(SmallVectorImpl<Term *> &list,
                 function_ref<bool(Term *)> accept) {
  auto it = llvm::find_if(list, accept);
  if (it == list.end())
    return nullptr;
  Term *found = *it;
  list.erase(it);
  return found;
}

/// Tries every trailing-dims count: the reductions decide which is right.
std::optional<NormMatch> matchNorm(Term *root, RankedTensorType type) {
  int64_t rank = type.getRank();
  for (int64_t reduced = 1; reduced <= rank; ++reduced) {
    ArrayRef<int64_t> trailing = type.getShape().take_back(reduced);
    if (llvm::any_of(trailing, ShapedType::isDynamic))
      break; // N must be static
    RowShape row{rank, reduced, 1.0};
    for (int64_t extent : trailing)
      row.count *= extent;

    // Optional beta: product + beta.
    Term *product = root;
    Term *beta = nullptr;
    if (root->kind == Kind::Add)
      for (int i : {0, 1})
        if (isTrailingParameter(root->operands[i], row)) {
          beta = root->operands[i];
          product = root->operands[1 - i];
          break;
        }

    SmallVector<Term *> list;
    if (!factors(product, list))
      continue;
    double epsilon = 0;
    Term *variance = nullptr;
    if (!takeFactor(list, [&](Term *t) {
          return (variance = matchInverseStd(t, epsilon)) != nullptr;
        }))
      continue;
    Term *gamma =
        takeFactor(list, [&](Term *t) { return isTrailingParameter(t, row); });
    if (list.size() != 1)
      continue;
    Term *normalized = list.front();

    // RMSNorm: x * rsqrt(mean(x * x) + eps) [* gamma].
    if (isFullInput(normalized, rank) && !beta) {
      Term *squares = matchMean(variance, row);
      if (squares && squares->kind == Kind::Mul &&
          equal(squares->operands[0], normalized) &&
          equal(squares->operands[1], normalized))
        return NormMatch{false,
                         normalized->tensor,
                         gamma ? gamma->tensor : Value(),
                         Value(),
                         epsilon,
                         reduced};
      continue;
    }

    // LayerNorm: (x - mean(x)) * rsqrt(var + eps) [* gamma] [+ beta].
    if (normalized->kind != Kind::Sub ||
        !isFullInput(normalized->operands[0], rank))
      continue;
    Term *x = normalized->operands[0];
    Term *mean = normalized->operands[1];
    Term *meanOf = matchMean(mean, row);
    if (!meanOf || !equal(meanOf, x))
      continue;
    bool varianceMatches = false;
    if (Term *centredSquares = matchMean(variance, row)) {
      // Two-pass: mean((x - mean)^2).
      varianceMatches = centredSquares->kind == Kind::Mul &&
                        equal(centredSquares->operands[0], normalized) &&
                        equal(centredSquares->operands[1], normalized);
    } else if (variance->kind == Kind::Sub &&
               variance->operands[1]->kind == Kind::Mul) {
      // mean(x^2) - mean^2.
      Term *squares = matchMean(variance->operands[0], row);
      Term *meanSquared = variance->operands[1];
      varianceMatches = squares && squares->kind == Kind::Mul &&
                        equal(squares->operands[0], x) &&
                        equal(squares->operands[1], x) &&
                        equal(meanSquared->operands[0], mean) &&
                        equal(meanSquared->operands[1], mean);
    }
    if (varianceMatches)
      return NormMatch{true,
                       x->tensor,
                       gamma ? gamma->tensor : Value(),
                       beta ? beta->tensor : Value(),
                       epsilon,
                       reduced};
  }
  return std::nullopt;
}

/// Element types the fff ops accept, all of one type with the root's result.
bool typesFit(const NormMatch &match, RankedTensorType resultType) {
  auto inputType = dyn_cast<RankedTensorType>(match.input.getType());
  if (!inputType || inputType != resultType ||
      !isa<Float32Type, Float16Type, BFloat16Type>(inputType.getElementType()))
    return false;
  for (Value param : {match.gamma, match.beta})
    if (param && cast<ShapedType>(param.getType()).getElementType() !=
                     inputType.getElementType())
      return false;
  return true;
}

struct RaiseNormsPass : fff::impl::RaiseNormsBase<RaiseNormsPass> {
  void runOnOperation() override {
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
      std::optional<NormMatch> match = matchNorm(term, resultType);
      if (!match || !typesFit(*match, resultType))
        continue;
      rewriter.setInsertionPoint(op);
      Value raised = buildNorm(rewriter, op.getLoc(), *match);
      rewriter.replaceAllUsesWith(op->getResult(0), raised);
    }
    // The decomposed chains are dead now, except where they had other uses.
    if (failed(applyPatternsGreedily(getOperation(),
                                     RewritePatternSet(&getContext()))))
      return signalPassFailure();
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

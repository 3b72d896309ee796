//===- ScalarTerms.cpp - tensor values as scalar expressions ----*- C++ -*-===//

#include "ScalarTerms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace fff;

using Kind = Term::Kind;

namespace {

Value yielded(OpResult result) {
  auto op = cast<linalg::GenericOp>(result.getOwner());
  return op.getBody()->getTerminator()->getOperand(result.getResultNumber());
}

bool startsAtZero(Value init) {
  FloatAttr zero;
  if (auto fill = init.getDefiningOp<linalg::FillOp>())
    return matchPattern(fill.getInputs()[0], m_Constant(&zero)) &&
           zero.getValue().isZero();
  return matchPattern(init, m_Constant(&zero)) && zero.getValue().isZero();
}

/// Whether `op`'s reduction dims are its trailing `reduced` dims and its
/// loop count is the root's, so that its dims can be read as the root's.
bool reducesTrailingDims(linalg::GenericOp op, unsigned rootRank) {
  int64_t rank = op.getNumLoops();
  int64_t reduced = op.getNumReductionLoops();
  auto iterators = op.getIteratorTypesArray();
  return rootRank == unsigned(rank) &&
         llvm::all_of(llvm::seq<int64_t>(0, rank), [&](int64_t d) {
           return (iterators[d] == utils::IteratorType::reduction) ==
                  (d >= rank - reduced);
         });
}

} // namespace

Term *TermBuilder::read(Value tensor, AffineMap map) {
  auto key =
      std::make_pair(tensor.getAsOpaquePointer(), map.getAsOpaquePointer());
  auto it = memo.find(key);
  if (it != memo.end())
    return it->second;
  Term *term = storage.size() < kMaxTerms ? readUncached(tensor, map) : nullptr;
  if (term)
    term->origins.emplace_back(tensor, map);
  memo[key] = term;
  return term;
}

Term *TermBuilder::readUncached(Value tensor, AffineMap map) {
  FloatAttr splat;
  if (matchPattern(tensor, m_Constant(&splat)))
    return constant(splat.getValueAsDouble());
  if (auto expand = tensor.getDefiningOp<tensor::ExpandShapeOp>())
    return readThroughUnitDims(expand, map);
  if (auto collapse = tensor.getDefiningOp<tensor::CollapseShapeOp>())
    return readThroughUnitDims(collapse, map);
  auto result = dyn_cast<OpResult>(tensor);
  auto producer =
      result ? dyn_cast<linalg::GenericOp>(result.getOwner()) : nullptr;
  if (!producer)
    return input(tensor, map);
  if (producer.getNumReductionLoops() == 0)
    return readElementwise(result, map);
  return readRowSum(result, map);
}

Term *TermBuilder::make(Kind kind, ArrayRef<Term *> operands) {
  for (Term *operand : operands)
    if (!operand)
      return nullptr;
  storage.push_back(Term{kind, Value(), AffineMap(), 0, 0, {}, {}});
  storage.back().operands.assign(operands.begin(), operands.end());
  return &storage.back();
}

Term *TermBuilder::constant(double value) {
  Term *t = make(Kind::Constant);
  t->constant = value;
  return t;
}

Term *TermBuilder::input(Value tensor, AffineMap map) {
  Term *t = make(Kind::Input);
  t->tensor = tensor;
  t->map = map;
  return t;
}

/// One result of an elementwise producer: its body, with each input read
/// through its indexing map composed with the root's.
Term *TermBuilder::readElementwise(OpResult result, AffineMap map) {
  auto producer = cast<linalg::GenericOp>(result.getOwner());
  if (!producer.getIndexingMapMatchingResult(result).isIdentity())
    return input(result, map);
  SmallVector<Term *> args;
  for (OpOperand *operand : producer.getDpsInputOperands())
    args.push_back(read(operand->get(),
                        producer.getMatchingIndexingMap(operand).compose(map)));
  Term *body = fromBody(producer, yielded(result), args);
  return body ? body : input(result, map);
}

/// An expand_shape that only adds unit dims (as a keepdim reshape does):
/// reading it is reading its source with those dims dropped from the map.
Term *TermBuilder::readThroughUnitDims(tensor::ExpandShapeOp expand,
                                       AffineMap map) {
  ArrayRef<int64_t> shape = expand.getResultType().getShape();
  SmallVector<AffineExpr> sourceResults;
  for (const ReassociationIndices &group : expand.getReassociationIndices()) {
    SmallVector<int64_t> nonUnit;
    for (int64_t dim : group) {
      // The verifier lets through indices past the rank (they wrap in its
      // 32-bit affine dims); such a reshape is read as an input.
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
  return read(expand.getSrc(), AffineMap::get(map.getNumDims(), 0,
                                              sourceResults, map.getContext()));
}

/// A collapse_shape that only drops unit dims (a [rows, 1] statistic
/// collapsed to [rows] before a broadcast): reading it is reading its
/// source with those dims read at 0.
Term *TermBuilder::readThroughUnitDims(tensor::CollapseShapeOp collapse,
                                       AffineMap map) {
  ArrayRef<int64_t> source = collapse.getSrcType().getShape();
  SmallVector<AffineExpr> sourceResults;
  for (auto [index, group] :
       llvm::enumerate(collapse.getReassociationIndices())) {
    int64_t nonUnit = -1;
    for (int64_t dim : group) {
      if (dim < 0 || dim >= int64_t(source.size()))
        return input(collapse.getResult(), map);
      if (source[dim] == 1)
        continue;
      if (nonUnit >= 0)
        return input(collapse.getResult(), map);
      nonUnit = dim;
    }
    // The group's one extent that is not 1 takes the collapsed index; with
    // none, the collapsed dim is 1 and any of them does.
    if (nonUnit < 0)
      nonUnit = group.front();
    for (int64_t dim : group)
      sourceResults.push_back(dim == nonUnit
                                  ? map.getResult(index)
                                  : getAffineConstantExpr(0, map.getContext()));
  }
  return read(
      collapse.getSrc(),
      AffineMap::get(map.getNumDims(), 0, sourceResults, map.getContext()));
}

/// One result of a sum over trailing dims (a reduction may compute several,
/// as the sum and the sum of squares of a one-pass variance), read back
/// with the map it was written with (keepdim `(d0, 0)` or not `(d0)`), so
/// that the producer's dims are the root's.
Term *TermBuilder::readRowSum(OpResult result, AffineMap map) {
  auto producer = cast<linalg::GenericOp>(result.getOwner());
  unsigned index = result.getResultNumber();
  if (!reducesTrailingDims(producer, map.getNumDims()) ||
      producer.getIndexingMapMatchingResult(result) != map ||
      !startsAtZero(producer.getDpsInitOperand(index)->get()))
    return input(result, map);
  // The result must be acc + term (either order), acc used nowhere else.
  auto add = yielded(result).getDefiningOp<arith::AddFOp>();
  Value acc = producer.getRegionOutputArgs()[index];
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
  summed->reduced = producer.getNumReductionLoops();
  return summed;
}

/// The scalar `value` of `op`'s body as a Term; `args` are the inputs'.
Term *TermBuilder::fromBody(linalg::GenericOp op, Value value,
                            ArrayRef<Term *> args) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (arg.getOwner() != op.getBody() || arg.getArgNumber() >= args.size())
      return nullptr; // an output, or a value from elsewhere
    return args[arg.getArgNumber()];
  }
  FloatAttr scalar;
  if (matchPattern(value, m_Constant(&scalar)))
    return constant(scalar.getValueAsDouble());
  Operation *def = value.getDefiningOp();
  auto sub = [&](unsigned i) { return fromBody(op, def->getOperand(i), args); };
  return TypeSwitch<Operation *, Term *>(def)
      // Float casts only change the precision the reference computes in.
      .Case<arith::ExtFOp, arith::TruncFOp>([&](Operation *) { return sub(0); })
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
      .Case<arith::MaximumFOp, arith::MaxNumFOp>([&](Operation *) {
        return make(Kind::Max, {sub(0), sub(1)});
      })
      .Case<math::FPowIOp, math::PowFOp>([&](Operation *pow) -> Term * {
        // x^n for a small whole n, as a product: torch's x.pow(2) in a
        // norm, and x^1 and rstd^3 in the decomposed RMSNorm backward.
        // x^-0.5 and x^0.5 are rsqrt(x) and sqrt(x) (Gemma 3n's
        // pow(mean(x^2) + eps, -0.5)).
        APInt intExponent;
        FloatAttr floatExponent;
        int64_t exponent = 0;
        if (matchPattern(pow->getOperand(1), m_ConstantInt(&intExponent)))
          exponent = intExponent.getSExtValue();
        else if (matchPattern(pow->getOperand(1), m_Constant(&floatExponent))) {
          double value = floatExponent.getValueAsDouble();
          if (value == -0.5)
            return make(Kind::Rsqrt, {sub(0)});
          if (value == 0.5)
            return make(Kind::Sqrt, {sub(0)});
          if (value == std::trunc(value))
            exponent = int64_t(value);
        }
        if (exponent < 1 || exponent > kMaxPowExponent)
          return nullptr;
        Term *base = sub(0);
        Term *product = base;
        for (int64_t i = 1; i < exponent && product; ++i)
          product = make(Kind::Mul, {product, base});
        return product;
      })
      .Case([&](math::RsqrtOp) { return make(Kind::Rsqrt, {sub(0)}); })
      .Case([&](math::SqrtOp) { return make(Kind::Sqrt, {sub(0)}); })
      .Default([](Operation *) { return nullptr; });
}

bool fff::sameConstant(double a, double b) {
  return std::abs(a - b) <= 1e-6 * std::max(std::abs(a), std::abs(b));
}

bool fff::equal(const Term *a, const Term *b) {
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
    return a->reduced == b->reduced && equal(a->operand(0), b->operand(0));
  case Kind::Add:
  case Kind::Mul:
  case Kind::Max: // commutative
    if (equal(a->operand(0), b->operand(1)) &&
        equal(a->operand(1), b->operand(0)))
      return true;
    [[fallthrough]];
  default:
    return llvm::all_of(llvm::zip(a->operands, b->operands), [](auto pair) {
      return equal(std::get<0>(pair), std::get<1>(pair));
    });
  }
}

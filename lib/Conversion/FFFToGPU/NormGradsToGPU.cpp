//===- NormGradsToGPU.cpp - fff norm backward ops to GPU kernels ----------===//
//
// convert-fff-to-gpu's lowering of fff.layer_norm_grad and
// fff.rms_norm_grad: one launch of the dx and partials kernel and, where a
// parameter gradient is used, one of the column sums (NormGradKernel.h).
// The partial rows are a scratch buffer of the host function, freed by
// the pipeline's deallocation like any other.
//
// A backward's fused unit (fff.fusion around a norm backward) is the same
// two kernels: the first computes dy and x from the unit's inputs per
// vector as it reads them (the prologue: a dropout mask and scale, a
// mixed-precision norm's widening casts) and feeds dx to the unit's
// epilogue as it writes it (the residual gradient's add, a cast), so that
// none of dy, x and dx goes through memory.
//
//===----------------------------------------------------------------------===//

#include "NormGradsToGPU.h"

#include "LaneEmitter.h"
#include "NormGradKernel.h"
#include "RowView.h"
#include "UnitEvaluator.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;

namespace {

/// What one backward op is, in the terms of its kernels. `gradOutput` and
/// `input` are null where a fused unit computes dy and x.
struct GradOperands {
  Value gradOutput, input, mean, rstd, gamma;
  float epsilon;
  int64_t normalizedRank;
  bool subtractMean;
};

/// `op`'s operands as `lookup` maps them (null ones stay null).
GradOperands gradOperands(Operation *op, function_ref<Value(Value)> lookup) {
  auto find = [&](Value v) { return v ? lookup(v) : Value(); };
  if (auto layerNorm = dyn_cast<LayerNormGradOp>(op))
    return {find(layerNorm.getGradOutput()),
            find(layerNorm.getInput()),
            find(layerNorm.getMean()),
            find(layerNorm.getRstd()),
            find(layerNorm.getGamma()),
            /*epsilon=*/0.0f,
            int64_t(layerNorm.getNormalizedRank()),
            /*subtractMean=*/true};
  auto rmsNorm = cast<RMSNormGradOp>(op);
  return {find(rmsNorm.getGradOutput()),
          find(rmsNorm.getInput()),
          /*mean=*/Value(),
          find(rmsNorm.getRstd()),
          find(rmsNorm.getGamma()),
          rmsNorm.getEpsilon().convertToFloat(),
          int64_t(rmsNorm.getNormalizedRank()),
          /*subtractMean=*/false};
}

/// Whether the unit's pointwise work reads `arg`, not only the backward op
/// `op`: then the kernel needs it as a buffer of its own.
bool readByUnitWork(BlockArgument arg, Operation *op) {
  return llvm::any_of(arg.getUsers(),
                      [&](Operation *user) { return user != op; });
}

/// The first input of `unit` of x's shape: where the unit computes x, the
/// host side sizes the kernels' rows from it. Null if there is none.
BlockArgument rowInput(FusionOp unit, Operation *gradOp) {
  Type rowType = gradOp->getOperand(1).getType();
  ArrayRef<int64_t> rowShape = cast<RankedTensorType>(rowType).getShape();
  for (BlockArgument arg : unit.getBody().front().getArguments())
    if (auto type = dyn_cast<RankedTensorType>(arg.getType());
        type && type.getShape() == rowShape)
      return arg;
  return {};
}

/// A backward's fused unit as its kernels see it: the buffers its
/// evaluator reads (one per unit input, null for those only the backward
/// op reads) and, per unit result computed per vector, the value and the
/// [rows, rowSize] matrix it is stored in.
struct GradUnit {
  FusionOp unit;
  SmallVector<Value> buffers;
  SmallVector<std::pair<Value, unsigned>> rowResults; // value, buffer index
};

/// How many more [rows, rowSize] buffers than x, dy and dx the kernel of
/// `unit` (around the backward op `op`) reads and writes: the row inputs
/// its pointwise ops read, its row results, and dy where it is an input.
int64_t extraRowStreams(FusionOp unit, Operation *op) {
  ArrayRef<int64_t> rowShape =
      cast<RankedTensorType>(op->getOperand(1).getType()).getShape();
  auto isRow = [&](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape() == rowShape;
  };
  Block &body = unit.getBody().front();
  int64_t streams = isa<BlockArgument>(op->getOperand(0)) + // dy, x
                    isa<BlockArgument>(op->getOperand(1));
  for (BlockArgument arg : body.getArguments())
    if (isRow(arg) && readByUnitWork(arg, op))
      ++streams;
  for (Value yielded : body.getTerminator()->getOperands())
    if (isRow(yielded))
      ++streams;
  return std::max<int64_t>(0, streams - 3);
}

/// `[fused_]prefix_<type>_<row size>_<what>`: what a profiler should show.
std::string kernelName(Operation *op, bool fused, Type elementType,
                       std::optional<int64_t> rowSize, StringRef what) {
  std::string name;
  llvm::raw_string_ostream os(name);
  os << (fused ? "fused_" : "") << op->getName().stripDialect() << "_"
     << elementType << "_";
  if (rowSize)
    os << *rowSize;
  else
    os << "dynamic";
  os << "_" << what;
  return name;
}

/// Points the kernel's dy, x and dx paths at `unit`'s prologue and
/// epilogue: dy and x are computed from the unit's inputs where the unit
/// computes them, and every row result of the unit from dx (rounded to its
/// type) and those inputs.
void bindGradUnit(NormGradProblem &p, Operation *gradOp, const GradUnit &unit,
                  int64_t width) {
  FusionOp fusion = unit.unit;
  SmallVector<Value> buffers = unit.buffers;
  Value dy = gradOp->getOperand(0), x = gradOp->getOperand(1),
        dx = gradOp->getResult(0);
  auto computed = [=](Value value) {
    return [=](ImplicitLocOpBuilder &b, Value row, Value chunk) {
      return UnitVectorEvaluator(b, fusion, buffers, width, row, chunk)
          .get(value);
    };
  };
  if (!isa<BlockArgument>(dy))
    p.loadGradOutput = computed(dy);
  if (!isa<BlockArgument>(x))
    p.loadInput = computed(x);
  SmallVector<std::pair<Value, unsigned>> rowResults = unit.rowResults;
  p.storeGradInput = [=](ImplicitLocOpBuilder &b, Value row, Value chunk,
                         Value gradInput) {
    UnitVectorEvaluator evaluate(b, fusion, buffers, width, row, chunk);
    Type elementType = getElementTypeOrSelf(dx.getType());
    if (!elementType.isF32())
      gradInput = arith::TruncFOp::create(
          b, VectorType::get({width}, elementType), gradInput);
    evaluate.seed(dx, gradInput);
    for (auto [value, buffer] : rowResults)
      evaluate.store(evaluate.get(value), buffers[buffer]);
  };
}

/// Builds (or finds, for a repeated layer) the dx and partials kernel and
/// launches it on `blocks` blocks.
void launchGradKernel(RewriterBase &rewriter, ImplicitLocOpBuilder &b,
                      Operation *op, const NormGradStrategy &strategy,
                      const NormGradProblem &host, const GradUnit *unit,
                      Value blocks) {
  NormGradProblem inKernel = host;
  GradUnit unitInKernel = unit ? *unit : GradUnit();
  SmallVector<Value *> fields{&inKernel.gradOutput,    &inKernel.input,
                              &inKernel.gamma,         &inKernel.mean,
                              &inKernel.rstd,          &inKernel.gradInput,
                              &inKernel.gammaPartials, &inKernel.betaPartials,
                              &inKernel.rows,          &inKernel.rowSize};
  for (Value &buffer : unitInKernel.buffers)
    fields.push_back(&buffer);
  KernelParameters parameters(fields);
  const NormStrategy &row = strategy.row;
  KernelSpec spec;
  spec.name = kernelName(op, unit, host.elementType, host.staticRowSize,
                         NormStrategy::kindName(row.kind));
  spec.threadsPerBlock = row.threadsPerBlock();
  spec.maxRegisters = row.maxRegisters;
  spec.strategy = strategy.toAttr(rewriter.getContext());
  Type f32 = rewriter.getF32Type();
  bool needsSharedPartials = row.threadsPerRow > kWarpSize;
  if (needsSharedPartials)
    spec.workgroupBuffers.push_back(workgroupBufferType({kWarpSize}, f32));
  int64_t sharedColumns = 0;
  if (row.rowsPerBlock > 1) {
    sharedColumns = bool(host.gammaPartials) + bool(host.betaPartials);
    for (int64_t i = 0; i < sharedColumns; ++i)
      spec.workgroupBuffers.push_back(
          workgroupBufferType({*host.staticRowSize}, f32));
  }
  // A fused unit's kernel is made from the whole unit.
  Operation *source = unit ? unitInKernel.unit.getOperation() : op;
  gpu::GPUFuncOp kernel = kernelFor(
      rewriter, source, spec, parameters,
      [&](ImplicitLocOpBuilder &kb, gpu::GPUFuncOp kernel, Value threadId,
          Value blockId) {
        if (unit)
          bindGradUnit(inKernel, op, unitInKernel, row.vectorWidth);
        ArrayRef<BlockArgument> shared = kernel.getWorkgroupAttributions();
        Value partials = needsSharedPartials ? Value(shared.front()) : Value();
        SmallVector<Value> columns(shared.take_back(sharedColumns).begin(),
                                   shared.take_back(sharedColumns).end());
        emitNormGradKernel(kb, strategy, inKernel, threadId, blockId, partials,
                           columns);
      });
  launchKernel(b, kernel, blocks, spec.threadsPerBlock, parameters.operands());
}

/// Builds (or finds) the column sums kernel and launches it over the row.
void launchColumnSums(RewriterBase &rewriter, ImplicitLocOpBuilder &b,
                      Operation *op, const NormGradStrategy &strategy,
                      const NormGradProblem &host, ValueRange partials,
                      ValueRange gradients) {
  SmallVector<Value> fields(partials);
  llvm::append_range(fields, gradients);
  fields.push_back(host.rowSize);
  SmallVector<Value *> addresses;
  for (Value &field : fields)
    addresses.push_back(&field);
  KernelParameters parameters(addresses);
  KernelSpec spec;
  spec.name = kernelName(op, /*fused=*/false, host.elementType,
                         host.staticRowSize, "column_sums");
  spec.threadsPerBlock = strategy.columnThreads;
  spec.maxRegisters = NormStrategy::kMaxRegistersPerThread;
  spec.strategy = strategy.columnSumsAttr(rewriter.getContext());
  size_t count = partials.size();
  gpu::GPUFuncOp kernel =
      kernelFor(rewriter, op, spec, parameters,
                [&](ImplicitLocOpBuilder &kb, gpu::GPUFuncOp, Value threadId,
                    Value blockId) {
                  ValueRange bound(fields);
                  emitColumnSumsKernel(kb, strategy, bound.take_front(count),
                                       bound.slice(count, count), bound.back(),
                                       threadId, blockId);
                });
  Value blocks = arith::CeilDivUIOp::create(
      b, host.rowSize,
      arith::ConstantIndexOp::create(b, strategy.columnThreads));
  launchKernel(b, kernel, blocks, spec.threadsPerBlock, parameters.operands());
}

/// Lowers the backward op `op` (operands `in`) to its kernels. With a
/// `unitInputs`, `op` is the backward in the fused unit `unit`, whose
/// inputs they are, and the unit is replaced; otherwise `op` is. `rows` is
/// a host tensor of x's shape: x itself, or a unit input where the unit
/// computes x.
LogicalResult lowerNormGrad(Operation *op, const GradOperands &in, Value rows,
                            ConversionPatternRewriter &rewriter,
                            FusionOp unit = {}, ValueRange unitInputs = {}) {
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  RowView view(b, rows, in.normalizedRank);
  Type elementType = getElementTypeOrSelf(op->getOperand(1).getType());
  NormGradStrategy strategy = selectNormGradStrategy(
      view.staticRowSize, elementType, unit ? extraRowStreams(unit, op) : 0);
  NormGradProblem problem;
  problem.subtractMean = in.subtractMean;
  problem.epsilon = in.epsilon;
  problem.elementType = elementType;
  if (in.input)
    problem.input = view.matrix;
  if (in.gradOutput)
    problem.gradOutput = view.matrixOf(b, in.gradOutput);
  problem.gamma = collapsedBuffer(b, in.gamma, view.paramGroups);
  auto rowStatistics = [&](Value stats) -> Value {
    if (!stats)
      return Value();
    int64_t rank = cast<RankedTensorType>(stats.getType()).getRank();
    return collapsedBuffer(b, stats, {dimRange(0, rank)});
  };
  problem.mean = rowStatistics(in.mean);
  problem.rstd = rowStatistics(in.rstd);
  problem.rows = view.rows;
  problem.rowSize = view.rowSize;
  problem.staticRowSize = view.staticRowSize;

  // dx, unless a unit consumes it.
  SmallVector<Value> opResults;
  if (!unit) {
    Value dx =
        view.allocResult(b, cast<RankedTensorType>(op->getResult(0).getType()));
    problem.gradInput = view.outputMatrix(b, dx);
    opResults.push_back(RowView::toTensor(b, dx));
  } else {
    opResults.push_back(Value());
  }

  // Each used parameter gradient gets its partial rows and a buffer of the
  // normalized shape; one nothing uses is an empty tensor.
  auto [blocks, rowsPerBlock] = partialBlocksAndRows(b, strategy, view.rows);
  int64_t leadingRank =
      cast<RankedTensorType>(rows.getType()).getRank() - in.normalizedRank;
  SmallVector<Value> partials, gradients;
  for (auto [i, result] : llvm::enumerate(op->getResults().drop_front())) {
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<Value> extents;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (type.isDynamicDim(d))
        extents.push_back(getValueOrCreateConstantIndexOp(
            b, b.getLoc(), view.originalSizes[leadingRank + d]));
    if (result.use_empty()) {
      opResults.push_back(tensor::EmptyOp::create(
          b, type.getShape(), type.getElementType(), extents));
      continue;
    }
    Value gradient = memref::AllocOp::create(
        b, MemRefType::get(type.getShape(), type.getElementType()), extents);
    opResults.push_back(RowView::toTensor(b, gradient));
    gradients.push_back(RowView::flatBuffer(b, gradient));
    SmallVector<int64_t> partialShape{
        ShapedType::kDynamic,
        view.staticRowSize.value_or(ShapedType::kDynamic)};
    SmallVector<Value> partialExtents{blocks};
    if (!view.staticRowSize)
      partialExtents.push_back(view.rowSize);
    partials.push_back(memref::AllocOp::create(
        b, MemRefType::get(partialShape, b.getF32Type()), partialExtents));
    bool isGammaGrad = in.gamma && i == 0;
    (isGammaGrad ? problem.gammaPartials : problem.betaPartials) =
        partials.back();
  }

  if (!unit) {
    launchGradKernel(rewriter, b, op, strategy, problem, /*unit=*/nullptr,
                     blocks);
    if (!partials.empty())
      launchColumnSums(rewriter, b, op, strategy, problem, partials, gradients);
    rewriter.replaceOp(op, opResults);
    return success();
  }

  // The unit's buffers: its inputs that anything but the backward op reads
  // (rows as [rows, rowSize], parameters as [rowSize]), then one matrix per
  // result computed per vector. Its parameter gradients are the op's.
  GradUnit gradUnit{unit, {}, {}};
  Block &body = unit.getBody().front();
  auto rowShape = cast<RankedTensorType>(op->getOperand(1).getType());
  for (auto [arg, input] : llvm::zip(body.getArguments(), unitInputs)) {
    bool isRow =
        cast<RankedTensorType>(arg.getType()).getShape() == rowShape.getShape();
    gradUnit.buffers.push_back(
        readByUnitWork(arg, op)
            ? collapsedBuffer(b, input,
                              isRow ? view.matrixGroups : view.paramGroups)
            : Value());
  }
  SmallVector<Value> results;
  for (Value yielded : body.getTerminator()->getOperands()) {
    auto result = dyn_cast<OpResult>(yielded);
    if (result && result.getOwner() == op && result.getResultNumber() > 0) {
      results.push_back(opResults[result.getResultNumber()]);
      continue;
    }
    Value buffer =
        view.allocResult(b, cast<RankedTensorType>(yielded.getType()));
    results.push_back(RowView::toTensor(b, buffer));
    gradUnit.rowResults.push_back({yielded, unsigned(gradUnit.buffers.size())});
    gradUnit.buffers.push_back(view.outputMatrix(b, buffer));
  }
  launchGradKernel(rewriter, b, op, strategy, problem, &gradUnit, blocks);
  if (!partials.empty())
    launchColumnSums(rewriter, b, op, strategy, problem, partials, gradients);
  rewriter.replaceOp(unit, results);
  return success();
}

template <typename Op> struct NormGradToGPU : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    IRMapping converted;
    converted.map(op->getOperands(), adaptor.getOperands());
    GradOperands in =
        gradOperands(op, [&](Value v) { return converted.lookup(v); });
    return lowerNormGrad(op, in, in.input, rewriter);
  }
};

} // namespace

void fff::populateNormGradsToGPUPatterns(RewritePatternSet &patterns) {
  patterns.add<NormGradToGPU<LayerNormGradOp>, NormGradToGPU<RMSNormGradOp>>(
      patterns.getContext());
}

std::string fff::whyNormGradUnitIsNotOneKernel(FusionOp unit) {
  Operation *gradOp = unit.getNorm();
  auto rowType = cast<RankedTensorType>(gradOp->getOperand(1).getType());
  int64_t normalizedRank =
      gradOperands(gradOp, [](Value v) { return v; }).normalizedRank;
  if (normalizedRank == rowType.getRank())
    return "a norm backward over the whole tensor";
  ArrayRef<int64_t> paramShape = rowType.getShape().take_back(normalizedRank);
  // dy and x may be computed per vector; the rest is read per row or once.
  for (Value operand : gradOp->getOperands().drop_front(2))
    if (!isa<BlockArgument>(operand))
      return "statistics or a scale computed inside the unit";
  if (!rowInput(unit, gradOp))
    return "a unit without an input of x's shape";
  Block &body = unit.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!readByUnitWork(arg, gradOp))
      continue;
    if (!type || (type.getShape() != rowType.getShape() &&
                  type.getShape() != paramShape))
      return "an input that is neither a row tensor nor a per-column "
             "parameter";
    if (std::string whyNot = whyUnitEvaluatorCannotMove(type); !whyNot.empty())
      return whyNot;
  }
  Operation *yield = body.getTerminator();
  for (OpResult result : gradOp->getResults().drop_front())
    if (llvm::any_of(result.getUsers(),
                     [&](Operation *user) { return user != yield; }))
      return "work on a parameter gradient";
  for (Value yielded : yield->getOperands()) {
    auto result = dyn_cast<OpResult>(yielded);
    bool isParameterGradient =
        result && result.getOwner() == gradOp && result.getResultNumber() > 0;
    auto type = dyn_cast<RankedTensorType>(yielded.getType());
    if (isParameterGradient)
      continue;
    if (!type || type.getShape() != rowType.getShape())
      return "a result that is neither a row tensor nor a parameter "
             "gradient";
    if (std::string whyNot = whyUnitEvaluatorCannotMove(type); !whyNot.empty())
      return whyNot;
  }
  return whyUnitEvaluatorCannotTakeBody(unit, {gradOp}, rowType.getRank());
}

LogicalResult fff::lowerNormGradUnit(FusionOp unit, ValueRange inputs,
                                     ConversionPatternRewriter &rewriter) {
  Operation *gradOp = unit.getNorm();
  auto lookup = [&](Value inner) -> Value {
    auto arg = dyn_cast<BlockArgument>(inner);
    return arg ? inputs[arg.getArgNumber()] : Value();
  };
  GradOperands in = gradOperands(gradOp, lookup);
  Value rows =
      in.input ? in.input : inputs[rowInput(unit, gradOp).getArgNumber()];
  return lowerNormGrad(gradOp, in, rows, rewriter, unit, inputs);
}

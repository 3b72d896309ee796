//===- NormGradsToGPU.cpp - fff norm backward ops to GPU kernels ----------===//
//
// convert-fff-to-gpu's lowering of fff.layer_norm_grad and
// fff.rms_norm_grad: one launch of the dx and partials kernel and, where a
// parameter gradient is used, one of the column sums (NormGradKernel.h).
// The partial rows are a scratch buffer of the host function, freed by
// the pipeline's deallocation like any other.
//
//===----------------------------------------------------------------------===//

#include "NormGradsToGPU.h"

#include "LaneEmitter.h"
#include "NormGradKernel.h"
#include "RowView.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;

namespace {

/// What one backward op is, in the terms of its kernels.
struct GradOperands {
  Value gradOutput, input, mean, rstd, gamma;
  float epsilon;
  int64_t normalizedRank;
  bool subtractMean;
};

/// `prefix_<type>_<row size>_<what>`: what a profiler should show.
std::string kernelName(Operation *op, Type elementType,
                       std::optional<int64_t> rowSize, StringRef what) {
  std::string name;
  llvm::raw_string_ostream os(name);
  os << op->getName().stripDialect() << "_" << elementType << "_";
  if (rowSize)
    os << *rowSize;
  else
    os << "dynamic";
  os << "_" << what;
  return name;
}

/// Builds (or finds, for a repeated layer) the dx and partials kernel and
/// launches it on `blocks` blocks.
void launchGradKernel(RewriterBase &rewriter, ImplicitLocOpBuilder &b,
                      Operation *op, const NormGradStrategy &strategy,
                      const NormGradProblem &host, Value blocks) {
  NormGradProblem inKernel = host;
  KernelParameters parameters(
      {&inKernel.gradOutput, &inKernel.input, &inKernel.gamma, &inKernel.mean,
       &inKernel.rstd, &inKernel.gradInput, &inKernel.gammaPartials,
       &inKernel.betaPartials, &inKernel.rows, &inKernel.rowSize});
  const NormStrategy &row = strategy.row;
  KernelSpec spec;
  spec.name = kernelName(op, host.elementType, host.staticRowSize,
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
  gpu::GPUFuncOp kernel = kernelFor(
      rewriter, op, spec, parameters,
      [&](ImplicitLocOpBuilder &kb, gpu::GPUFuncOp kernel, Value threadId,
          Value blockId) {
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
  spec.name =
      kernelName(op, host.elementType, host.staticRowSize, "column_sums");
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

LogicalResult lowerNormGrad(Operation *op, const GradOperands &in,
                            ConversionPatternRewriter &rewriter) {
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  RowView view(b, in.input, in.normalizedRank);
  NormGradStrategy strategy =
      selectNormGradStrategy(view.staticRowSize, view.elementType());
  NormGradProblem problem;
  problem.subtractMean = in.subtractMean;
  problem.epsilon = in.epsilon;
  problem.elementType = view.elementType();
  problem.input = view.matrix;
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

  Value dx =
      view.allocResult(b, cast<RankedTensorType>(op->getResult(0).getType()));
  problem.gradInput = view.outputMatrix(b, dx);
  SmallVector<Value> results{RowView::toTensor(b, dx)};

  // Each used parameter gradient gets its partial rows and a buffer of the
  // normalized shape; one nothing uses is an empty tensor.
  auto [blocks, rowsPerBlock] = partialBlocksAndRows(b, strategy, view.rows);
  int64_t leadingRank =
      cast<RankedTensorType>(in.input.getType()).getRank() - in.normalizedRank;
  SmallVector<Value> partials, gradients;
  for (auto [i, result] : llvm::enumerate(op->getResults().drop_front())) {
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<Value> extents;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (type.isDynamicDim(d))
        extents.push_back(getValueOrCreateConstantIndexOp(
            b, b.getLoc(), view.originalSizes[leadingRank + d]));
    if (result.use_empty()) {
      results.push_back(tensor::EmptyOp::create(
          b, type.getShape(), type.getElementType(), extents));
      continue;
    }
    Value gradient = memref::AllocOp::create(
        b, MemRefType::get(type.getShape(), type.getElementType()), extents);
    results.push_back(RowView::toTensor(b, gradient));
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

  launchGradKernel(rewriter, b, op, strategy, problem, blocks);
  if (!partials.empty())
    launchColumnSums(rewriter, b, op, strategy, problem, partials, gradients);
  rewriter.replaceOp(op, results);
  return success();
}

struct LayerNormGradToGPU : OpConversionPattern<LayerNormGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LayerNormGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lowerNormGrad(
        op,
        {adaptor.getGradOutput(), adaptor.getInput(), adaptor.getMean(),
         adaptor.getRstd(), adaptor.getGamma(), /*epsilon=*/0.0f,
         int64_t(op.getNormalizedRank()), /*subtractMean=*/true},
        rewriter);
  }
};

struct RMSNormGradToGPU : OpConversionPattern<RMSNormGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RMSNormGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lowerNormGrad(op,
                         {adaptor.getGradOutput(), adaptor.getInput(),
                          /*mean=*/Value(), adaptor.getRstd(),
                          adaptor.getGamma(), op.getEpsilon().convertToFloat(),
                          int64_t(op.getNormalizedRank()),
                          /*subtractMean=*/false},
                         rewriter);
  }
};

} // namespace

void fff::populateNormGradsToGPUPatterns(RewritePatternSet &patterns) {
  patterns.add<LayerNormGradToGPU, RMSNormGradToGPU>(patterns.getContext());
}

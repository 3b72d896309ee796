//===- TreeFFNToGPU.cpp - fff tree layers to GPU kernels --------*- C++ -*-===//
//
// The host side of each fff.tree_ffn and fff.leaf_tree_ffn's kernels (their
// per-token code is TreeKernel.cpp): the strategies, the buffers, and the
// launch, the latency or the throughput kernel by batch size.
//
//===----------------------------------------------------------------------===//

#include "TreeFFNToGPU.h"

#include "LaneEmitter.h"
#include "TreeKernel.h"
#include "fff/Conversion/FFFToGPU/KernelStrategy.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

namespace {

std::optional<int64_t> staticDim(Value tensor, int64_t dim) {
  int64_t size = cast<RankedTensorType>(tensor.getType()).getDimSize(dim);
  return ShapedType::isDynamic(size) ? std::nullopt : std::optional(size);
}

/// The static shape of `op` the strategies depend on, or failure with the
/// reason in `whyNot`.
FailureOr<TreeShape> shapeOf(Operation *op, std::string &whyNot) {
  TreeShape shape;
  Value input = op->getOperand(0);
  shape.inWidth = staticDim(input, 1);
  shape.elementType = getElementTypeOrSelf(input.getType());
  if (auto tree = dyn_cast<TreeFFNOp>(op)) {
    std::optional<int64_t> trees = staticDim(tree.getWIn(), 0);
    if (!trees) {
      whyNot = "a dynamic number of trees";
      return failure();
    }
    shape.outWidth = staticDim(tree.getWOut(), 2);
    shape.trees = *trees;
    shape.levels = tree.getDepth() + 1;
    shape.hiddenWidth = 0;
    return shape;
  }
  auto leaf = cast<LeafTreeFFNOp>(op);
  std::optional<int64_t> width = staticDim(leaf.getW1(), 2);
  if (!width) {
    whyNot = "a dynamic leaf width";
    return failure();
  }
  shape.outWidth = staticDim(leaf.getW2(), 2);
  shape.trees = 1;
  shape.levels = leaf.getDepth();
  shape.hiddenWidth = *width;
  return shape;
}

/// The strategies of the kernels `op` gets: the forced variant's, or both
/// (latency first).
FailureOr<SmallVector<TreeStrategy>>
strategiesFor(Operation *op, std::optional<TreeStrategy::Variant> forced,
              bool staging, std::string &whyNot) {
  FailureOr<TreeShape> shape = shapeOf(op, whyNot);
  if (failed(shape))
    return failure();
  SmallVector<TreeStrategy> strategies;
  for (auto variant :
       {TreeStrategy::Variant::Latency, TreeStrategy::Variant::Throughput}) {
    if (forced && variant != *forced)
      continue;
    FailureOr<TreeStrategy> strategy =
        selectTreeStrategy(*shape, variant, staging, whyNot);
    if (failed(strategy))
      return failure();
    strategies.push_back(*strategy);
  }
  return strategies;
}

/// Rows of a [n, m, width] weight tensor, as an [n * m, width] buffer.
Value rowsOf(ImplicitLocOpBuilder &b, Value tensor) {
  return collapsedBuffer(b, tensor, {{0, 1}, {2}});
}
Value flat(ImplicitLocOpBuilder &b, Value tensor) {
  return collapsedBuffer(b, tensor, {{0, 1}});
}
Value asIs(ImplicitLocOpBuilder &b, Value tensor) {
  if (!tensor)
    return Value();
  auto rank = cast<RankedTensorType>(tensor.getType()).getRank();
  SmallVector<ReassociationIndices> identity;
  for (int64_t d = 0; d < rank; ++d)
    identity.push_back({d});
  return collapsedBuffer(b, tensor, identity);
}

} // namespace

std::string fff::treeKernelName(Operation *op, const TreeStrategy &strategy,
                                const TreeProblem &host) {
  // e.g. tree_ffn_bf16_768x768_depth11_latency.
  std::string name;
  llvm::raw_string_ostream os(name);
  auto size = [&](std::optional<int64_t> width) {
    if (width)
      os << *width;
    else
      os << "dynamic";
  };
  os << op->getName().stripDialect() << "_" << host.elementType << "_";
  size(host.staticInWidth);
  os << "x";
  size(host.staticOutWidth);
  os << "_depth" << cast<IntegerAttr>(op->getAttr("depth")).getInt();
  if (host.trees > 1)
    os << "_trees" << host.trees;
  os << "_" << TreeStrategy::variantName(strategy.variant);
  return name;
}

namespace {

/// Builds the kernel for `host` with `strategy` and launches it, or emits
/// its twin.
void buildTreeKernel(RewriterBase &rewriter, Operation *op,
                     const TreeStrategy &strategy, const TreeProblem &host,
                     bool cpuTwin) {
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  if (cpuTwin) {
    Operation *twin = emitTreeTwin(b, strategy, host);
    twin->setAttr(kGPUTwinAttrName, b.getUnitAttr());
    return;
  }

  TreeProblem inKernel = host;
  KernelParameters parameters(
      {&inKernel.input, &inKernel.routeWeights, &inKernel.routeBias,
       &inKernel.hiddenWeights, &inKernel.hiddenBias, &inKernel.outWeights,
       &inKernel.outBias, &inKernel.output, &inKernel.rows, &inKernel.inWidth,
       &inKernel.outWidth});

  KernelSpec spec;
  spec.name = treeKernelName(op, strategy, host);
  spec.threadsPerBlock = strategy.threadsPerBlock();
  spec.maxRegisters = strategy.maxRegisters;
  spec.strategy = strategy.toAttr(rewriter.getContext());
  spec.workgroupBuffers =
      treeSharedBuffers(rewriter.getContext(), strategy, host);
  gpu::GPUFuncOp kernel =
      createKernel(rewriter, op, spec, parameters.operands());
  parameters.bind(kernel);
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(&kernel.front());
    ImplicitLocOpBuilder kb(op->getLoc(), rewriter);
    emitTreeKernel(kb, strategy, inKernel,
                   gpu::ThreadIdOp::create(kb, gpu::Dimension::x),
                   gpu::BlockIdOp::create(kb, gpu::Dimension::x),
                   gpu::GridDimOp::create(kb, gpu::Dimension::x),
                   kernel.getWorkgroupAttributions());
    gpu::ReturnOp::create(kb);
  }
  Value blocks = arith::CeilDivUIOp::create(
      b, host.rows, arith::ConstantIndexOp::create(b, strategy.tokensPerBlock));
  if (strategy.residentBlocks)
    blocks = arith::MinUIOp::create(
        b, blocks, arith::ConstantIndexOp::create(b, kTreeResidentBlocks));
  launchKernel(b, kernel, blocks, strategy.threadsPerBlock(),
               parameters.operands());
}

/// Emits `strategies`' kernels (or twins); with two, the host runs the
/// latency kernel for batches of up to kTreeLatencyBoundTokens and the
/// throughput kernel for larger ones.
void emitTreeKernels(RewriterBase &rewriter, Operation *op,
                     ArrayRef<TreeStrategy> strategies,
                     const TreeProblem &problem, bool cpuTwin) {
  if (strategies.size() == 1)
    return buildTreeKernel(rewriter, op, strategies[0], problem, cpuTwin);
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  Value small = arith::CmpIOp::create(
      b, arith::CmpIPredicate::ule, problem.rows,
      arith::ConstantIndexOp::create(b, kTreeLatencyBoundTokens));
  auto choice = scf::IfOp::create(b, small, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(choice.thenBlock()->getTerminator());
  buildTreeKernel(rewriter, op, strategies[0], problem, cpuTwin);
  rewriter.setInsertionPoint(choice.elseBlock()->getTerminator());
  buildTreeKernel(rewriter, op, strategies[1], problem, cpuTwin);
}

/// Fills the parts every tree problem has and allocates the output.
Value commonProblem(ImplicitLocOpBuilder &b, TreeProblem &p, Operation *op,
                    Value input, Value outWeights) {
  p.elementType = getElementTypeOrSelf(input.getType());
  p.input = asIs(b, input);
  p.rows = memref::DimOp::create(b, p.input, 0);
  p.inWidth = memref::DimOp::create(b, p.input, 1);
  p.outWidth = tensor::DimOp::create(b, outWeights, 2);
  p.staticInWidth = staticDim(input, 1);
  p.staticOutWidth = staticDim(outWeights, 2);
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<Value> dynamicSizes;
  if (resultType.isDynamicDim(0))
    dynamicSizes.push_back(p.rows);
  if (resultType.isDynamicDim(1))
    dynamicSizes.push_back(p.outWidth);
  Value output = memref::AllocOp::create(
      b, MemRefType::get(resultType.getShape(), p.elementType), dynamicSizes);
  p.output = output;
  return output;
}

/// The problem of `op`, whose output buffer it returns.
Value describe(ImplicitLocOpBuilder &b, TreeFFNOp op,
               TreeFFNOp::Adaptor adaptor, TreeProblem &p) {
  p.activation = op.getActivation();
  p.trees = *staticDim(op.getWIn(), 0);
  p.nodesPerTree = op.getNumNodes();
  p.levels = op.getDepth() + 1;
  p.hiddenWidth = 0;
  p.routeWeights = rowsOf(b, adaptor.getWIn());
  p.routeBias = flat(b, adaptor.getBIn());
  p.outWeights = rowsOf(b, adaptor.getWOut());
  p.outBias = asIs(b, adaptor.getBOut());
  return commonProblem(b, p, op, adaptor.getInput(), adaptor.getWOut());
}

Value describe(ImplicitLocOpBuilder &b, LeafTreeFFNOp op,
               LeafTreeFFNOp::Adaptor adaptor, TreeProblem &p) {
  p.activation = op.getActivation();
  p.trees = 1;
  p.nodesPerTree = op.getNumRoutingNodes();
  p.levels = op.getDepth();
  p.hiddenWidth = *staticDim(op.getW1(), 2);
  p.routeWeights = asIs(b, adaptor.getNodeW());
  p.routeBias = asIs(b, adaptor.getNodeB());
  p.hiddenWeights = rowsOf(b, adaptor.getW1());
  p.hiddenBias = asIs(b, adaptor.getB1());
  p.outWeights = rowsOf(b, adaptor.getW2());
  p.outBias = asIs(b, adaptor.getB2());
  return commonProblem(b, p, op, adaptor.getInput(), adaptor.getW2());
}

template <typename Op> struct TreeToGPUPattern : OpConversionPattern<Op> {
  TreeToGPUPattern(MLIRContext *context, bool cpuTwin,
                   std::optional<TreeStrategy::Variant> variant, bool staging)
      : OpConversionPattern<Op>(context), cpuTwin(cpuTwin), variant(variant),
        staging(staging) {}

  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    std::string whyNot;
    FailureOr<SmallVector<TreeStrategy>> strategies =
        strategiesFor(op, variant, staging, whyNot);
    if (failed(strategies))
      return rewriter.notifyMatchFailure(op, whyNot);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    TreeProblem problem;
    Value output = describe(b, op, adaptor, problem);
    emitTreeKernels(rewriter, op, *strategies, problem, cpuTwin);
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
        op, op.getType(), output, /*restrict=*/true, /*writable=*/true);
    return success();
  }

  bool cpuTwin;
  std::optional<TreeStrategy::Variant> variant;
  bool staging;
};

} // namespace

std::string fff::whyTreeOpHasNoGPUKernel(Operation *op) {
  std::string whyNot;
  (void)strategiesFor(op, std::nullopt, /*staging=*/true, whyNot);
  return whyNot;
}

LogicalResult fff::populateTreeOpsToGPUPatterns(RewritePatternSet &patterns,
                                                bool cpuTwin,
                                                StringRef treeVariant,
                                                bool staging) {
  std::optional<TreeStrategy::Variant> variant;
  if (treeVariant == "latency")
    variant = TreeStrategy::Variant::Latency;
  else if (treeVariant == "throughput")
    variant = TreeStrategy::Variant::Throughput;
  else if (treeVariant != "auto")
    return failure();
  patterns.add<TreeToGPUPattern<TreeFFNOp>, TreeToGPUPattern<LeafTreeFFNOp>>(
      patterns.getContext(), cpuTwin, variant, staging);
  return success();
}

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

std::optional<int64_t> fff::staticDim(Value tensor, int64_t dim) {
  int64_t size = cast<RankedTensorType>(tensor.getType()).getDimSize(dim);
  return ShapedType::isDynamic(size) ? std::nullopt : std::optional(size);
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

namespace {

/// No tree kernel takes a tree count or a row width past this. Every size
/// selectTreeStrategy derives (records per token, shared-memory bytes,
/// staged rows) is then a product of these and constants under 2^14 that
/// stays far inside int64_t: with 2^62 trees, one overflowed to zero and
/// was divided by.
constexpr int64_t kMaxTreeExtent = int64_t(1) << 24;

FailureOr<TreeShape> boundedShape(TreeShape shape, std::string &whyNot) {
  for (std::optional<int64_t> extent :
       {shape.inWidth, shape.outWidth, std::optional<int64_t>(shape.trees),
        std::optional<int64_t>(shape.hiddenWidth)})
    if (extent && *extent > kMaxTreeExtent) {
      whyNot = "a tree count or row width past 2^24";
      return failure();
    }
  return shape;
}

} // namespace

FailureOr<TreeShape> fff::treeShapeOf(Operation *op, std::string &whyNot) {
  TreeShape shape;
  auto gradient = dyn_cast<TreeFFNGradOp>(op);
  auto leafGradient = dyn_cast<LeafTreeFFNGradOp>(op);
  Value input = gradient       ? gradient.getInput()
                : leafGradient ? leafGradient.getInput()
                               : op->getOperand(0);
  shape.inWidth = staticDim(input, 1);
  shape.elementType = getElementTypeOrSelf(input.getType());
  if (isa<TreeFFNOp, TreeFFNGradOp>(op)) {
    Value wIn = gradient ? gradient.getWIn() : cast<TreeFFNOp>(op).getWIn();
    Value wOut = gradient ? gradient.getWOut() : cast<TreeFFNOp>(op).getWOut();
    std::optional<int64_t> trees = staticDim(wIn, 0);
    if (!trees) {
      whyNot = "a dynamic number of trees";
      return failure();
    }
    shape.outWidth = staticDim(wOut, 2);
    shape.trees = *trees;
    shape.levels = cast<IntegerAttr>(op->getAttr("depth")).getInt() + 1;
    shape.hiddenWidth = 0;
    return boundedShape(shape, whyNot);
  }
  auto leaf = dyn_cast<LeafTreeFFNOp>(op);
  Value w1 = leaf ? leaf.getW1() : leafGradient.getW1();
  Value w2 = leaf ? leaf.getW2() : leafGradient.getW2();
  std::optional<int64_t> width = staticDim(w1, 2);
  if (!width) {
    whyNot = "a dynamic leaf width";
    return failure();
  }
  shape.outWidth = staticDim(w2, 2);
  shape.trees = 1;
  shape.levels = cast<IntegerAttr>(op->getAttr("depth")).getInt();
  shape.hiddenWidth = *width;
  return boundedShape(shape, whyNot);
}

namespace {

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

FailureOr<SmallVector<TreeStrategy>>
fff::treeStrategiesFor(Operation *op, const TreeKernelOptions &options,
                       int64_t fusedRowBytesPerToken, std::string &whyNot) {
  FailureOr<TreeShape> shape = treeShapeOf(op, whyNot);
  if (failed(shape))
    return failure();
  shape->fusedRowBytesPerToken = fusedRowBytesPerToken;
  SmallVector<TreeStrategy> strategies;
  for (auto variant :
       {TreeStrategy::Variant::Latency, TreeStrategy::Variant::Throughput}) {
    if (options.variant && variant != *options.variant)
      continue;
    FailureOr<TreeStrategy> strategy =
        selectTreeStrategy(*shape, variant, options.staging, whyNot);
    if (failed(strategy))
      return failure();
    strategies.push_back(*strategy);
  }
  return strategies;
}

void fff::emitByBatchSize(OpBuilder &builder, Location loc, Value rows,
                          ArrayRef<TreeStrategy> strategies,
                          function_ref<void(const TreeStrategy &)> emit) {
  if (strategies.size() == 1)
    return emit(strategies[0]);
  Value small = arith::CmpIOp::create(
      builder, loc, arith::CmpIPredicate::ule, rows,
      arith::ConstantIndexOp::create(builder, loc, kTreeLatencyBoundTokens));
  auto choice = scf::IfOp::create(builder, loc, small, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(choice.thenBlock()->getTerminator());
  emit(strategies[0]);
  builder.setInsertionPoint(choice.elseBlock()->getTerminator());
  emit(strategies[1]);
}

std::string fff::treeOpKernelName(Operation *op, Type elementType,
                                  std::optional<int64_t> inWidth,
                                  std::optional<int64_t> outWidth,
                                  int64_t trees, StringRef suffix) {
  std::string name;
  llvm::raw_string_ostream os(name);
  auto size = [&](std::optional<int64_t> width) {
    if (width)
      os << *width;
    else
      os << "dynamic";
  };
  os << op->getName().stripDialect() << "_" << elementType << "_";
  size(inWidth);
  os << "x";
  size(outWidth);
  os << "_depth" << cast<IntegerAttr>(op->getAttr("depth")).getInt();
  if (trees > 1)
    os << "_trees" << trees;
  os << "_" << suffix;
  return name;
}

std::string fff::treeKernelName(Operation *op, const TreeStrategy &strategy,
                                const TreeProblem &host) {
  return treeOpKernelName(op, host.elementType, host.staticInWidth,
                          host.staticOutWidth, host.trees,
                          TreeStrategy::variantName(strategy.variant));
}

namespace {

/// Allocates the output of `op` for `p` reading `input`.
Value allocateOutput(ImplicitLocOpBuilder &b, TreeProblem &p, Operation *op,
                     Value input) {
  p.input = asIs(b, input);
  p.rows = memref::DimOp::create(b, p.input, 0);
  p.inWidth = memref::DimOp::create(b, p.input, 1);
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

template <typename Op> struct TreeToGPUPattern : OpConversionPattern<Op> {
  TreeToGPUPattern(MLIRContext *context, const TreeKernelOptions &options)
      : OpConversionPattern<Op>(context), options(options) {}

  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    std::string whyNot;
    FailureOr<SmallVector<TreeStrategy>> strategies =
        treeStrategiesFor(op, options, /*fusedRowBytesPerToken=*/0, whyNot);
    if (failed(strategies))
      return rewriter.notifyMatchFailure(op, whyNot);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    TreeProblem problem;
    describeTreeWeights(b, op, adaptor.getOperands(), problem);
    Value output = allocateOutput(b, problem, op, adaptor.getInput());
    emitByBatchSize(rewriter, op.getLoc(), problem.rows, *strategies,
                    [&](const TreeStrategy &strategy) {
                      buildTreeKernel(rewriter, op, strategy, problem,
                                      options.cpuTwin);
                    });
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
        op, op.getType(), output, /*restrict=*/true, /*writable=*/true);
    return success();
  }

  TreeKernelOptions options;
};

} // namespace

void fff::buildTreeKernel(RewriterBase &rewriter, Operation *op,
                          const TreeStrategy &strategy, const TreeProblem &host,
                          bool cpuTwin, const TreeKernelExtension *extension) {
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  if (cpuTwin) {
    TreeProblem p = host;
    if (extension) {
      // The twin runs one token at a time, in slot 0 of host copies of the
      // shared buffers.
      SmallVector<Value> buffers;
      for (Type type : extension->sharedBuffers) {
        auto shared = cast<MemRefType>(type);
        SmallVector<int64_t> shape(shared.getShape());
        shape[0] = 1;
        buffers.push_back(memref::AllocaOp::create(
            b, MemRefType::get(shape, shared.getElementType()),
            b.getI64IntegerAttr(16)));
      }
      extension->complete(p, buffers);
    }
    Operation *twin = emitTreeTwin(b, strategy, p);
    twin->setAttr(kGPUTwinAttrName, b.getUnitAttr());
    return;
  }

  TreeProblem inKernel = host;
  SmallVector<Value *> fields{
      &inKernel.input,         &inKernel.routeWeights, &inKernel.routeBias,
      &inKernel.hiddenWeights, &inKernel.hiddenBias,   &inKernel.outWeights,
      &inKernel.outBias,       &inKernel.output,       &inKernel.rows,
      &inKernel.inWidth,       &inKernel.outWidth};
  if (extension)
    llvm::append_range(fields, extension->parameters);
  KernelParameters parameters(fields);

  KernelSpec spec;
  spec.name = extension ? extension->name : treeKernelName(op, strategy, host);
  spec.threadsPerBlock = strategy.threadsPerBlock();
  spec.maxRegisters = strategy.maxRegisters;
  spec.strategy = strategy.toAttr(rewriter.getContext());
  spec.workgroupBuffers =
      treeSharedBuffers(rewriter.getContext(), strategy, host);
  size_t treeBuffers = spec.workgroupBuffers.size();
  if (extension)
    llvm::append_range(spec.workgroupBuffers, extension->sharedBuffers);
  gpu::GPUFuncOp kernel =
      lookupKernelOfIdenticalOp(op, spec, parameters.operands());
  if (!kernel) {
    kernel = createKernel(rewriter, op, spec, parameters.operands());
    parameters.bind(kernel);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(&kernel.front());
    ImplicitLocOpBuilder kb(op->getLoc(), rewriter);
    ArrayRef<BlockArgument> shared = kernel.getWorkgroupAttributions();
    if (extension)
      extension->complete(
          inKernel, llvm::to_vector_of<Value>(shared.drop_front(treeBuffers)));
    emitTreeKernel(kb, strategy, inKernel,
                   gpu::ThreadIdOp::create(kb, gpu::Dimension::x),
                   gpu::BlockIdOp::create(kb, gpu::Dimension::x),
                   gpu::GridDimOp::create(kb, gpu::Dimension::x),
                   shared.take_front(treeBuffers));
    gpu::ReturnOp::create(kb);
  }
  Value blocks = arith::CeilDivUIOp::create(
      b, host.rows, arith::ConstantIndexOp::create(b, strategy.tokensPerBlock));
  if (strategy.residentBlocks)
    blocks = arith::MinUIOp::create(
        b, blocks, arith::ConstantIndexOp::create(b, strategy.residentBlocks));
  launchKernel(b, kernel, blocks, strategy.threadsPerBlock(),
               parameters.operands());
}

void fff::describeTreeWeights(ImplicitLocOpBuilder &b, Operation *op,
                              ValueRange operands, TreeProblem &p) {
  p.elementType = getElementTypeOrSelf(op->getOperand(0).getType());
  p.staticInWidth = staticDim(op->getOperand(0), 1);
  if (auto tree = dyn_cast<TreeFFNOp>(op)) {
    TreeFFNOp::Adaptor adaptor(operands, tree);
    p.activation = tree.getActivation();
    p.zeroGoesRight = tree.getZeroGoesRight();
    p.trees = *staticDim(tree.getWIn(), 0);
    p.nodesPerTree = tree.getNumNodes();
    p.levels = tree.getDepth() + 1;
    p.hiddenWidth = 0;
    p.routeWeights = rowsOf(b, adaptor.getWIn());
    p.routeBias = flat(b, adaptor.getBIn());
    p.outWeights = rowsOf(b, adaptor.getWOut());
    p.outBias = asIs(b, adaptor.getBOut());
    p.outWidth = tensor::DimOp::create(b, adaptor.getWOut(), 2);
    p.staticOutWidth = staticDim(tree.getWOut(), 2);
    return;
  }
  auto leaf = cast<LeafTreeFFNOp>(op);
  LeafTreeFFNOp::Adaptor adaptor(operands, leaf);
  p.activation = leaf.getActivation();
  p.trees = 1;
  p.nodesPerTree = leaf.getNumRoutingNodes();
  p.levels = leaf.getDepth();
  p.hiddenWidth = *staticDim(leaf.getW1(), 2);
  p.routeWeights = asIs(b, adaptor.getNodeW());
  p.routeBias = asIs(b, adaptor.getNodeB());
  p.hiddenWeights = rowsOf(b, adaptor.getW1());
  p.hiddenBias = asIs(b, adaptor.getB1());
  p.outWeights = rowsOf(b, adaptor.getW2());
  p.outBias = asIs(b, adaptor.getB2());
  p.outWidth = tensor::DimOp::create(b, adaptor.getW2(), 2);
  p.staticOutWidth = staticDim(leaf.getW2(), 2);
}

std::string fff::whyTreeOpHasNoGPUKernel(Operation *op) {
  std::string whyNot;
  (void)treeStrategiesFor(op, TreeKernelOptions(), /*fusedRowBytesPerToken=*/0,
                          whyNot);
  return whyNot;
}

FailureOr<TreeKernelOptions>
fff::parseTreeKernelOptions(bool cpuTwin, StringRef treeVariant, bool staging) {
  TreeKernelOptions options;
  options.cpuTwin = cpuTwin;
  options.staging = staging;
  if (treeVariant == "latency")
    options.variant = TreeStrategy::Variant::Latency;
  else if (treeVariant == "throughput")
    options.variant = TreeStrategy::Variant::Throughput;
  else if (treeVariant != "auto")
    return failure();
  return options;
}

void fff::populateTreeOpsToGPUPatterns(RewritePatternSet &patterns,
                                       const TreeKernelOptions &options) {
  patterns.add<TreeToGPUPattern<TreeFFNOp>, TreeToGPUPattern<LeafTreeFFNOp>>(
      patterns.getContext(), options);
}

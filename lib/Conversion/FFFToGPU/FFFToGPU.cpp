//===- FFFToGPU.cpp - fff norms to GPU kernels ------------------*- C++ -*-===//
//
// Lowers each normalization and fused unit to one kernel launch, the kernel
// written with the strategy `selectNormStrategy` picks, and runs the pass
// (tree layers are in TreeFFNToGPU.cpp, norm backward ops in
// NormGradsToGPU.cpp). Kernel outlining,
// NVVM conversion and PTX generation are upstream passes run by the GPU
// pipeline afterwards.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/FFFToGPU/FFFToGPU.h"

#include "LaneEmitter.h"
#include "NormGradsToGPU.h"
#include "NormKernel.h"
#include "RowView.h"
#include "SublayerToGPU.h"
#include "TreeFFNToGPU.h"
#include "TreeGradToGPU.h"
#include "UnitEvaluator.h"
#include "fff/Conversion/FFFToGPU/KernelStrategy.h"
#include "fff/Conversion/Passes.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "fff/Dialect/FFF/Transforms/Fusion.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace fff {
#define GEN_PASS_DEF_CONVERTFFFTOGPU
#include "fff/Conversion/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

//===----------------------------------------------------------------------===//
// Fused units: their tensors evaluated one vector at a time
//===----------------------------------------------------------------------===//

/// Why `unit` cannot become one GPU kernel yet, or "" if it can.
std::string unsupportedOnGPU(FusionOp unit) {
  if (unit.isBackward())
    return whyNormGradUnitIsNotOneKernel(unit);
  Operation *norm = unit.getNorm();
  auto layerNorm = dyn_cast<LayerNormOp>(norm);
  // The kernel stores the statistics per row, as the unit yields them.
  Operation *yield = unit.getBody().front().getTerminator();
  for (OpResult stat : norm->getResults().drop_front())
    if (llvm::any_of(stat.getUsers(),
                     [&](Operation *user) { return user != yield; }))
      return "work on the norm's mean or rstd";
  auto type = cast<RankedTensorType>(norm->getOperand(0).getType());
  int64_t normalizedRank = layerNorm
                               ? layerNorm.getNormalizedRank()
                               : cast<RMSNormOp>(norm).getNormalizedRank();
  if (normalizedRank == type.getRank())
    return "a norm over the whole tensor";
  ArrayRef<int64_t> paramShape = type.getShape().take_back(normalizedRank);
  Block &body = unit.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    auto argType = dyn_cast<RankedTensorType>(arg.getType());
    if (!argType || (argType.getShape() != type.getShape() &&
                     argType.getShape() != paramShape))
      return "an input that is neither a row tensor nor a per-column parameter";
    if (std::string whyNot = whyUnitEvaluatorCannotMove(argType);
        !whyNot.empty())
      return whyNot;
  }
  for (Type resultType : unit.getResultTypes())
    if (std::string whyNot = whyUnitEvaluatorCannotMove(resultType);
        !whyNot.empty())
      return whyNot;
  for (Value param : norm->getOperands().drop_front())
    if (!isa<BlockArgument>(param))
      return "a scale or bias computed inside the unit";
  return whyUnitEvaluatorCannotTakeBody(unit, {norm}, type.getRank());
}

/// Points the emitter's input and output paths at a fused unit: the norm's
/// input is computed from the unit's inputs, and every unit result but the
/// norm's statistics (stored per row by the kernel, and without a buffer
/// here) is computed from the normalized value and stored.
void bindUnit(NormProblem &p, int64_t width) {
  FusionOp unit = p.unit;
  SmallVector<Value> buffers = p.unitBuffers;
  Operation *norm = unit.getNorm();
  unsigned numInputs = unit.getInputs().size();
  Value normInput = norm->getOperand(0), normResult = norm->getResult(0);
  p.loadInput = [=](ImplicitLocOpBuilder &b, Value row, Value chunk) {
    return UnitVectorEvaluator(b, unit, buffers, width, row, chunk)
        .get(normInput);
  };
  auto yield = cast<YieldOp>(unit.getBody().front().getTerminator());
  p.storeOutputs = [=](ImplicitLocOpBuilder &b, Value row, Value chunk,
                       Value input, Value normalized) {
    UnitVectorEvaluator evaluate(b, unit, buffers, width, row, chunk);
    evaluate.seed(normInput, input);
    Type elementType = getElementTypeOrSelf(normResult.getType());
    if (!elementType.isF32())
      normalized = arith::TruncFOp::create(
          b, VectorType::get({width}, elementType), normalized);
    evaluate.seed(normResult, normalized);
    for (auto [i, value] : llvm::enumerate(yield->getOperands()))
      if (Value buffer = buffers[numInputs + i])
        evaluate.store(evaluate.get(value), buffer);
  };
}

//===----------------------------------------------------------------------===//
// Host side: views, buffers and the launch
//===----------------------------------------------------------------------===//

/// Builds the kernel `gpu.func @<op>_<strategy>` for `host` (a problem in
/// host values) and returns the host values to launch it with, in
/// `operands`. The kernel records its strategy as `fff.strategy`.
gpu::GPUFuncOp buildNormKernel(RewriterBase &rewriter, Operation *op,
                               const NormStrategy &strategy,
                               const NormProblem &host,
                               SmallVectorImpl<Value> &operands) {
  // The kernel's parameters: every buffer the problem has, then the sizes.
  NormProblem inKernel = host;
  SmallVector<Value *> fields{
      &inKernel.input, &inKernel.gamma, &inKernel.beta, &inKernel.output,
      &inKernel.mean,  &inKernel.rstd,  &inKernel.rows, &inKernel.rowSize};
  for (Value &buffer : inKernel.unitBuffers)
    fields.push_back(&buffer);
  KernelParameters parameters(fields);
  llvm::append_range(operands, parameters.operands());

  // e.g. layer_norm_bf16_768_warp_per_row: what a profiler should show.
  KernelSpec spec;
  llvm::raw_string_ostream os(spec.name);
  os << (host.unit ? "fused_" : "") << op->getName().stripDialect() << "_"
     << host.elementType << "_";
  if (host.staticRowSize)
    os << *host.staticRowSize;
  else
    os << "dynamic";
  os << "_" << NormStrategy::kindName(strategy.kind);
  spec.threadsPerBlock = strategy.threadsPerBlock();
  spec.maxRegisters = strategy.maxRegisters;
  spec.strategy = strategy.toAttr(rewriter.getContext());
  bool needsShared = strategy.threadsPerRow > kWarpSize;
  if (needsShared)
    spec.workgroupBuffers.push_back(
        workgroupBufferType({kWarpSize}, rewriter.getF32Type()));
  // A fused unit's kernel is made from the whole unit.
  Operation *source = inKernel.unit ? inKernel.unit.getOperation() : op;
  if (gpu::GPUFuncOp kernel = lookupKernelOfIdenticalOp(source, spec, operands))
    return kernel;
  gpu::GPUFuncOp kernel = createKernel(rewriter, source, spec, operands);
  parameters.bind(kernel);
  if (inKernel.unit)
    bindUnit(inKernel, strategy.vectorWidth);

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(&kernel.front());
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  Value shared =
      needsShared ? Value(kernel.getWorkgroupAttributions().front()) : Value();
  emitNormKernel(b, strategy, inKernel,
                 gpu::ThreadIdOp::create(b, gpu::Dimension::x),
                 gpu::BlockIdOp::create(b, gpu::Dimension::x), shared);
  gpu::ReturnOp::create(b);
  return kernel;
}

LogicalResult lowerNorm(Operation *op, ConversionPatternRewriter &rewriter,
                        bool cpuTwin, Value input, Value gamma, Value beta,
                        float epsilon, int64_t normalizedRank,
                        bool subtractMean, bool returnStats) {
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  RowView view(b, input, normalizedRank);
  Type elementType = view.elementType();
  NormStrategy strategy = selectNormStrategy(view.staticRowSize, elementType);

  NormProblem problem;
  problem.subtractMean = subtractMean;
  problem.epsilon = epsilon;
  problem.elementType = elementType;
  problem.input = view.matrix;
  problem.gamma = collapsedBuffer(b, gamma, view.paramGroups);
  problem.beta = collapsedBuffer(b, beta, view.paramGroups);
  problem.rows = view.rows;
  problem.rowSize = view.rowSize;
  problem.staticRowSize = view.staticRowSize;
  auto resultType = [&](unsigned i) {
    return cast<RankedTensorType>(op->getResult(i).getType());
  };
  SmallVector<Value> resultBuffers{view.allocResult(b, resultType(0))};
  problem.output = view.outputMatrix(b, resultBuffers[0]);
  if (returnStats) {
    resultBuffers.push_back(view.allocResult(b, resultType(1)));
    resultBuffers.push_back(view.allocResult(b, resultType(2)));
    problem.mean = RowView::flatBuffer(b, resultBuffers[1]);
    problem.rstd = RowView::flatBuffer(b, resultBuffers[2]);
  }

  auto results = [&] {
    SmallVector<Value> tensors;
    for (Value buffer : resultBuffers)
      tensors.push_back(RowView::toTensor(b, buffer));
    return tensors;
  };
  if (cpuTwin) {
    emitNormTwin(b, strategy, problem);
    rewriter.replaceOp(op, results());
    return success();
  }

  Value blocks = arith::CeilDivUIOp::create(
      b, view.rows, arith::ConstantIndexOp::create(b, strategy.rowsPerBlock));
  SmallVector<Value> operands;
  gpu::GPUFuncOp kernel =
      buildNormKernel(rewriter, op, strategy, problem, operands);
  launchKernel(b, kernel, blocks, strategy.threadsPerBlock(), operands);
  rewriter.replaceOp(op, results());
  return success();
}

/// One kernel for a whole fused unit: the norm's kernel with its input and
/// output paths evaluating the unit's prologue and epilogue per vector.
LogicalResult lowerFusion(FusionOp unit, ValueRange inputs,
                          ConversionPatternRewriter &rewriter, bool cpuTwin) {
  Operation *norm = unit.getNorm();
  auto normType = cast<RankedTensorType>(norm->getOperand(0).getType());
  auto layerNorm = dyn_cast<LayerNormOp>(norm);
  auto rmsNorm = dyn_cast<RMSNormOp>(norm);
  int64_t normalizedRank =
      layerNorm ? layerNorm.getNormalizedRank() : rmsNorm.getNormalizedRank();
  Block &body = unit.getBody().front();
  auto isRowTensor = [&](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape() ==
           normType.getShape();
  };
  auto anchor = llvm::find_if(body.getArguments(), isRowTensor);
  if (anchor == body.getArguments().end())
    return rewriter.notifyMatchFailure(unit, "no row tensor among the inputs");

  ImplicitLocOpBuilder b(unit.getLoc(), rewriter);
  RowView view(b, inputs[anchor->getArgNumber()], normalizedRank);
  NormProblem problem;
  problem.subtractMean = bool(layerNorm);
  problem.epsilon = (layerNorm ? layerNorm.getEpsilon() : rmsNorm.getEpsilon())
                        .convertToFloat();
  problem.elementType = normType.getElementType();
  problem.rows = view.rows;
  problem.rowSize = view.rowSize;
  problem.staticRowSize = view.staticRowSize;
  problem.unit = unit;
  // Inputs that only serve as a linalg.generic's destination are never
  // read: they get no buffer, so their host allocations fold away.
  auto onlyDestination = [](BlockArgument arg) {
    return llvm::all_of(arg.getUses(), [](OpOperand &use) {
      auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
      return generic && generic.isDpsInit(&use);
    });
  };
  for (auto [arg, input] : llvm::zip(body.getArguments(), inputs))
    problem.unitBuffers.push_back(
        onlyDestination(arg)
            ? Value()
            : collapsedBuffer(b, input,
                              isRowTensor(arg) ? view.matrixGroups
                                               : view.paramGroups));
  auto bufferOf = [&](Value param) {
    return param
               ? problem.unitBuffers[cast<BlockArgument>(param).getArgNumber()]
               : Value();
  };
  problem.gamma =
      bufferOf(layerNorm ? layerNorm.getGamma() : rmsNorm.getGamma());
  problem.beta = bufferOf(layerNorm ? layerNorm.getBeta() : Value());
  // A layer norm's mean and rstd, where the unit yields either, are the
  // kernel's per-row statistics (it stores both).
  Value statsBuffers[2];
  if (layerNorm && layerNorm.getReturnStats() &&
      !llvm::all_of(norm->getResults().drop_front(),
                    [](Value stat) { return stat.use_empty(); })) {
    for (auto [i, stat] : llvm::enumerate(norm->getResults().drop_front()))
      statsBuffers[i] =
          view.allocResult(b, cast<RankedTensorType>(stat.getType()));
    problem.mean = RowView::flatBuffer(b, statsBuffers[0]);
    problem.rstd = RowView::flatBuffer(b, statsBuffers[1]);
  }
  SmallVector<Value> resultBuffers;
  for (Value yielded : body.getTerminator()->getOperands()) {
    auto result = dyn_cast<OpResult>(yielded);
    if (result && result.getOwner() == norm && result.getResultNumber() > 0) {
      resultBuffers.push_back(statsBuffers[result.getResultNumber() - 1]);
      problem.unitBuffers.push_back(Value());
      continue;
    }
    resultBuffers.push_back(
        view.allocResult(b, cast<RankedTensorType>(yielded.getType())));
    problem.unitBuffers.push_back(view.outputMatrix(b, resultBuffers.back()));
  }

  NormStrategy strategy =
      selectNormStrategy(view.staticRowSize, problem.elementType);
  if (cpuTwin) {
    bindUnit(problem, strategy.vectorWidth);
    emitNormTwin(b, strategy, problem);
  } else {
    Value blocks = arith::CeilDivUIOp::create(
        b, view.rows, arith::ConstantIndexOp::create(b, strategy.rowsPerBlock));
    SmallVector<Value> operands;
    gpu::GPUFuncOp kernel =
        buildNormKernel(rewriter, norm, strategy, problem, operands);
    launchKernel(b, kernel, blocks, strategy.threadsPerBlock(), operands);
  }
  SmallVector<Value> results;
  for (Value buffer : resultBuffers)
    results.push_back(RowView::toTensor(b, buffer));
  rewriter.replaceOp(unit, results);
  return success();
}

/// Shared by the two norm patterns: whether to emit the CPU twin.
template <typename Op> struct NormToGPUPattern : OpConversionPattern<Op> {
  NormToGPUPattern(MLIRContext *context, bool cpuTwin)
      : OpConversionPattern<Op>(context), cpuTwin(cpuTwin) {}
  bool cpuTwin;
};

struct LayerNormToGPU : NormToGPUPattern<LayerNormOp> {
  using NormToGPUPattern::NormToGPUPattern;
  LogicalResult
  matchAndRewrite(LayerNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lowerNorm(op, rewriter, cpuTwin, adaptor.getInput(),
                     adaptor.getGamma(), adaptor.getBeta(),
                     op.getEpsilon().convertToFloat(), op.getNormalizedRank(),
                     /*subtractMean=*/true, op.getReturnStats());
  }
};

struct RMSNormToGPU : NormToGPUPattern<RMSNormOp> {
  using NormToGPUPattern::NormToGPUPattern;
  LogicalResult
  matchAndRewrite(RMSNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lowerNorm(op, rewriter, cpuTwin, adaptor.getInput(),
                     adaptor.getGamma(), Value(),
                     op.getEpsilon().convertToFloat(), op.getNormalizedRank(),
                     /*subtractMean=*/false,
                     /*returnStats=*/false);
  }
};

struct FusionToGPU : NormToGPUPattern<FusionOp> {
  using NormToGPUPattern::NormToGPUPattern;
  LogicalResult
  matchAndRewrite(FusionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // Backward units have no twin: the CPU path takes them.
    if (op.isBackward())
      return cpuTwin ? failure()
                     : lowerNormGradUnit(op, adaptor.getInputs(), rewriter);
    return lowerFusion(op, adaptor.getInputs(), rewriter, cpuTwin);
  }
};

/// The message for an fff op left without a GPU kernel.
std::string whyNoGPUKernel(Operation *op) {
  if (auto unit = dyn_cast<FusionOp>(op))
    return "has no GPU kernel yet: it contains " + unsupportedOnGPU(unit);
  if (isa<TreeFFNOp, LeafTreeFFNOp>(op))
    return "has no GPU kernel for " + whyTreeOpHasNoGPUKernel(op);
  if (isa<TreeFFNGradOp, LeafTreeFFNGradOp>(op))
    return "has no GPU kernel for " + whyTreeGradHasNoGPUKernel(op);
  return "has no GPU lowering yet";
}

/// Inlines every norm unit under `root` that cannot be one kernel, with a
/// remark that says why: its norm gets a kernel of its own (or, where the
/// norm alone has none either, the usual error), and its pointwise ops
/// become the ordinary kernels of the linalg lowering.
void separateNormUnitsWithoutKernel(Operation *root) {
  SmallVector<FusionOp> units;
  root->walk([&](FusionOp unit) {
    if (!unit.getTreeLayer())
      units.push_back(unit);
  });
  IRRewriter rewriter(root->getContext());
  for (FusionOp unit : units) {
    std::string whyNot = unsupportedOnGPU(unit);
    if (whyNot.empty())
      continue;
    unit.emitRemark("runs as separate kernels: the fused norm kernel does not "
                    "take ")
        << whyNot;
    inlineUnit(rewriter, unit, unit.getInputs());
  }
}

/// Replaces transcendental math ops (erf, tanh, exp, ...) in kernels and
/// their twins by MLIR's f32 polynomial approximations. On the GPU they
/// would otherwise become libdevice calls, which link only where the CUDA
/// toolkit is found when the pipeline runs; the twins get the same
/// arithmetic, so the numeric tests check the approximations too.
LogicalResult approximateKernelMath(ModuleOp module) {
  RewritePatternSet patterns(module.getContext());
  populateMathPolynomialApproximationPatterns(patterns,
                                              [](StringRef) { return true; });
  FrozenRewritePatternSet frozen(std::move(patterns));
  SmallVector<Operation *> scopes;
  module.walk([&](Operation *op) {
    if (isa<gpu::GPUModuleOp>(op) || op->hasAttr(kGPUTwinAttrName))
      scopes.push_back(op);
  });
  for (Operation *scope : scopes) {
    scope->removeAttr(kGPUTwinAttrName);
    if (failed(applyPatternsGreedily(scope, frozen)))
      return scope->emitError("math approximation did not converge");
  }
  return success();
}

struct ConvertFFFToGPUPass
    : fff::impl::ConvertFFFToGPUBase<ConvertFFFToGPUPass> {
  using ConvertFFFToGPUBase::ConvertFFFToGPUBase;

  void runOnOperation() override {
    FailureOr<TreeKernelOptions> options =
        parseTreeKernelOptions(cpuTwin, treeVariant, treeStaging);
    if (failed(options)) {
      getOperation().emitError("unknown tree-variant '")
          << treeVariant << "'; expected auto, latency or throughput";
      return signalPassFailure();
    }
    // Units the fused kernels cannot take run as separate kernels.
    separateSublayersWithoutKernel(getOperation(), *options);
    if (!cpuTwin)
      separateNormUnitsWithoutKernel(getOperation());

    ConversionTarget target(getContext());
    // fff ops inside a fused unit wait for the unit's own kernel.
    target.addDynamicallyLegalOp<LayerNormOp, RMSNormOp>([](Operation *op) {
      return op->getParentOfType<FusionOp>() != nullptr;
    });
    // Units the kernel emitter can evaluate become one kernel; in twin mode
    // the others (split above otherwise) stay, to run on the CPU. So do
    // tree ops whose shapes no tree kernel takes.
    target.addDynamicallyLegalOp<FusionOp>([twin = bool(cpuTwin)](FusionOp op) {
      return !op.getTreeLayer() &&
             ((twin && op.isBackward()) || !unsupportedOnGPU(op).empty());
    });
    target.addDynamicallyLegalOp<TreeFFNOp, LeafTreeFFNOp>([](Operation *op) {
      return op->getParentOfType<FusionOp>() ||
             !whyTreeOpHasNoGPUKernel(op).empty();
    });
    // Backward ops have GPU kernels and no twins; one in a unit waits for
    // the unit's kernels.
    target.addDynamicallyLegalOp<LayerNormGradOp, RMSNormGradOp>(
        [twin = bool(cpuTwin)](Operation *op) {
          return twin || op->getParentOfType<FusionOp>() != nullptr;
        });
    target.addDynamicallyLegalOp<TreeFFNGradOp, LeafTreeFFNGradOp>(
        [twin = bool(cpuTwin)](Operation *op) {
          return twin || !whyTreeGradHasNoGPUKernel(op).empty();
        });
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    (void)populateFFFToGPUPatterns(patterns, cpuTwin, treeVariant, treeStaging);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))) ||
        failed(approximateKernelMath(getOperation())))
      return signalPassFailure();
    forgetKernelSources(getOperation());
    if (cpuTwin)
      return; // what has no kernel takes the CPU path after this pass
    // Say so plainly rather than let bufferization trip over the op later.
    WalkResult unsupported = getOperation()->walk([](Operation *op) {
      if (!isa_and_present<FFFDialect>(op->getDialect()) ||
          op->getParentOfType<FusionOp>())
        return WalkResult::advance();
      op->emitOpError(whyNoGPUKernel(op)) << "; use --fff-cpu-pipeline";
      return WalkResult::interrupt();
    });
    if (unsupported.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

LogicalResult fff::populateFFFToGPUPatterns(RewritePatternSet &patterns,
                                            bool cpuTwin, StringRef treeVariant,
                                            bool treeStaging) {
  FailureOr<TreeKernelOptions> options =
      parseTreeKernelOptions(cpuTwin, treeVariant, treeStaging);
  if (failed(options))
    return failure();
  patterns.add<LayerNormToGPU, RMSNormToGPU, FusionToGPU>(patterns.getContext(),
                                                          cpuTwin);
  if (!cpuTwin) {
    populateNormGradsToGPUPatterns(patterns);
    populateTreeGradToGPUPatterns(patterns);
  }
  populateTreeOpsToGPUPatterns(patterns, *options);
  populateSublayerToGPUPatterns(patterns, *options);
  return success();
}

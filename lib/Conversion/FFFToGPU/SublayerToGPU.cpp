//===- SublayerToGPU.cpp - a norm and a tree layer in one kernel -*- C++
//-*-===//
//
// A fused unit that holds a tree layer (a transformer's FFN sublayer)
// becomes one kernel: the tree kernel (TreeKernel.cpp), a warp per token,
// whose warp also
//
//  * pre-LN, h + tree(norm(h)): normalizes the token's row first, with the
//    norm kernels' per-row code on that one warp (NormKernel.cpp), into a
//    row of shared memory that the walk reads x from; then, as it reads the
//    tree's output row back, evaluates what the unit computes from it (the
//    residual add) and stores the unit's results;
//  * post-LN, norm(h + tree(h)): walks the tree on x, writes its output row
//    to shared memory, then normalizes what the unit computes from that row
//    (the residual sum) and stores the unit's results.
//
// Rows in shared memory hold the values the unfused ops would store, in
// their element type, so that the kernel rounds exactly where they do. The
// unit's pointwise ops are evaluated a vector at a time (UnitEvaluator.h).
// A unit the kernel cannot take runs as separate kernels instead, with a
// remark that says why.
//
//===----------------------------------------------------------------------===//

#include "SublayerToGPU.h"

#include "../GPUCommon/KernelModule.h"
#include "LaneEmitter.h"
#include "NormKernel.h"
#include "TreeFFNToGPU.h"
#include "UnitEvaluator.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "fff/Dialect/FFF/Transforms/Fusion.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace fff;

namespace {

//===----------------------------------------------------------------------===//
// What a sublayer unit is, and whether the kernel takes it
//===----------------------------------------------------------------------===//

/// A sublayer unit's parts.
struct Sublayer {
  mutable FusionOp unit; // op handles' accessors are not const
  Operation *norm, *tree;
  /// Pre-LN: the tree reads the norm's result. Post-LN: the norm reads,
  /// through pointwise ops, the tree's.
  bool normFirst;
  int64_t inWidth, outWidth; // the tree's Din and Dout
  Type elementType;          // of the tree's rows

  explicit Sublayer(FusionOp unit)
      : unit(unit), norm(unit.getNorm()), tree(unit.getTreeLayer()) {
    normFirst = tree->getOperand(0).getDefiningOp() == norm;
    auto in = cast<RankedTensorType>(tree->getOperand(0).getType());
    auto out = cast<RankedTensorType>(tree->getResult(0).getType());
    inWidth = in.getDimSize(1);
    outWidth = out.getDimSize(1);
    elementType = in.getElementType();
  }

  Block &body() const { return unit.getBody().front(); }
  /// The width of the rows the norm normalizes: Din pre-LN, Dout post-LN.
  int64_t normWidth() const { return normFirst ? inWidth : outWidth; }
  /// Whether the unit's pointwise ops or its norm read `arg` (rather than
  /// only the tree, as a weight).
  bool readsRowwise(BlockArgument arg) const {
    return llvm::any_of(arg.getUses(), [&](OpOperand &use) {
      return use.getOwner() != tree || use.getOperandNumber() == 0;
    });
  }
  /// Post-LN with a tree input the unit computes: it needs its own row.
  bool computesTreeInput() const {
    return !normFirst && !isa<BlockArgument>(tree->getOperand(0));
  }
  /// Bytes of shared memory a token's rows take.
  int64_t rowBytesPerToken() const {
    int64_t bytes = elementType.getIntOrFloatBitWidth() / 8;
    int64_t rows = outWidth;
    if (normFirst || computesTreeInput())
      rows += inWidth;
    return rows * bytes;
  }
};

bool dependsOn(Value value, Operation *op) {
  SmallVector<Value> work{value};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !seen.insert(def).second)
      continue;
    if (def == op)
      return true;
    llvm::append_range(work, def->getOperands());
  }
  return false;
}

/// Why the sublayer kernel cannot take `layer`, or "" if it can.
std::string whyNoSublayerKernel(const Sublayer &layer) {
  auto layerNorm = dyn_cast<LayerNormOp>(layer.norm);
  if (layerNorm && layerNorm.getReturnStats())
    return "its norm returns mean and rstd";
  int64_t normalizedRank =
      layerNorm ? layerNorm.getNormalizedRank()
                : cast<RMSNormOp>(layer.norm).getNormalizedRank();
  if (normalizedRank != 1)
    return "its norm is over more than the last dim";
  if (ShapedType::isDynamic(layer.inWidth) ||
      ShapedType::isDynamic(layer.outWidth))
    return "its tree layer's rows have a dynamic width";
  if (getElementTypeOrSelf(layer.tree->getResult(0).getType()) !=
      layer.elementType)
    return "its tree layer's input and output differ in type";
  if (getElementTypeOrSelf(layer.norm->getOperand(0).getType()) !=
      layer.elementType)
    return "its norm's rows and its tree layer's differ in type";
  for (Value param : layer.norm->getOperands().drop_front())
    if (!isa<BlockArgument>(param))
      return "a scale or bias computed inside the unit";
  int64_t widths[] = {layer.inWidth, layer.outWidth};
  for (BlockArgument arg : layer.body().getArguments()) {
    if (!layer.readsRowwise(arg))
      continue;
    auto type = cast<RankedTensorType>(arg.getType());
    bool row =
        type.getRank() == 2 && llvm::is_contained(widths, type.getDimSize(1));
    bool param =
        type.getRank() == 1 && llvm::is_contained(widths, type.getDimSize(0));
    if (!row && !param) {
      std::string message;
      llvm::raw_string_ostream os(message);
      os << "an input that is neither a row nor a per-column parameter ("
         << type << ")";
      return message;
    }
    if (std::string whyNot = whyUnitEvaluatorCannotMove(type); !whyNot.empty())
      return whyNot;
  }
  for (Type resultType : layer.unit.getResultTypes())
    if (std::string whyNot = whyUnitEvaluatorCannotMove(resultType);
        !whyNot.empty())
      return whyNot;
  if (std::string whyNot = whyUnitEvaluatorCannotTakeBody(
          layer.unit, {layer.norm, layer.tree}, /*rank=*/2);
      !whyNot.empty())
    return whyNot;
  // Every result comes from the tree's side of the unit or the norm's.
  for (Value result : layer.body().getTerminator()->getOperands())
    if (!dependsOn(result, layer.norm) && !dependsOn(result, layer.tree) &&
        result != layer.norm->getOperand(0))
      return "a result that depends on neither its norm nor its tree layer";
  return "";
}

//===----------------------------------------------------------------------===//
// The per-token code around the tree's walk
//===----------------------------------------------------------------------===//

/// The kernel's values: every unit input's buffer ([B, width] for rows,
/// [width] for parameters, null where only the tree reads it), every unit
/// result's, and the per-slot rows in shared memory.
struct SublayerBuffers {
  SmallVector<Value> unitInputs, unitResults;
  Value inputRows, outputRows; // [slots, Din], [slots, Dout]; input may be null
  Value normGamma, normBeta;
};

class SublayerEmitter : LaneEmitter {
public:
  SublayerEmitter(ImplicitLocOpBuilder &b, const Sublayer &layer,
                  const SublayerBuffers &buffers, Value rows,
                  const TreeStrategy &strategy)
      : LaneEmitter(b, kWarpSize), layer(layer), buffers(buffers), rows(rows),
        strategy(strategy) {}

  /// Before the walk: the row the tree reads (pre-LN: the normalized one;
  /// post-LN: the one the unit computes, when it does).
  void before(Value token, Value slot, Value lane) {
    useLanes(lane);
    if (layer.normFirst) {
      normalize(token, slot, lane);
      syncWarp();
      return;
    }
    if (!layer.computesTreeInput())
      return;
    int64_t width = strategy.in.vectorWidth;
    walkLanes(layer.inWidth / width, [&](Value chunk) {
      UnitVectorEvaluator evaluate(b, layer.unit, buffers.unitInputs, width,
                                   token, chunk);
      storeRow(evaluate.get(layer.tree->getOperand(0)), buffers.inputRows, slot,
               chunk, width);
    });
    syncWarp();
  }

  /// After the walk, with the tree's output row in shared memory: pre-LN,
  /// the unit's results from it; post-LN, the norm of what the unit
  /// computes from it, and the results.
  void after(Value token, Value slot, Value lane) {
    useLanes(lane);
    syncWarp();
    if (!layer.normFirst) {
      normalize(token, slot, lane);
      return;
    }
    int64_t width = strategy.out.vectorWidth;
    walkLanes(layer.outWidth / width, [&](Value chunk) {
      UnitVectorEvaluator evaluate(b, layer.unit, buffers.unitInputs, width,
                                   token, chunk);
      evaluate.seed(layer.tree->getResult(0),
                    loadRow(buffers.outputRows, slot, chunk, width));
      storeResults(evaluate, /*dependingOnTree=*/true);
    });
  }

private:
  void useLanes(Value lane) {
    if (lane)
      useGPULanes(lane);
    else
      useTwinLanes();
  }

  /// On the GPU, makes each lane's row stores visible to the warp's other
  /// lanes, which read them next.
  void syncWarp() {
    if (onGPU())
      NVVM::SyncWarpOp::create(b, arith::ConstantIntOp::create(b, -1, 32));
  }

  /// Runs `body` for every vector index of a row of `vectors` vectors that
  /// a lane takes: lane, lane + 32, ...
  void walkLanes(int64_t vectors, function_ref<void(Value chunk)> body) {
    forEachLane([&](Value lane) {
      auto loop = scf::ForOp::create(b, lane, index(vectors), index(kWarpSize));
      inside(loop.getRegion(), [&] { body(loop.getInductionVar()); });
    });
  }

  static llvm::MaybeAlign alignment(Type element, int64_t width) {
    return llvm::MaybeAlign(
        std::min<int64_t>(16, width * element.getIntOrFloatBitWidth() / 8));
  }
  /// The first element of vector `chunk` of a row of `width`-vectors.
  Value firstElement(Value chunk, int64_t width) {
    return arith::MulIOp::create(b, chunk, index(width));
  }
  Value loadRow(Value rowBuffer, Value slot, Value chunk, int64_t width) {
    Type element = cast<MemRefType>(rowBuffer.getType()).getElementType();
    return vector::LoadOp::create(
        b, VectorType::get({width}, element), rowBuffer,
        ValueRange{slot, firstElement(chunk, width)}, /*nontemporal=*/false,
        alignment(element, width));
  }
  void storeRow(Value vector, Value rowBuffer, Value slot, Value chunk,
                int64_t width) {
    Type element = cast<MemRefType>(rowBuffer.getType()).getElementType();
    vector::StoreOp::create(b, vector, rowBuffer,
                            ValueRange{slot, firstElement(chunk, width)},
                            /*nontemporal=*/false, alignment(element, width));
  }

  /// Stores every unit result that is (or, `dependingOnTree` false, is not)
  /// computed from the tree's output, at the evaluator's vector.
  void storeResults(UnitVectorEvaluator &evaluate, bool dependingOnTree) {
    auto yield = layer.body().getTerminator();
    for (auto [value, buffer] :
         llvm::zip(yield->getOperands(), buffers.unitResults))
      if (dependsOn(value, layer.tree) == dependingOnTree)
        evaluate.store(evaluate.get(value), buffer);
  }

  /// The token's norm, on this warp, over what the unit computes as the
  /// norm's input (post-LN: from the tree's output row). Pre-LN, the result
  /// goes to the tree's input row; every unit result computed from it (and
  /// not from the tree) is stored. Post-LN, every unit result is.
  void normalize(Value token, Value slot, Value lane) {
    int64_t width = layer.normWidth();
    NormStrategy normStrategy =
        selectWarpNormStrategy(width, layer.elementType);
    int64_t vectorWidth = normStrategy.vectorWidth;
    auto layerNorm = dyn_cast<LayerNormOp>(layer.norm);
    NormProblem p;
    p.subtractMean = bool(layerNorm);
    p.epsilon = (layerNorm ? layerNorm.getEpsilon()
                           : cast<RMSNormOp>(layer.norm).getEpsilon())
                    .convertToFloat();
    p.gamma = buffers.normGamma;
    p.beta = buffers.normBeta;
    p.rows = rows;
    p.rowSize = index(width);
    p.staticRowSize = width;
    p.elementType = layer.elementType;
    Value normInput = layer.norm->getOperand(0);
    Value normResult = layer.norm->getResult(0);
    auto evaluatorAt = [&](ImplicitLocOpBuilder &eb, Value chunk) {
      UnitVectorEvaluator evaluate(eb, layer.unit, buffers.unitInputs,
                                   vectorWidth, token, chunk);
      if (!layer.normFirst)
        evaluate.seed(layer.tree->getResult(0),
                      loadRow(buffers.outputRows, slot, chunk, vectorWidth));
      return evaluate;
    };
    p.loadInput = [&](ImplicitLocOpBuilder &eb, Value, Value chunk) {
      return evaluatorAt(eb, chunk).get(normInput);
    };
    p.storeOutputs = [&](ImplicitLocOpBuilder &eb, Value, Value chunk,
                         Value input, Value normalized) {
      UnitVectorEvaluator evaluate = evaluatorAt(eb, chunk);
      evaluate.seed(normInput, input);
      Value result = normalized;
      if (!layer.elementType.isF32())
        result = arith::TruncFOp::create(
            eb, VectorType::get({vectorWidth}, layer.elementType), result);
      evaluate.seed(normResult, result);
      if (layer.normFirst)
        storeRow(result, buffers.inputRows, slot, chunk, vectorWidth);
      storeResults(evaluate, /*dependingOnTree=*/!layer.normFirst);
    };
    emitNormRow(b, normStrategy, p, token, lane);
  }

  const Sublayer &layer;
  const SublayerBuffers &buffers;
  Value rows;
  const TreeStrategy &strategy;
};

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

/// A [rows, width] row tensor or a [width] parameter as a buffer.
Value bufferOf(ImplicitLocOpBuilder &b, Value tensor) {
  auto rank = cast<RankedTensorType>(tensor.getType()).getRank();
  SmallVector<ReassociationIndices> identity;
  for (int64_t d = 0; d < rank; ++d)
    identity.push_back({d});
  return collapsedBuffer(b, tensor, identity);
}

/// The per-slot row buffers of a kernel with `strategy`.
SmallVector<Type> rowBufferTypes(const Sublayer &layer,
                                 const TreeStrategy &strategy) {
  SmallVector<Type> types;
  if (layer.normFirst || layer.computesTreeInput())
    types.push_back(workgroupBufferType(
        {strategy.tokensPerBlock, layer.inWidth}, layer.elementType));
  types.push_back(workgroupBufferType({strategy.tokensPerBlock, layer.outWidth},
                                      layer.elementType));
  return types;
}

/// Builds one kernel (or twin) for `layer` with `strategy`, given the
/// host's buffers: the tree kernel, extended with the unit's buffers, the
/// per-slot rows and the code around each token's walk.
void buildSublayerKernel(RewriterBase &rewriter, const Sublayer &layer,
                         const TreeStrategy &strategy, const TreeProblem &host,
                         const SublayerBuffers &hostBuffers, bool cpuTwin) {
  // Rebound to the kernel's arguments by buildTreeKernel.
  SublayerBuffers buffers = hostBuffers;
  TreeKernelExtension extension;
  // The ops in the order they run: fused_layer_norm_tree_ffn_... pre-LN,
  // fused_tree_ffn_layer_norm_... post-LN.
  std::string treeName = treeKernelName(layer.tree, strategy, host);
  StringRef treeOp = layer.tree->getName().stripDialect();
  StringRef normOp = layer.norm->getName().stripDialect();
  extension.name = layer.normFirst
                       ? ("fused_" + normOp + "_" + treeName).str()
                       : ("fused_" + treeOp + "_" + normOp +
                          StringRef(treeName).drop_front(treeOp.size()))
                             .str();
  extension.sharedBuffers = rowBufferTypes(layer, strategy);
  for (Value &buffer : buffers.unitInputs)
    extension.parameters.push_back(&buffer);
  for (Value &buffer : buffers.unitResults)
    extension.parameters.push_back(&buffer);

  // The norm's parameters are unit inputs, among the unit's buffers.
  auto unitBuffer = [&](Value param) {
    return param ? buffers.unitInputs[cast<BlockArgument>(param).getArgNumber()]
                 : Value();
  };
  auto layerNorm = dyn_cast<LayerNormOp>(layer.norm);
  Value gamma =
      layerNorm ? layerNorm.getGamma() : cast<RMSNormOp>(layer.norm).getGamma();
  Value beta = layerNorm ? layerNorm.getBeta() : Value();
  extension.complete = [&](TreeProblem &p, ArrayRef<Value> rowBuffers) {
    buffers.normGamma = unitBuffer(gamma);
    buffers.normBeta = unitBuffer(beta);
    if (rowBuffers.size() == 2) {
      buffers.inputRows = rowBuffers[0];
      p.input = rowBuffers[0];
      p.inputInSlots = true;
    }
    buffers.outputRows = rowBuffers.back();
    p.output = rowBuffers.back();
    p.outputInSlots = true;
    Value rows = p.rows;
    auto hook = [&, rows](bool beforeWalk) {
      return [&, rows, beforeWalk](ImplicitLocOpBuilder &b, Value token,
                                   Value slot, Value lane) {
        SublayerEmitter emitter(b, layer, buffers, rows, strategy);
        if (beforeWalk)
          emitter.before(token, slot, lane);
        else
          emitter.after(token, slot, lane);
      };
    };
    p.hooks.before = hook(true);
    p.hooks.after = hook(false);
  };
  buildTreeKernel(rewriter, layer.unit, strategy, host, cpuTwin, &extension);
}

struct SublayerToGPU : OpConversionPattern<FusionOp> {
  SublayerToGPU(MLIRContext *context, const TreeKernelOptions &options)
      : OpConversionPattern<FusionOp>(context, /*benefit=*/2),
        options(options) {}

  LogicalResult
  matchAndRewrite(FusionOp unit, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!unit.getTreeLayer())
      return failure();
    Sublayer layer(unit);
    std::string whyNot = whySublayerCannotBeOneKernel(unit, options);
    if (!whyNot.empty())
      return rewriter.notifyMatchFailure(unit, whyNot);
    std::string ignored;
    SmallVector<TreeStrategy> strategies = *treeStrategiesFor(
        layer.tree, options, layer.rowBytesPerToken(), ignored);

    ImplicitLocOpBuilder b(unit.getLoc(), rewriter);
    // The tree's weights, from the unit's inputs.
    SmallVector<Value> treeOperands;
    for (Value operand : layer.tree->getOperands())
      treeOperands.push_back(
          isa<BlockArgument>(operand) &&
                  cast<BlockArgument>(operand).getOwner() == &layer.body()
              ? adaptor.getInputs()[cast<BlockArgument>(operand).getArgNumber()]
              : Value());
    TreeProblem host;
    describeTreeWeights(b, layer.tree, treeOperands, host);

    SublayerBuffers buffers;
    Value anchor; // a row input, for the row count
    for (auto [arg, input] :
         llvm::zip(layer.body().getArguments(), adaptor.getInputs())) {
      // Post-LN, the tree reads x straight from its input buffer.
      bool treeInput = !layer.normFirst && layer.tree->getOperand(0) == arg;
      Value buffer = layer.readsRowwise(arg) ? bufferOf(b, input) : Value();
      buffers.unitInputs.push_back(buffer);
      if (buffer && cast<MemRefType>(buffer.getType()).getRank() == 2 &&
          !anchor)
        anchor = buffer;
      if (treeInput)
        host.input = buffer;
    }
    if (!anchor)
      return rewriter.notifyMatchFailure(unit, "no row among the inputs");
    host.rows = memref::DimOp::create(b, anchor, 0);
    host.inWidth = arith::ConstantIndexOp::create(b, layer.inWidth);
    SmallVector<Value> results;
    for (Type type : unit.getResultTypes()) {
      auto tensorType = cast<RankedTensorType>(type);
      SmallVector<Value> dynamicSizes;
      if (tensorType.isDynamicDim(0))
        dynamicSizes.push_back(host.rows);
      Value buffer = memref::AllocOp::create(
          b,
          MemRefType::get(tensorType.getShape(), tensorType.getElementType()),
          dynamicSizes);
      buffers.unitResults.push_back(buffer);
      results.push_back(bufferization::ToTensorOp::create(
          b, tensorType, buffer, /*restrict=*/true, /*writable=*/true));
    }
    emitByBatchSize(rewriter, unit.getLoc(), host.rows, strategies,
                    [&](const TreeStrategy &strategy) {
                      buildSublayerKernel(rewriter, layer, strategy, host,
                                          buffers, options.cpuTwin);
                    });
    rewriter.replaceOp(unit, results);
    return success();
  }

  TreeKernelOptions options;
};

} // namespace

std::string
fff::whySublayerCannotBeOneKernel(FusionOp unit,
                                  const TreeKernelOptions &options) {
  Sublayer layer(unit);
  std::string whyNot = whyNoSublayerKernel(layer);
  if (!whyNot.empty())
    return whyNot;
  (void)treeStrategiesFor(layer.tree, options, layer.rowBytesPerToken(),
                          whyNot);
  return whyNot;
}

void fff::populateSublayerToGPUPatterns(RewritePatternSet &patterns,
                                        const TreeKernelOptions &options) {
  patterns.add<SublayerToGPU>(patterns.getContext(), options);
}

void fff::separateSublayersWithoutKernel(Operation *root,
                                         const TreeKernelOptions &options) {
  SmallVector<FusionOp> units;
  root->walk([&](FusionOp unit) {
    if (unit.getTreeLayer())
      units.push_back(unit);
  });
  IRRewriter rewriter(root->getContext());
  for (FusionOp unit : units) {
    std::string whyNot = whySublayerCannotBeOneKernel(unit, options);
    if (whyNot.empty())
      continue;
    unit.emitRemark("runs as separate kernels: the fused sublayer kernel "
                    "does not take ")
        << whyNot;
    Operation *norm = unit.getNorm();
    inlineUnit(rewriter, unit, unit.getInputs());
    (void)fuseNormWithNeighbours(norm);
  }
}

//===- TreeFFNToGPU.cpp - fff tree layers to GPU kernels --------*- C++ -*-===//
//
// Lowers each fff.tree_ffn and fff.leaf_tree_ffn to one kernel in which a
// warp walks a token (see TreeStrategy in KernelStrategy.h):
//
//  1. Route. For each level, the lanes split the dot product of x with the
//     node's weight row (128-bit loads, a warp reads each row contiguously),
//     and a shuffle butterfly gives every lane the same logit, so the whole
//     warp takes the same branch. Each visited row is recorded with its
//     coefficient, act(logit) for tree_ffn. leaf_tree_ffn then computes its
//     leaf's hidden layer, recording one row of w2 per hidden unit with
//     coefficient act(hidden).
//  2. Output. The lanes split y: each lane sums, for its vectors of y, every
//     recorded row times its coefficient, in f32 registers, and stores each
//     vector once.
//
// The records live in shared memory, one slice per warp, so y never has to
// stay in registers across the walk and any output width fits.
//
//===----------------------------------------------------------------------===//

#include "TreeFFNToGPU.h"

#include "LaneEmitter.h"
#include "fff/Conversion/FFFToGPU/KernelStrategy.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "fff/Dialect/FFF/Utils/Activation.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace fff;

namespace {

/// One tree kernel's buffers, with every weight tensor viewed as a matrix of
/// rows a warp reads whole.
struct TreeProblem {
  bool leafMLP;        // leaf_tree_ffn
  Activation activation;
  int64_t trees;       // K; 1 for leaf_tree_ffn
  int64_t nodesPerTree;
  int64_t levels;      // routing levels: depth + 1 (tree_ffn), depth (leaf)
  int64_t hiddenWidth; // leaf_tree_ffn's W
  Type elementType;

  Value input;        // [B, Din]
  Value routeWeights; // [K * N, Din]: w_in or node_w
  Value routeBias;    // [K * N]: b_in (optional) or node_b
  Value hiddenWeights, hiddenBias; // leaf: w1 as [leaves * Din, W], b1 [leaves, W]
  Value outWeights;   // [K * N, Dout] (w_out) or [leaves * W, Dout] (w2)
  Value outBias;      // b_out [Dout] (optional) or b2 [leaves, Dout]
  Value output;       // [B, Dout]
  Value rows, inWidth, outWidth;

  std::optional<int64_t> staticInWidth, staticOutWidth;
};

class TreeKernelEmitter : LaneEmitter {
public:
  TreeKernelEmitter(ImplicitLocOpBuilder &b, const TreeStrategy &strategy,
                    const TreeProblem &problem)
      : LaneEmitter(b, kWarpSize), s(strategy), p(problem) {}

  /// The kernel body; `coefficients` (f32) and `visited` (i32) are the
  /// block's [tokens per block, entries] records in shared memory.
  void emitGPU(Value threadId, Value blockId, Value coefficients,
               Value visited) {
    Value warpSize = index(kWarpSize);
    useGPULanes(arith::RemUIOp::create(b, threadId, warpSize));
    Value warp = arith::DivUIOp::create(b, threadId, warpSize);
    token = arith::AddIOp::create(
        b, arith::MulIOp::create(b, blockId, index(s.tokensPerBlock)), warp);
    records = {coefficients, visited};
    recordPrefix = {warp};
    prepare();
    // Whole warps skip a token past the end, so no shuffle loses its lanes.
    Value inRange =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, token, p.rows);
    inside(scf::IfOp::create(b, inRange).getThenRegion(), [&] { emitToken(); });
  }

  /// The CPU twin: every token in turn. Returns the loop.
  Operation *emitCPUTwin() {
    useTwinLanes();
    records = {
        memref::AllocaOp::create(
            b, MemRefType::get({s.entriesPerToken}, b.getF32Type())),
        memref::AllocaOp::create(
            b, MemRefType::get({s.entriesPerToken}, b.getI32Type()))};
    prepare();
    auto tokens = scf::ForOp::create(b, index(0), p.rows, index(1));
    inside(tokens.getRegion(), [&] {
      token = tokens.getInductionVar();
      emitToken();
    });
    return tokens;
  }

private:
  void prepare() {
    inVectors = arith::DivUIOp::create(b, p.inWidth, index(s.in.vectorWidth));
    outVectors = arith::DivUIOp::create(b, p.outWidth, index(s.out.vectorWidth));
  }

  //===--- Loads --------------------------------------------------------===//

  /// `width` elements of `buffer` at [row, column] (or [column] when `row` is
  /// null), widened to f32. Rows are whole multiples of the vector width, so
  /// a vector is aligned to its size, up to 16 bytes.
  Value loadVector(Value buffer, Value row, Value column, int64_t width) {
    Type elementType = cast<MemRefType>(buffer.getType()).getElementType();
    SmallVector<Value> indices;
    if (row)
      indices.push_back(row);
    indices.push_back(column);
    return widen(vector::LoadOp::create(
        b, VectorType::get({width}, elementType), buffer, indices,
        /*nontemporal=*/false, vectorAlignment(elementType, width)));
  }
  static llvm::MaybeAlign vectorAlignment(Type elementType, int64_t width) {
    uint64_t bytes = width * elementType.getIntOrFloatBitWidth() / 8;
    return llvm::MaybeAlign(
        std::min<uint64_t>(16, uint64_t(1) << llvm::countr_zero(bytes)));
  }
  Value column(Value chunk, int64_t vectorWidth) {
    return arith::MulIOp::create(b, chunk, index(vectorWidth));
  }
  Value inputVector(Value chunk) {
    return loadVector(p.input, token, column(chunk, s.in.vectorWidth),
                      s.in.vectorWidth);
  }
  Value zeros(int64_t width) {
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(VectorType::get({width}, b.getF32Type()),
                                  b.getF32FloatAttr(0.0)));
  }
  Value fma(Value x, Value y, Value acc) {
    return vector::FMAOp::create(b, x, y, acc);
  }

  //===--- Routing ------------------------------------------------------===//

  /// One of a lane's vectors of a row, with `inRow` (null when statically
  /// true) masking a vector past the row's end; such a vector is clamped to
  /// the row's last one, which is always safe to load.
  struct LaneVector {
    Value chunk, inRow;
  };

  /// Runs `step` over a lane's vectors of a row of `vectors` vectors
  /// (`staticVectors` when known), as `walk` says: straight-line for one
  /// step, else a loop over the steps that threads `inits` through.
  SmallVector<Value>
  walkRow(Value lane, const TreeStrategy::LaneWalk &walk, Value vectors,
          std::optional<int64_t> staticVectors, ValueRange inits,
          function_ref<SmallVector<Value>(ArrayRef<LaneVector>, ValueRange)> step) {
    auto vectorsFrom = [&](Value first, std::optional<int64_t> staticFirst) {
      SmallVector<LaneVector> result;
      for (int64_t i = 0; i < walk.vectorsPerStep; ++i) {
        Value chunk = arith::AddIOp::create(
            b, lane,
            arith::MulIOp::create(b, arith::AddIOp::create(b, first, index(i)),
                                  index(kWarpSize)));
        bool inside = !walk.ragged ||
                      (staticFirst && staticVectors &&
                       (*staticFirst + i + 1) * kWarpSize <= *staticVectors);
        if (inside) {
          result.push_back({chunk, Value()});
          continue;
        }
        Value inRow = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                            chunk, vectors);
        Value last = arith::SubIOp::create(b, vectors, index(1));
        result.push_back({arith::MinUIOp::create(b, chunk, last), inRow});
      }
      return result;
    };
    if (walk.steps == 1)
      return step(vectorsFrom(index(0), 0), inits);
    Value steps = walk.steps
                      ? index(*walk.steps)
                      : arith::CeilDivUIOp::create(
                            b, vectors, index(kWarpSize * walk.vectorsPerStep));
    auto loop = scf::ForOp::create(b, index(0), steps, index(1), inits);
    inside(loop.getRegion(), [&] {
      Value first = arith::MulIOp::create(b, loop.getInductionVar(),
                                          index(walk.vectorsPerStep));
      SmallVector<Value> next =
          step(vectorsFrom(first, std::nullopt), loop.getRegionIterArgs());
      // Without iteration values the loop already ends in its yield.
      if (!inits.empty())
        scf::YieldOp::create(b, next);
    });
    return llvm::to_vector_of<Value>(loop.getResults());
  }

  /// A lane's part of dot(x[token], weights[row]).
  Value dotPartial(Value lane, Value weights, Value row) {
    int64_t width = s.in.vectorWidth;
    Value acc = walkRow(
        lane, s.in, inVectors, staticVectors(p.staticInWidth, width),
        zeros(width), [&](ArrayRef<LaneVector> vectors, ValueRange accs) {
          Value acc = accs[0];
          for (auto [i, v] : llvm::enumerate(vectors)) {
            Value x = gpuInput.empty() ? inputVector(v.chunk) : gpuInput[i];
            Value next = fma(
                x, loadVector(weights, row, column(v.chunk, width), width), acc);
            acc = v.inRow ? arith::SelectOp::create(b, v.inRow, next, acc) : next;
          }
          return SmallVector<Value>{acc};
        })[0];
    return sum(acc);
  }

  static std::optional<int64_t> staticVectors(std::optional<int64_t> width,
                                              int64_t vectorWidth) {
    return width ? std::optional(*width / vectorWidth) : std::nullopt;
  }

  /// dot(x[token], routeWeights[row]) + routeBias[row], in every lane.
  Value routeLogit(Value row) {
    Value logit = groupSum(
        [&](Value lane) { return dotPartial(lane, p.routeWeights, row); });
    if (p.routeBias)
      logit = add(logit, widen(memref::LoadOp::create(b, p.routeBias, row)));
    return logit;
  }

  /// 2 * node + 1 + (goRight ? 1 : 0).
  Value child(Value node, Value goRight) {
    Value right = arith::IndexCastOp::create(
        b, b.getIndexType(), arith::ExtUIOp::create(b, b.getI64Type(), goRight));
    return arith::AddIOp::create(
        b, arith::AddIOp::create(b, arith::MulIOp::create(b, node, index(2)),
                                 index(1)),
        right);
  }

  /// Records output row `row` with `coefficient` as entry `entry`. On the
  /// GPU every lane holds the same values and writes them; each lane later
  /// reads back a value it wrote itself, so no warp barrier is needed.
  void record(Value entry, Value row, Value coefficient) {
    SmallVector<Value> indices = recordPrefix;
    indices.push_back(entry);
    memref::StoreOp::create(b, coefficient, records[0], indices);
    memref::StoreOp::create(
        b, arith::IndexCastOp::create(b, b.getI32Type(), row), records[1],
        indices);
  }

  /// tree_ffn: every tree's walk, each visited neuron recorded with act(l).
  void routeTrees() {
    auto trees = scf::ForOp::create(b, index(0), index(p.trees), index(1));
    inside(trees.getRegion(), [&] {
      Value tree = trees.getInductionVar();
      Value treeBase = arith::MulIOp::create(b, tree, index(p.nodesPerTree));
      Value firstEntry = arith::MulIOp::create(b, tree, index(p.levels));
      auto levels = scf::ForOp::create(b, index(0), index(p.levels), index(1),
                                       ValueRange{index(0)});
      inside(levels.getRegion(), [&] {
        Value node = levels.getRegionIterArg(0);
        Value row = arith::AddIOp::create(b, treeBase, node);
        Value logit = routeLogit(row);
        record(arith::AddIOp::create(b, firstEntry, levels.getInductionVar()),
               row, buildActivation(b, b.getLoc(), p.activation, logit));
        // Exactly zero goes left.
        Value goRight = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                              logit, f32(0.0));
        scf::YieldOp::create(b, child(node, goRight));
      });
    });
  }

  /// leaf_tree_ffn: the routing walk, then the leaf's hidden layer, each
  /// hidden unit recorded with act(hidden) against its row of w2.
  void routeToLeafAndHidden() {
    auto levels = scf::ForOp::create(b, index(0), index(p.levels), index(1),
                                     ValueRange{index(0)});
    inside(levels.getRegion(), [&] {
      Value node = levels.getRegionIterArg(0);
      // Zero goes right here (s >= 0), as in the original FFF code.
      Value goRight = arith::CmpFOp::create(b, arith::CmpFPredicate::OGE,
                                            routeLogit(node), f32(0.0));
      scf::YieldOp::create(b, child(node, goRight));
    });
    leaf = arith::SubIOp::create(b, levels.getResult(0), index(p.nodesPerTree));

    Value gpuHidden = onGPU() ? hiddenPartials(gpuLane) : Value();
    Value firstRow = arith::MulIOp::create(b, leaf, index(p.hiddenWidth));
    for (int64_t unit = 0; unit < p.hiddenWidth; ++unit) {
      Value hidden = groupSum([&](Value lane) {
        Value partials = gpuHidden ? gpuHidden : hiddenPartials(lane);
        return vector::ExtractOp::create(b, partials, ArrayRef<int64_t>{unit});
      });
      hidden = add(hidden, widen(memref::LoadOp::create(
                               b, p.hiddenBias, ValueRange{leaf, index(unit)})));
      record(index(unit), arith::AddIOp::create(b, firstRow, index(unit)),
             buildActivation(b, b.getLoc(), p.activation, hidden));
    }
  }

  /// A lane's part of x[token] @ w1[leaf]: the lane takes input elements
  /// lane, lane + 32, ... and adds x[d] times row d of w1[leaf] (W
  /// contiguous values; a warp reads 32 consecutive rows).
  Value hiddenPartials(Value lane) {
    Value firstRow = arith::MulIOp::create(b, leaf, p.inWidth);
    auto loop = scf::ForOp::create(b, lane, p.inWidth, index(kWarpSize),
                                   ValueRange{zeros(p.hiddenWidth)});
    inside(loop.getRegion(), [&] {
      Value d = loop.getInductionVar();
      Value x = widen(memref::LoadOp::create(b, p.input, ValueRange{token, d}));
      Value row = loadVector(p.hiddenWeights, arith::AddIOp::create(b, firstRow, d),
                             index(0), p.hiddenWidth);
      Value xs = vector::BroadcastOp::create(
          b, VectorType::get({p.hiddenWidth}, b.getF32Type()), x);
      scf::YieldOp::create(b, fma(xs, row, loop.getRegionIterArg(0)));
    });
    return loop.getResult(0);
  }

  //===--- Output -------------------------------------------------------===//

  /// Recorded entry `entry`: its coefficient and output row.
  std::pair<Value, Value> loadRecord(Value entry) {
    SmallVector<Value> indices = recordPrefix;
    indices.push_back(entry);
    Value coefficient = memref::LoadOp::create(b, records[0], indices);
    Value row = arith::IndexCastOp::create(
        b, b.getIndexType(), memref::LoadOp::create(b, records[1], indices));
    return {coefficient, row};
  }

  /// y[token] at `vectors`: the bias plus every recorded row times its
  /// coefficient, summed in f32 registers, each vector stored once. All the
  /// vectors' loads of an entry are independent, and so are the entries'
  /// when unrolled, which is what keeps a lone token's output from waiting
  /// on one load at a time.
  void storeOutputVectors(ArrayRef<LaneVector> vectors) {
    int64_t width = s.out.vectorWidth;
    auto f32Vector = VectorType::get({width}, b.getF32Type());
    SmallVector<Value> columns, accs;
    for (LaneVector v : vectors) {
      columns.push_back(column(v.chunk, width));
      accs.push_back(p.outBias ? loadVector(p.outBias, leaf, columns.back(), width)
                               : zeros(width));
    }
    auto accumulate = [&](Value entry, ValueRange in) {
      auto [coefficient, row] = loadRecord(entry);
      Value coefficients = vector::BroadcastOp::create(b, f32Vector, coefficient);
      SmallVector<Value> out;
      for (auto [col, acc] : llvm::zip(columns, in))
        out.push_back(fma(coefficients, loadVector(p.outWeights, row, col, width),
                          acc));
      return out;
    };
    if (s.unrollEntries) {
      for (int64_t e = 0; e < s.entriesPerToken; ++e)
        accs = accumulate(index(e), accs);
    } else {
      auto entries = scf::ForOp::create(b, index(0), index(s.entriesPerToken),
                                        index(1), accs);
      inside(entries.getRegion(), [&] {
        scf::YieldOp::create(b, accumulate(entries.getInductionVar(),
                                           entries.getRegionIterArgs()));
      });
      accs = llvm::to_vector_of<Value>(entries.getResults());
    }
    for (auto [v, col, acc] : llvm::zip(vectors, columns, accs)) {
      Value y = acc;
      if (!p.elementType.isF32())
        y = arith::TruncFOp::create(b, VectorType::get({width}, p.elementType), y);
      auto store = [&] {
        vector::StoreOp::create(b, y, p.output, ValueRange{token, col},
                                /*nontemporal=*/false,
                                vectorAlignment(p.elementType, width));
      };
      if (v.inRow)
        inside(scf::IfOp::create(b, v.inRow).getThenRegion(), store);
      else
        store();
    }
  }

  void emitOutput() {
    forEachLane([&](Value lane) {
      walkRow(lane, s.out, outVectors,
              staticVectors(p.staticOutWidth, s.out.vectorWidth), {},
              [&](ArrayRef<LaneVector> vectors, ValueRange) {
                storeOutputVectors(vectors);
                return SmallVector<Value>{};
              });
    });
  }

  //===--- The token ----------------------------------------------------===//

  void emitToken() {
    gpuInput.clear();
    if (onGPU() && s.inputInRegisters)
      walkRow(gpuLane, s.in, inVectors,
              staticVectors(p.staticInWidth, s.in.vectorWidth), {},
              [&](ArrayRef<LaneVector> vectors, ValueRange) {
                for (LaneVector v : vectors)
                  gpuInput.push_back(inputVector(v.chunk));
                return SmallVector<Value>{};
              });
    if (p.leafMLP)
      routeToLeafAndHidden();
    else
      routeTrees();
    emitOutput();
  }

  const TreeStrategy &s;
  const TreeProblem &p;
  Value token, inVectors, outVectors;
  /// leaf_tree_ffn's leaf, once routed (null for tree_ffn).
  Value leaf;
  /// This token's records (coefficients, rows) and the indices before the
  /// entry index: the warp on the GPU, none in the twin.
  std::array<Value, 2> records;
  SmallVector<Value> recordPrefix;
  /// The lane's x vectors, when the strategy keeps them in registers.
  SmallVector<Value> gpuInput;
};

} // namespace

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

namespace {

std::optional<int64_t> staticDim(Value tensor, int64_t dim) {
  int64_t size = cast<RankedTensorType>(tensor.getType()).getDimSize(dim);
  return ShapedType::isDynamic(size) ? std::nullopt : std::optional(size);
}

/// The strategy for `op`, or failure with the reason in `whyNot`.
FailureOr<TreeStrategy> strategyFor(Operation *op, std::string &whyNot) {
  if (auto tree = dyn_cast<TreeFFNOp>(op)) {
    std::optional<int64_t> trees = staticDim(tree.getWIn(), 0);
    if (!trees) {
      whyNot = "a dynamic number of trees";
      return failure();
    }
    return selectTreeStrategy(staticDim(tree.getInput(), 1),
                              staticDim(tree.getWOut(), 2),
                              getElementTypeOrSelf(tree.getInput().getType()),
                              *trees * (tree.getDepth() + 1),
                              /*hiddenWidth=*/0, whyNot);
  }
  auto leaf = cast<LeafTreeFFNOp>(op);
  std::optional<int64_t> width = staticDim(leaf.getW1(), 2);
  if (!width) {
    whyNot = "a dynamic leaf width";
    return failure();
  }
  return selectTreeStrategy(staticDim(leaf.getInput(), 1),
                            staticDim(leaf.getW2(), 2),
                            getElementTypeOrSelf(leaf.getInput().getType()),
                            *width, *width, whyNot);
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

/// Builds the kernel for `host` and launches it, or emits the twin.
void emitTreeKernel(ConversionPatternRewriter &rewriter, Operation *op,
                    const TreeStrategy &strategy, const TreeProblem &host,
                    bool cpuTwin) {
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  if (cpuTwin) {
    Operation *twin = TreeKernelEmitter(b, strategy, host).emitCPUTwin();
    twin->setAttr(kGPUTwinAttrName, b.getUnitAttr());
    return;
  }

  TreeProblem inKernel = host;
  SmallVector<Value *> fields{
      &inKernel.input,      &inKernel.routeWeights, &inKernel.routeBias,
      &inKernel.hiddenWeights, &inKernel.hiddenBias, &inKernel.outWeights,
      &inKernel.outBias,    &inKernel.output,       &inKernel.rows,
      &inKernel.inWidth,    &inKernel.outWidth};
  SmallVector<Value *> present;
  SmallVector<Value> operands;
  for (Value *field : fields)
    if (*field) {
      present.push_back(field);
      operands.push_back(*field);
    }

  // e.g. tree_ffn_bf16_768x768_depth11_warp_per_token.
  KernelSpec spec;
  llvm::raw_string_ostream os(spec.name);
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
  os << "_warp_per_token";
  spec.threadsPerBlock = strategy.threadsPerBlock();
  spec.maxRegisters = strategy.maxRegisters;
  spec.strategy = strategy.toAttr(rewriter.getContext());
  SmallVector<int64_t> recordShape{strategy.tokensPerBlock,
                                   strategy.entriesPerToken};
  spec.workgroupBuffers = {workgroupBufferType(recordShape, b.getF32Type()),
                           workgroupBufferType(recordShape, b.getI32Type())};
  gpu::GPUFuncOp kernel = createKernel(rewriter, op, spec, operands);
  for (auto [field, arg] : llvm::zip(present, kernel.getArguments()))
    *field = arg;
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(&kernel.front());
    ImplicitLocOpBuilder kb(op->getLoc(), rewriter);
    ArrayRef<BlockArgument> shared = kernel.getWorkgroupAttributions();
    TreeKernelEmitter(kb, strategy, inKernel)
        .emitGPU(gpu::ThreadIdOp::create(kb, gpu::Dimension::x),
                 gpu::BlockIdOp::create(kb, gpu::Dimension::x), shared[0],
                 shared[1]);
    gpu::ReturnOp::create(kb);
  }
  Value blocks = arith::CeilDivUIOp::create(
      b, host.rows, arith::ConstantIndexOp::create(b, strategy.tokensPerBlock));
  launchKernel(b, kernel, blocks, strategy.threadsPerBlock(), operands);
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
               TreeFFNOp::Adaptor adaptor,
               TreeProblem &p) {
  p.leafMLP = false;
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
  p.leafMLP = true;
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

template <typename Op>
struct TreeToGPUPattern : OpConversionPattern<Op> {
  TreeToGPUPattern(MLIRContext *context, bool cpuTwin)
      : OpConversionPattern<Op>(context), cpuTwin(cpuTwin) {}

  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    std::string whyNot;
    FailureOr<TreeStrategy> strategy = strategyFor(op, whyNot);
    if (failed(strategy))
      return rewriter.notifyMatchFailure(op, whyNot);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    TreeProblem problem;
    Value output = describe(b, op, adaptor, problem);
    emitTreeKernel(rewriter, op, *strategy, problem, cpuTwin);
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
        op, op.getType(), output, /*restrict=*/true, /*writable=*/true);
    return success();
  }

  bool cpuTwin;
};

} // namespace

std::string fff::whyTreeOpHasNoGPUKernel(Operation *op) {
  std::string whyNot;
  (void)strategyFor(op, whyNot);
  return whyNot;
}

void fff::populateTreeOpsToGPUPatterns(RewritePatternSet &patterns,
                                       bool cpuTwin) {
  patterns.add<TreeToGPUPattern<TreeFFNOp>, TreeToGPUPattern<LeafTreeFFNOp>>(
      patterns.getContext(), cpuTwin);
}

//===- TreeKernelEmitter.h - emits a tree kernel's per-token code -*- C++
//-*-===//
//
// The emitter behind TreeKernel.h's entry points, shared by its two halves:
// TreeKernel.cpp (the walk, the records, the output rows: every tree
// kernel) and LeafKernel.cpp (a leaf's hidden layer, and leaf_tree_ffn_grad's
// gradient walk). Private to FFFToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_TREEKERNELEMITTER_H
#define FFF_LIB_CONVERSION_FFFTOGPU_TREEKERNELEMITTER_H

#include "LaneEmitter.h"
#include "TreeKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace fff::detail {

using mlir::ArrayRef;
using mlir::BlockArgument;
using mlir::cast;
using mlir::DenseElementsAttr;
using mlir::function_ref;
using mlir::ImplicitLocOpBuilder;
using mlir::MemRefType;
using mlir::Operation;
using mlir::SmallVector;
using mlir::Type;
using mlir::Value;
using mlir::ValueRange;
using mlir::VectorType;
namespace arith = mlir::arith;
namespace memref = mlir::memref;
namespace scf = mlir::scf;
namespace vector = mlir::vector;

class TreeKernelEmitter : LaneEmitter {
public:
  TreeKernelEmitter(ImplicitLocOpBuilder &b, const TreeStrategy &strategy,
                    const TreeProblem &problem)
      : LaneEmitter(b, kWarpSize), s(strategy), p(problem) {}

  /// The kernel body. `shared` holds the block's records, [tokens per
  /// block, entries] coefficients (f32) and rows (i32), then its staged
  /// input and output rows, if any.
  void emitGPU(Value threadId, Value blockId, Value blocks,
               ArrayRef<BlockArgument> shared);

  /// The CPU twin: every token in turn, after staging rows as one block
  /// would. Returns the loop over tokens.
  Operation *emitCPUTwin();

private:
  /// A loop of the kernel. On the GPU neither LLVM nor ptxas may unroll it:
  /// the strategy already unrolled what it wants in flight at once, and
  /// ptxas unrolling the rest (the recorded rows, the steps over a wide
  /// row) runs out of registers and spills.
  scf::ForOp kernelLoop(Value lower, Value upper, Value step,
                        ValueRange inits = {});

  void prepare() {
    inVectors = arith::DivUIOp::create(b, p.inWidth, index(s.in.vectorWidth));
    outVectors =
        arith::DivUIOp::create(b, p.outWidth, index(s.out.vectorWidth));
    if (p.isGradientWalk())
      gradVectors = arith::DivUIOp::create(b, p.gradient.gradWidth,
                                           index(s.gradOutput->vectorWidth));
  }

  /// This thread's share of copying the staged rows (the top levels of
  /// each tree, input and output) into shared memory: vectors thread,
  /// thread + block size, ..., so that each warp copies contiguous spans.
  void stageRows(Value thread);

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
    return loadVector(p.input, inputRow(), column(chunk, s.in.vectorWidth),
                      s.in.vectorWidth);
  }
  /// The rows of x and y that hold this token's.
  Value inputRow() const { return p.inputInSlots ? slot : token; }
  Value outputRow() const { return p.outputInSlots ? slot : token; }
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
  SmallVector<Value> walkRow(
      Value lane, const TreeStrategy::LaneWalk &walk, Value vectors,
      std::optional<int64_t> staticVectors, ValueRange inits,
      function_ref<SmallVector<Value>(ArrayRef<LaneVector>, ValueRange)> step);

  /// A lane's parts of dot(x[token], weights[row]) for each of `rows`, in
  /// one walk over x: each step loads its x vectors once and every row's
  /// vectors beside them, all in flight together.
  SmallVector<Value> dotPartials(Value lane, Value weights,
                                 ArrayRef<Value> rows) {
    int64_t width = s.in.vectorWidth;
    return rowDotPartials(
        lane, s.in, inVectors, staticVectors(p.staticInWidth, width), weights,
        rows, [&](int64_t i, Value chunk) {
          return gpuInput.empty() ? inputVector(chunk) : gpuInput[i];
        });
  }

  /// The same over a row that `walk` covers, whose vector `i` of a step (at
  /// `chunk`) `leftVector` gives.
  SmallVector<Value>
  rowDotPartials(Value lane, const TreeStrategy::LaneWalk &walk, Value vectors,
                 std::optional<int64_t> staticVectors, Value weights,
                 ArrayRef<Value> rows,
                 function_ref<Value(int64_t i, Value chunk)> leftVector);

  static std::optional<int64_t> staticVectors(std::optional<int64_t> width,
                                              int64_t vectorWidth) {
    return width ? std::optional(*width / vectorWidth) : std::nullopt;
  }

  /// 2 * node + 1 + (goRight ? 1 : 0).
  Value child(Value node, Value goRight) {
    Value right = arith::IndexCastOp::create(
        b, b.getIndexType(),
        arith::ExtUIOp::create(b, b.getI64Type(), goRight));
    return arith::AddIOp::create(
        b,
        arith::AddIOp::create(b, arith::MulIOp::create(b, node, index(2)),
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
    memref::StoreOp::create(b,
                            arith::IndexCastOp::create(b, b.getI32Type(), row),
                            records[1], indices);
  }

  /// One tree's walk: where its rows are, and what happens at each node.
  struct TreeWalk {
    Value treeBase;   // the tree's first row of routeWeights
    Value stagedBase; // ... and of the staged rows (null without staging)
    Value firstEntry; // the tree's first record (null: no records)
    arith::CmpFPredicate goRight;
  };

  /// The logits of `nodes` of one tree, in every lane, computed together.
  SmallVector<Value> nodeLogits(const TreeWalk &walk, ArrayRef<Value> nodes,
                                bool staged);

  /// Records `node` (tree_ffn) at `level` with act(logit), or, in the
  /// gradient walk, with dl, and stores the visit.
  void visit(const TreeWalk &walk, Value level, Value node, Value logit);

  Value goesRight(const TreeWalk &walk, Value logit) {
    return arith::CmpFOp::create(b, walk.goRight, logit, f32(0.0));
  }

  /// Walks levels [first, last) from `node`, `s.levelsPerStep` levels a
  /// step; returns the node below the last level. With two levels a step,
  /// the node's and both children's rows are loaded and summed together,
  /// and the children's logits are picked after the node's decision.
  Value walkLevels(const TreeWalk &walk, int64_t first, int64_t last,
                   Value node, bool staged);

  /// tree_ffn: every tree's walk, each visited neuron recorded with act(l);
  /// the staged top levels read their rows from shared memory. Exactly zero
  /// goes left.
  void routeTrees();

  //===--- A leaf's hidden layer (LeafKernel.cpp) -----------------------===//

  /// leaf_tree_ffn: the routing walk, then the leaf's hidden layer, each
  /// hidden unit recorded with act(hidden) against its row of w2. Zero goes
  /// right here (s >= 0), as in the original FFF code.
  void routeToLeafAndHidden();

  /// leaf_tree_ffn_grad's walk once routed (GPU only): the hidden layer's
  /// pre-activations, `hiddenUnitsPerPass` units a pass over x; each unit's
  /// dpre from `gradRowsPerStep` rows of w2 at a time, stored with act(pre)
  /// and the leaf as soon as they are known; then dx, `dxUnitsPerStep`
  /// units of a w1 row at a time.
  void leafGradient(Value firstRow);

  /// `count` units of w1's row `row` from unit `first` (a multiple of
  /// `multiple`), widened.
  Value w1Piece(Value row, Value first, int64_t multiple, int64_t count);
  Value w1Piece(Value row, int64_t first, int64_t count) {
    return w1Piece(row, index(first), first, count);
  }

  /// The alignment of `count` units from a unit that is a multiple of
  /// `multiple`, in a row of W units of `bytes` each (of w1[leaf], or of
  /// the records): what the row's size, the offset and the piece's size all
  /// allow.
  llvm::MaybeAlign rowPieceAlignment(int64_t multiple, int64_t count,
                                     int64_t bytes);

  /// A lane's part of x[token] @ w1[leaf]: the lane takes input elements
  /// lane, lane + 32, ... and adds x[d] times row d of w1[leaf] (W
  /// contiguous values; a warp reads 32 consecutive rows). The one loop
  /// left for ptxas to unroll: each iteration's loads are independent, and
  /// unrolled they are in flight together.
  Value hiddenPartials(Value lane) {
    return hiddenPartials(lane, 0, p.hiddenWidth);
  }
  /// The same for `count` units from unit `first`. The gradient walk, which
  /// holds more state, keeps ptxas from unrolling the loop.
  Value hiddenPartials(Value lane, int64_t first, int64_t count);

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

  /// Output row `row` (recorded as entry `entry`, static when unrolled) at
  /// `columns`, widened: from the staged rows when its level is staged,
  /// which a static entry tells at compile time.
  SmallVector<Value> outputRow(Value entry, std::optional<int64_t> staticEntry,
                               Value row, ArrayRef<Value> columns);

  /// y[token] at `vectors`: the bias plus every recorded row times its
  /// coefficient, summed in f32 registers, each vector stored once. All the
  /// vectors' loads of an entry are independent, and so are the entries'
  /// when unrolled, which is what keeps a lone token's output from waiting
  /// on one load at a time.
  void storeOutputVectors(ArrayRef<LaneVector> vectors);

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

  void emitToken();

  const TreeStrategy &s;
  const TreeProblem &p;
  Value token, inVectors, outVectors;
  /// Vectors of a dy row, in the gradient walk.
  Value gradVectors;
  /// The token's warp in its block on the GPU, 0 in the twin.
  Value slot;
  /// leaf_tree_ffn's leaf, once routed (null for tree_ffn).
  Value leaf;
  /// The staged rows (null without staging).
  Value stagedInput, stagedOutput;
  /// This token's records (coefficients, rows) and the indices before the
  /// entry index: the warp on the GPU, none in the twin.
  std::array<Value, 2> records;
  SmallVector<Value> recordPrefix;
  /// The lane's x vectors, when the strategy keeps them in registers.
  SmallVector<Value> gpuInput;
};

} // namespace fff::detail

#endif // FFF_LIB_CONVERSION_FFFTOGPU_TREEKERNELEMITTER_H

//===- ContractionKernel.cpp - tiled multiply-accumulate kernels
//-----------===//
//
// C[b, m, n] += sum_k A[b, m, k] * B[b, n, k], with each operand read through
// its own indexing map, so that any layout (a transposed weight, a batch
// dim anywhere) takes the same kernel. Tiles of A and B are staged in
// shared memory as f32; each thread accumulates its outputs in f32
// registers and adds them to C once. See ContractionStrategy.
//
//===----------------------------------------------------------------------===//

#include "LinalgKernels.h"

#include "../GPUCommon/KernelModule.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

using namespace mlir;
using namespace fff;

namespace {

bool isNarrowFloat(Type type) {
  return isa<Float32Type, Float16Type, BFloat16Type>(type);
}

/// `value` is block argument `arg`, possibly widened by arith.extf.
bool isArgument(Value value, BlockArgument arg) {
  if (auto ext = value.getDefiningOp<arith::ExtFOp>())
    value = ext.getIn();
  return value == arg;
}

/// The body computes out + a * b (either order of each), the inputs
/// possibly widened first, and nothing else.
bool isMultiplyAccumulate(linalg::GenericOp op) {
  Block *body = op.getBody();
  BlockArgument a = body->getArgument(0), b = body->getArgument(1),
                out = body->getArgument(2);
  auto add =
      body->getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value product = add.getLhs() == out   ? add.getRhs()
                  : add.getRhs() == out ? add.getLhs()
                                        : Value();
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul)
    return false;
  bool operandsMatch =
      (isArgument(mul.getLhs(), a) && isArgument(mul.getRhs(), b)) ||
      (isArgument(mul.getLhs(), b) && isArgument(mul.getRhs(), a));
  // Only the add, the multiply, their widening casts and the yield.
  size_t casts = llvm::count_if(body->getOperations(), [](Operation &inner) {
    return isa<arith::ExtFOp>(inner);
  });
  return operandsMatch && body->getOperations().size() == 3 + casts;
}

} // namespace

std::optional<ContractionDims>
fff::matchTiledContraction(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !op.hasPureBufferSemantics())
    return std::nullopt;
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type || !isNarrowFloat(type.getElementType()) ||
        !op.getMatchingIndexingMap(&operand).isProjectedPermutation())
      return std::nullopt;
  }
  FailureOr<linalg::ContractionDimensions> found =
      linalg::inferContractionDims(op);
  if (failed(found) || found->m.empty() || found->n.empty() ||
      found->k.empty() ||
      found->batch.size() + found->m.size() + found->n.size() +
              found->k.size() !=
          op.getNumLoops() ||
      !isMultiplyAccumulate(op))
    return std::nullopt;
  ContractionDims dims;
  dims.batch.assign(found->batch.begin(), found->batch.end());
  dims.m.assign(found->m.begin(), found->m.end());
  dims.n.assign(found->n.begin(), found->n.end());
  dims.k.assign(found->k.begin(), found->k.end());
  return dims;
}

namespace {

/// The kernel body, given its arguments: A, B, C, then the loop extents.
class ContractionEmitter {
public:
  ContractionEmitter(ImplicitLocOpBuilder &b, linalg::GenericOp op,
                     const ContractionDims &dims,
                     const ContractionStrategy &strategy, ValueRange args,
                     Value sharedA, Value sharedB)
      : b(b), op(op), dims(dims), s(strategy), a(args[0]), bOperand(args[1]),
        c(args[2]), sizes(args.drop_front(3)), sharedA(sharedA),
        sharedB(sharedB) {}

  void emit() {
    Value thread = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    tx = rem(thread, s.threadsN);
    ty = div(thread, s.threadsN);

    // Block -> (batch, tile row, tile column), the column fastest.
    Value block = gpu::BlockIdOp::create(b, gpu::Dimension::x);
    rowsTotal = product(dims.m);
    columnsTotal = product(dims.n);
    depth = product(dims.k);
    Value tilesN = ceilDiv(columnsTotal, s.tileN);
    Value tilesM = ceilDiv(rowsTotal, s.tileM);
    Value tileColumn = arith::RemUIOp::create(b, block, tilesN);
    Value rest = arith::DivUIOp::create(b, block, tilesN);
    Value tileRow = arith::RemUIOp::create(b, rest, tilesM);
    Value batch = arith::DivUIOp::create(b, rest, tilesM);
    index.assign(op.getNumLoops(), constant(0));
    scatter(index, dims.batch, batch);
    rowBase = mul(tileRow, s.tileM);
    columnBase = mul(tileColumn, s.tileN);

    SmallVector<Value> zeros(
        s.rowsPerThread() * s.columnsPerThread(),
        arith::ConstantOp::create(b, b.getF32FloatAttr(0)));
    auto loop = scf::ForOp::create(
        b, constant(0), depth, constant(s.tileK), zeros,
        [&](OpBuilder &nested, Location loc, Value k0, ValueRange acc) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(),
                              nested.getInsertionPoint());
          scf::YieldOp::create(b, kStep(k0, acc));
        });
    writeOutputs(loop.getResults());
  }

private:
  /// One tileK-deep step: stage both slices, then multiply from shared
  /// memory. Returns the updated accumulators.
  SmallVector<Value> kStep(Value k0, ValueRange acc) {
    stage(/*operand=*/0, s.tileM, k0, sharedA);
    stage(/*operand=*/1, s.tileN, k0, sharedB);
    gpu::BarrierOp::create(b);
    SmallVector<Value> sums(acc);
    int64_t rows = s.rowsPerThread(), columns = s.columnsPerThread();
    for (int64_t kk = 0; kk < s.tileK; ++kk) {
      SmallVector<Value> aValues, bValues;
      for (int64_t i = 0; i < rows; ++i)
        aValues.push_back(memref::LoadOp::create(
            b, sharedA, ValueRange{constant(kk), add(ty, i * s.threadsM)}));
      for (int64_t j = 0; j < columns; ++j)
        bValues.push_back(memref::LoadOp::create(
            b, sharedB, ValueRange{constant(kk), add(tx, j * s.threadsN)}));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < columns; ++j)
          sums[i * columns + j] = math::FmaOp::create(b, aValues[i], bValues[j],
                                                      sums[i * columns + j]);
    }
    gpu::BarrierOp::create(b);
    return sums;
  }

  /// Stages operand `which` (0: A, rows along M; 1: B, along N) for
  /// k0 .. k0 + tileK into `shared` ([tileK][extent], as f32), zero past
  /// the edges. Consecutive threads read consecutive k for A (contiguous
  /// when A is [M, K]) and consecutive n for B (when B is [K, N]).
  void stage(int which, int64_t extent, Value k0, Value shared) {
    ArrayRef<unsigned> spatialDims = which == 0 ? dims.m : dims.n;
    Value spatialTotal = which == 0 ? rowsTotal : columnsTotal;
    Value base = which == 0 ? rowBase : columnBase;
    OpOperand *operand = op.getDpsInputOperand(which);
    Value buffer = which == 0 ? a : bOperand;
    Value thread = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    int64_t perThread = extent * s.tileK / s.threadsPerBlock();
    for (int64_t r = 0; r < perThread; ++r) {
      Value element = add(thread, r * s.threadsPerBlock());
      Value spatial, kk;
      if (which == 0) {
        spatial = div(element, s.tileK);
        kk = rem(element, s.tileK);
      } else {
        kk = div(element, extent);
        spatial = rem(element, extent);
      }
      Value position = arith::AddIOp::create(b, base, spatial);
      Value k = arith::AddIOp::create(b, k0, kk);
      Value inside = arith::AndIOp::create(b, less(position, spatialTotal),
                                           less(k, depth));
      // Out of range reads element 0 instead, and is then replaced by zero.
      SmallVector<Value> at = index;
      scatter(at, spatialDims, select(inside, position));
      scatter(at, dims.k, select(inside, k));
      Value value = widen(memref::LoadOp::create(
          b, buffer, apply(op.getMatchingIndexingMap(operand), at)));
      value = arith::SelectOp::create(
          b, inside, value, arith::ConstantOp::create(b, b.getF32FloatAttr(0)));
      memref::StoreOp::create(b, value, shared, ValueRange{kk, spatial});
    }
  }

  /// C += the accumulators, each thread its own outputs, inside the edges.
  void writeOutputs(ValueRange sums) {
    OpOperand *init = op.getDpsInitOperand(0);
    Type elementType = cast<MemRefType>(c.getType()).getElementType();
    for (int64_t i = 0; i < s.rowsPerThread(); ++i)
      for (int64_t j = 0; j < s.columnsPerThread(); ++j) {
        Value row = arith::AddIOp::create(b, rowBase, add(ty, i * s.threadsM));
        Value column =
            arith::AddIOp::create(b, columnBase, add(tx, j * s.threadsN));
        Value inside = arith::AndIOp::create(b, less(row, rowsTotal),
                                             less(column, columnsTotal));
        auto ifInside = scf::IfOp::create(b, inside);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(ifInside.thenBlock()->getTerminator());
        SmallVector<Value> at = index;
        scatter(at, dims.m, row);
        scatter(at, dims.n, column);
        SmallVector<Value> indices = apply(op.getMatchingIndexingMap(init), at);
        Value sum = arith::AddFOp::create(
            b, widen(memref::LoadOp::create(b, c, indices)),
            sums[i * s.columnsPerThread() + j]);
        if (!elementType.isF32())
          sum = arith::TruncFOp::create(b, elementType, sum);
        memref::StoreOp::create(b, sum, c, indices);
      }
  }

  /// The product of the extents of `group`.
  Value product(ArrayRef<unsigned> group) {
    Value total = sizes[group.front()];
    for (unsigned d : group.drop_front())
      total = arith::MulIOp::create(b, total, sizes[d]);
    return total;
  }

  /// Sets the loop indices of `group` from their linear index `linear`
  /// (last dim fastest).
  void scatter(SmallVectorImpl<Value> &at, ArrayRef<unsigned> group,
               Value linear) {
    if (group.size() == 1) {
      at[group.front()] = linear;
      return;
    }
    for (unsigned d : llvm::reverse(group)) {
      at[d] = arith::RemUIOp::create(b, linear, sizes[d]);
      linear = arith::DivUIOp::create(b, linear, sizes[d]);
    }
  }

  SmallVector<Value> apply(AffineMap map, ArrayRef<Value> at) {
    return llvm::map_to_vector(map.getResults(), [&](AffineExpr expr) {
      return at[cast<AffineDimExpr>(expr).getPosition()];
    });
  }
  Value widen(Value value) {
    return value.getType().isF32()
               ? value
               : arith::ExtFOp::create(b, b.getF32Type(), value).getResult();
  }
  Value select(Value inside, Value position) {
    return arith::SelectOp::create(b, inside, position, constant(0));
  }
  Value less(Value x, Value y) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, x, y);
  }
  Value constant(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value add(Value x, int64_t y) {
    return y ? arith::AddIOp::create(b, x, constant(y)).getResult() : x;
  }
  Value mul(Value x, int64_t y) {
    return arith::MulIOp::create(b, x, constant(y));
  }
  Value div(Value x, int64_t y) {
    return arith::DivUIOp::create(b, x, constant(y));
  }
  Value rem(Value x, int64_t y) {
    return arith::RemUIOp::create(b, x, constant(y));
  }
  Value ceilDiv(Value x, int64_t y) {
    return arith::CeilDivUIOp::create(b, x, constant(y));
  }

  ImplicitLocOpBuilder &b;
  linalg::GenericOp op;
  const ContractionDims &dims;
  const ContractionStrategy &s;
  Value a, bOperand, c;
  SmallVector<Value> sizes;
  Value sharedA, sharedB;
  Value tx, ty, rowBase, columnBase;
  /// The M, N and K extents, each over all of its dims.
  Value rowsTotal, columnsTotal, depth;
  SmallVector<Value> index;
};

} // namespace

void fff::emitContractionKernel(RewriterBase &rewriter, linalg::GenericOp op,
                                const ContractionDims &dims,
                                const ContractionStrategy &strategy,
                                StringRef name, gpu::GPUFuncOp &kernel) {
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  SmallVector<Value> sizes = loopSizes(b, op);
  SmallVector<Value> operands(op->getOperands());
  llvm::append_range(operands, sizes);

  KernelSpec spec;
  spec.name = name.str();
  spec.threadsPerBlock = strategy.threadsPerBlock();
  spec.maxRegisters = strategy.maxRegisters;
  spec.strategy = strategy.toAttr(rewriter.getContext());
  // A's slice is padded by a column: its threads store along k, which
  // would otherwise hit one bank.
  spec.workgroupBuffers = {
      workgroupBufferType({strategy.tileK, strategy.tileM + 1},
                          rewriter.getF32Type()),
      workgroupBufferType({strategy.tileK, strategy.tileN},
                          rewriter.getF32Type())};
  if (!kernel) {
    kernel = createKernel(rewriter, op, spec, operands);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(&kernel.front());
    ImplicitLocOpBuilder kb(op.getLoc(), rewriter);
    ValueRange shared = kernel.getWorkgroupAttributions();
    ContractionEmitter(kb, op, dims, strategy, kernel.getArguments(), shared[0],
                       shared[1])
        .emit();
    gpu::ReturnOp::create(kb);
  }

  auto product = [&](ArrayRef<unsigned> group) {
    Value total = arith::ConstantIndexOp::create(b, 1);
    for (unsigned d : group)
      total = arith::MulIOp::create(b, total, sizes[d]);
    return total;
  };
  auto tilesAlong = [&](ArrayRef<unsigned> group, int64_t tile) {
    return arith::CeilDivUIOp::create(b, product(group),
                                      arith::ConstantIndexOp::create(b, tile));
  };
  Value blocks = arith::MulIOp::create(
      b,
      arith::MulIOp::create(b, tilesAlong(dims.m, strategy.tileM),
                            tilesAlong(dims.n, strategy.tileN)),
      product(dims.batch));
  launchKernel(b, kernel, blocks, strategy.threadsPerBlock(), operands);
  rewriter.eraseOp(op);
}

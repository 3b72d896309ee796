//===- VectorEmitter.cpp - CPU vector code over buffers ---------*- C++ -*-===//

#include "VectorEmitter.h"

#include "fff/Conversion/RowLoops.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/FloatingPointMode.h"

using namespace mlir;
using fff::BuildInside;

Value fff::VectorEmitter::reduce(
    Value n, int64_t accumulators,
    function_ref<Value(Value j, Value partial, Value mask)> accumulate) {
  return reduceEach(n, accumulators, 1,
                    [&](int64_t, Value j, Value partial, Value mask) {
                      return accumulate(j, partial, mask);
                    })
      .front();
}

SmallVector<Value> fff::VectorEmitter::reduceEach(
    Value n, int64_t accumulators, int64_t count,
    function_ref<Value(int64_t sum, Value j, Value partial, Value mask)>
        accumulate) {
  int64_t step = lanes * accumulators;
  Value stepEnd = roundDown(n, step);
  // Partial sum a of sum k is carried at k * accumulators + a.
  SmallVector<Value> zeroPartials(count * accumulators, zeros());
  auto unrolled = scf::ForOp::create(
      b, index(0), stepEnd, index(step), zeroPartials,
      [&](OpBuilder &nested, Location, Value j, ValueRange partials) {
        BuildInside inside(b, nested);
        SmallVector<Value> next;
        for (auto [slot, partial] : llvm::enumerate(partials)) {
          int64_t k = int64_t(slot) / accumulators;
          int64_t a = int64_t(slot) % accumulators;
          Value column = arith::AddIOp::create(b, j, index(a * lanes));
          next.push_back(accumulate(k, column, partial, Value()));
        }
        scf::YieldOp::create(b, next);
      });
  SmallVector<Value> totals;
  for (int64_t k = 0; k < count; ++k) {
    ValueRange partials =
        unrolled.getResults().slice(k * accumulators, accumulators);
    Value total = partials.front();
    for (Value partial : partials.drop_front())
      total = arith::AddFOp::create(b, total, partial);
    totals.push_back(total);
  }
  auto rest = scf::ForOp::create(
      b, stepEnd, n, index(lanes), totals,
      [&](OpBuilder &nested, Location, Value j, ValueRange partials) {
        BuildInside inside(b, nested);
        Value mask = tailMask(n, j);
        SmallVector<Value> next;
        for (auto [k, partial] : llvm::enumerate(partials))
          next.push_back(accumulate(int64_t(k), j, partial, mask));
        scf::YieldOp::create(b, next);
      });
  SmallVector<Value> sums;
  for (Value total : rest.getResults())
    sums.push_back(vector::ReductionOp::create(b, vector::CombiningKind::ADD,
                                               total, Value(),
                                               arith::FastMathFlags::reassoc));
  return sums;
}

void fff::VectorEmitter::forEachStep(
    Value n, int64_t step, function_ref<void(Value j)> whole,
    function_ref<void(Value j, Value mask)> rest) {
  Value stepEnd = roundDown(n, step);
  scf::ForOp::create(b, index(0), stepEnd, index(step), ValueRange{},
                     [&](OpBuilder &nested, Location, Value j, ValueRange) {
                       BuildInside inside(b, nested);
                       whole(j);
                       scf::YieldOp::create(b);
                     });
  scf::ForOp::create(b, stepEnd, n, index(lanes), ValueRange{},
                     [&](OpBuilder &nested, Location, Value j, ValueRange) {
                       BuildInside inside(b, nested);
                       rest(j, tailMask(n, j));
                       scf::YieldOp::create(b);
                     });
}

Value fff::VectorEmitter::alloc(ShapedType type, Type elementType,
                                function_ref<Value(int64_t dim)> extent) {
  SmallVector<Value> dynamicSizes;
  for (auto [dim, size] : llvm::enumerate(type.getShape()))
    if (ShapedType::isDynamic(size))
      dynamicSizes.push_back(extent(dim));
  return alloc(MemRefType::get(type.getShape(), elementType), dynamicSizes);
}

Value fff::VectorEmitter::alloc(MemRefType type, ValueRange dynamicSizes) {
  constexpr int64_t kCacheLineBytes = 64;
  return memref::AllocOp::create(b, type, dynamicSizes,
                                 b.getI64IntegerAttr(kCacheLineBytes));
}

Value fff::VectorEmitter::toTensor(Value buffer, Type type) {
  return bufferization::ToTensorOp::create(b, type, buffer,
                                           /*restrict=*/true,
                                           /*writable=*/true);
}

Value fff::VectorEmitter::narrow(Value value, Type elementType) {
  auto narrowType = VectorType::get({lanes}, elementType);
  auto rounded = [&]() -> Value {
    return arith::TruncFOp::create(b, narrowType, value);
  };
  if (!elementType.isBF16() || !avx512Bf16)
    return rounded();
  // vcvtneps2bf16 rounds to nearest even, as arith.truncf does, but reads
  // subnormal inputs as zero and keeps a NaN's sign and payload, where
  // truncf gives the canonical NaN. A vector holding either takes truncf:
  // a branch, taken almost never, rather than both roundings every time.
  Value converted =
      x86vector::CvtPackedF32ToBF16Op::create(b, narrowType, value);
  Value special = LLVM::IsFPClass::create(
      b, maskVector, value, uint32_t(llvm::fcNan | llvm::fcSubnormal));
  Value anySpecial =
      vector::ReductionOp::create(b, vector::CombiningKind::OR, special);
  auto choice = scf::IfOp::create(
      b, anySpecial,
      [&](OpBuilder &nested, Location) {
        BuildInside inside(b, nested);
        scf::YieldOp::create(b, rounded());
      },
      [&](OpBuilder &nested, Location) {
        BuildInside inside(b, nested);
        scf::YieldOp::create(b, converted);
      });
  return choice.getResult(0);
}

LogicalResult fff::VectorEmitter::declareStreamingFence() {
  // A call (to the intrinsic, by its name) rather than llvm.call_intrinsic:
  // buffer deallocation, which runs later, accepts calls but no op whose
  // memory effects are unknown.
  auto module =
      b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  FailureOr<LLVM::LLVMFuncOp> sfence =
      LLVM::lookupOrCreateFn(b, module, "llvm.x86.sse.sfence", {},
                             LLVM::LLVMVoidType::get(b.getContext()));
  if (failed(sfence))
    return failure();
  streamingFence = *sfence;
  return success();
}

void fff::VectorEmitter::fenceStreamingStores() {
  LLVM::CallOp::create(b, streamingFence, ValueRange{});
}

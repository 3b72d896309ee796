//===- VectorEmitter.cpp - CPU vector code over buffers ---------*- C++ -*-===//

#include "VectorEmitter.h"

#include "fff/Conversion/RowLoops.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using fff::BuildInside;

Value fff::VectorEmitter::reduce(
    Value n, int64_t accumulators,
    function_ref<Value(Value j, Value partial, Value mask)> accumulate) {
  int64_t step = lanes * accumulators;
  Value stepEnd = roundDown(n, step);
  SmallVector<Value> zeroPartials(accumulators, zeros());
  auto unrolled = scf::ForOp::create(
      b, index(0), stepEnd, index(step), zeroPartials,
      [&](OpBuilder &nested, Location, Value j, ValueRange partials) {
        BuildInside inside(b, nested);
        SmallVector<Value> next;
        for (auto [k, partial] : llvm::enumerate(partials)) {
          Value column = arith::AddIOp::create(b, j, index(int64_t(k) * lanes));
          next.push_back(accumulate(column, partial, Value()));
        }
        scf::YieldOp::create(b, next);
      });
  Value total = unrolled.getResult(0);
  for (Value partial : unrolled.getResults().drop_front())
    total = arith::AddFOp::create(b, total, partial);
  auto rest = scf::ForOp::create(
      b, stepEnd, n, index(lanes), ValueRange{total},
      [&](OpBuilder &nested, Location, Value j, ValueRange partial) {
        BuildInside inside(b, nested);
        scf::YieldOp::create(
            b, ValueRange{accumulate(j, partial[0], tailMask(n, j))});
      });
  return vector::ReductionOp::create(b, vector::CombiningKind::ADD,
                                     rest.getResult(0), Value(),
                                     arith::FastMathFlags::reassoc);
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
  return memref::AllocOp::create(
      b, MemRefType::get(type.getShape(), elementType), dynamicSizes);
}

Value fff::VectorEmitter::toTensor(Value buffer, Type type) {
  return bufferization::ToTensorOp::create(b, type, buffer,
                                           /*restrict=*/true,
                                           /*writable=*/true);
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

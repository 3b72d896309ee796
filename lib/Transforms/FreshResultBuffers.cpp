//===- FreshResultBuffers.cpp - an allocation per returned buffer ---------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace fff {
#define GEN_PASS_DEF_FRESHRESULTBUFFERS
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// A fresh buffer holding a copy of `buffer`, of the same identity-layout
/// type.
Value copyIntoFreshBuffer(OpBuilder &b, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  SmallVector<Value> dynamicSizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.isDynamicDim(d))
      dynamicSizes.push_back(memref::DimOp::create(b, loc, buffer, d));
  Value fresh = memref::AllocOp::create(b, loc, type, dynamicSizes);
  memref::CopyOp::create(b, loc, buffer, fresh);
  return fresh;
}

struct FreshResultBuffersPass
    : fff::impl::FreshResultBuffersBase<FreshResultBuffersPass> {
  void runOnOperation() override {
    getOperation().walk([](func::ReturnOp ret) {
      llvm::SmallPtrSet<Value, 8> returned;
      OpBuilder b(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        Value value = operand.get();
        bool firstReturn = returned.insert(value).second;
        // Tensors: one-shot bufferization takes an argument returned as it
        // is, but not a value returned twice.
        if (isa<RankedTensorType>(value.getType())) {
          if (!firstReturn)
            operand.set(bufferization::AllocTensorOp::create(
                b, ret.getLoc(), cast<RankedTensorType>(value.getType()),
                /*dynamicSizes=*/ValueRange(), /*copy=*/value));
          continue;
        }
        auto type = dyn_cast<MemRefType>(value.getType());
        if (!type || !type.getLayout().isIdentity() ||
            (firstReturn && !isa<BlockArgument>(value)))
          continue;
        operand.set(copyIntoFreshBuffer(b, ret.getLoc(), value));
      }
    });
  }
};

} // namespace

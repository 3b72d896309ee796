//===- RuntimeAllocations.cpp - host buffers from the runtime -------------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

namespace fff {
#define GEN_PASS_DEF_RUNTIMEALLOCATIONS
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;

namespace {

struct RuntimeAllocationsPass
    : fff::impl::RuntimeAllocationsBase<RuntimeAllocationsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    Type i64 = b.getI64Type();
    FailureOr<LLVM::LLVMFuncOp> alloc =
        LLVM::lookupOrCreateGenericAllocFn(b, module, i64);
    FailureOr<LLVM::LLVMFuncOp> alignedAlloc =
        LLVM::lookupOrCreateGenericAlignedAllocFn(b, module, i64);
    if (failed(alloc) || failed(alignedAlloc) ||
        failed(LLVM::lookupOrCreateGenericFreeFn(b, module)))
      return signalPassFailure();
    for (LLVM::LLVMFuncOp function : {*alloc, *alignedAlloc}) {
      // A definition (fff-huge-page-allocations') already says so.
      if (function.isExternal())
        function.setResultAttr(0, LLVM::LLVMDialect::getNoAliasAttrName(),
                               b.getUnitAttr());
    }
  }
};

} // namespace

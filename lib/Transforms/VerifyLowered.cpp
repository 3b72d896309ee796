//===- VerifyLowered.cpp - fail unless fully lowered to LLVM dialect ------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/BuiltinOps.h"

namespace fff {
#define GEN_PASS_DEF_VERIFYLOWERED
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// A compiled kernel module, or a launch whose operands are LLVM values:
/// what the GPU dialect's translation to LLVM IR takes.
bool isTranslatableGPUOp(Operation *op) {
  if (isa<gpu::BinaryOp>(op))
    return true;
  return isa<gpu::LaunchFuncOp>(op) &&
         llvm::all_of(op->getOperandTypes(), LLVM::isCompatibleType);
}

struct VerifyLoweredPass : fff::impl::VerifyLoweredBase<VerifyLoweredPass> {
  using VerifyLoweredBase::VerifyLoweredBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // A cast between a lowered and an unlowered type is left because of the
    // op on its other side; that op is the one to name.
    Operation *leftover = nullptr, *leftoverCast = nullptr;
    module->walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (op == module.getOperation() ||
          isa_and_present<LLVM::LLVMDialect>(op->getDialect()) ||
          (allowGPULaunches && isTranslatableGPUOp(op)))
        return WalkResult::advance();
      if (isa<UnrealizedConversionCastOp>(op)) {
        if (!leftoverCast)
          leftoverCast = op;
        return WalkResult::advance();
      }
      leftover = op;
      return WalkResult::interrupt();
    });
    if (!leftover)
      leftover = leftoverCast;
    if (!leftover)
      return;
    InFlightDiagnostic error = leftover->emitOpError("was not lowered");
    if (!pipelineName.empty())
      error << " by " << pipelineName;
    error << ": fff cannot compile it yet";
    signalPassFailure();
  }
};

} // namespace

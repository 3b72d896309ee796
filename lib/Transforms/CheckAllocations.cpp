//===- CheckAllocations.cpp - check that heap allocations succeeded -------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace fff {
#define GEN_PASS_DEF_CHECKALLOCATIONS
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

struct CheckAllocationsPass
    : fff::impl::CheckAllocationsBase<CheckAllocationsPass> {
  void runOnOperation() override {
    getOperation()->walk([](Operation *op) {
      // Kernels allocate no heap memory; their workgroup buffers are static.
      if (isa<gpu::GPUModuleOp>(op))
        return WalkResult::skip();
      if (auto alloc = dyn_cast<memref::AllocOp>(op))
        checkAllocation(alloc, alloc.getMemref(), alloc.getDynamicSizes());
      if (auto alloc = dyn_cast<gpu::AllocOp>(op))
        checkAllocation(alloc, alloc.getMemref(), alloc.getDynamicSizes());
      return WalkResult::advance();
    });
  }

  static void checkAllocation(Operation *alloc, TypedValue<MemRefType> buffer,
                              ValueRange dynamicSizes) {
    ImplicitLocOpBuilder b(alloc->getLoc(), alloc->getContext());
    b.setInsertionPointAfter(alloc);
    Value zero = arith::ConstantIndexOp::create(b, 0);
    Value elements = arith::ConstantIndexOp::create(b, 1);
    for (Value size : dynamicSizes)
      elements = arith::MulIOp::create(b, elements, size);
    MemRefType type = buffer.getType();
    // Only whether it is zero matters: a product too large to count is not.
    bool staticallyEmpty = llvm::is_contained(type.getShape(), 0);
    if (staticallyEmpty)
      return;
    Value empty =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, elements, zero);
    Value address = memref::ExtractAlignedPointerAsIndexOp::create(b, buffer);
    Value allocated =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ne, address, zero);
    std::string message;
    llvm::raw_string_ostream os(message);
    os << "out of memory: cannot allocate a " << type;
    cf::AssertOp::create(b, arith::OrIOp::create(b, empty, allocated), message);
  }
};

} // namespace

//===- DeviceBuffers.cpp - host code's buffers in GPU memory ---------------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

namespace fff {
#define GEN_PASS_DEF_DEVICEBUFFERS
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// Host ops that touch a buffer's elements, which live on the device.
bool readsOrWritesElements(Operation *op) {
  return isa<memref::LoadOp, memref::StoreOp, memref::CopyOp,
             memref::AtomicRMWOp, memref::GenericAtomicRMWOp, vector::LoadOp,
             vector::StoreOp, vector::TransferReadOp, vector::TransferWriteOp,
             vector::MaskedLoadOp, vector::MaskedStoreOp, vector::GatherOp,
             vector::ScatterOp>(op);
}

/// The last op of `alloc`'s block that uses the buffer or a view of it,
/// after which it can be freed; null when the IR frees it already, or when
/// a view escapes (is returned, yielded or passed to a call) and nothing
/// can say when it dies.
/// fff's kernels run on one stream, and fff's runtime frees on it, so
/// freeing after the last launch is ordered after the kernels themselves.
Operation *lastUseOfBuffer(memref::AllocOp alloc) {
  Block *block = alloc->getBlock();
  Operation *last = alloc;
  SmallVector<Value> aliases{alloc.getMemref()};
  while (!aliases.empty()) {
    Value buffer = aliases.pop_back_val();
    for (OpOperand &use : buffer.getUses()) {
      Operation *user = use.getOwner();
      if (auto view = dyn_cast<ViewLikeOpInterface>(user);
          view && view.getViewSource() == buffer) {
        llvm::append_range(aliases, user->getResults());
      } else if (user->hasTrait<OpTrait::IsTerminator>() ||
                 isa<CallOpInterface, memref::DeallocOp>(user)) {
        return nullptr;
      }
      Operation *inBlock = block->findAncestorOpInBlock(*user);
      if (!inBlock)
        return nullptr;
      if (last->isBeforeInBlock(inBlock))
        last = inBlock;
    }
  }
  return last;
}

/// Whether `alloc` only holds a shape for `memref.reshape`, written by host
/// stores (torch-mlir's view with computed sizes): host metadata, not data.
bool isShapeBuffer(memref::AllocOp alloc) {
  bool shapesAView = llvm::any_of(alloc->getUsers(), [&](Operation *user) {
    auto reshape = dyn_cast<memref::ReshapeOp>(user);
    return reshape && reshape.getShape() == alloc.getMemref();
  });
  return shapesAView && llvm::all_of(alloc->getUses(), [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (auto store = dyn_cast<memref::StoreOp>(user))
      return store.getMemRef() == alloc.getMemref();
    if (auto reshape = dyn_cast<memref::ReshapeOp>(user))
      return reshape.getShape() == alloc.getMemref();
    return isa<memref::DeallocOp>(user);
  });
}

/// Moves a module's host buffers to the device, one op at a time.
class DevicePlacement {
public:
  explicit DevicePlacement(MLIRContext *context) : rewriter(context) {}

  LogicalResult place(Operation *op) {
    rewriter.setInsertionPoint(op);
    if (auto alloc = dyn_cast<memref::AllocOp>(op))
      return placeAllocation(alloc);
    if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      if (!shapeBuffers.contains(dealloc.getMemref()))
        rewriter.replaceOpWithNewOp<gpu::DeallocOp>(
            dealloc, /*asyncToken=*/Type(), ValueRange(), dealloc.getMemref());
      return success();
    }
    if (auto global = dyn_cast<memref::GetGlobalOp>(op))
      return placeConstant(global);
    if (isa<memref::AllocaOp>(op))
      return op->emitOpError(
          "allocates a host stack buffer, which GPU kernels cannot reach");
    if (auto store = dyn_cast<memref::StoreOp>(op);
        store && shapeBuffers.contains(store.getMemRef()))
      return success();
    if (readsOrWritesElements(op))
      return op->emitOpError("accesses buffer elements in host code, but the "
                             "GPU pipeline keeps buffers in device memory");
    return success();
  }

  /// The constant globals host code reads, for the module attribute.
  ArrayRef<Attribute> constantGlobals() const { return constants.getArrayRef(); }

private:
  /// A device buffer, freed after its last use; a shape buffer stays on the
  /// host, freed there.
  LogicalResult placeAllocation(memref::AllocOp alloc) {
    Operation *lastUse = lastUseOfBuffer(alloc);
    Value buffer = alloc.getMemref();
    if (isShapeBuffer(alloc)) {
      shapeBuffers.insert(buffer);
      if (lastUse) {
        rewriter.setInsertionPointAfter(lastUse);
        memref::DeallocOp::create(rewriter, alloc.getLoc(), buffer);
      }
      return success();
    }
    auto device = rewriter.replaceOpWithNewOp<gpu::AllocOp>(
        alloc, alloc.getType(), /*asyncToken=*/Type(),
        /*asyncDependencies=*/ValueRange(), alloc.getDynamicSizes(),
        /*symbolOperands=*/ValueRange(), /*hostShared=*/false);
    if (lastUse) {
      rewriter.setInsertionPointAfter(lastUse);
      gpu::DeallocOp::create(rewriter, alloc.getLoc(), /*asyncToken=*/Type(),
                             ValueRange(), device.getMemref());
    }
    return success();
  }

  LogicalResult placeConstant(memref::GetGlobalOp global) {
    auto definition = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
        global, global.getNameAttr());
    if (!definition || !definition.getConstant())
      return global.emitOpError("reads a mutable global, which GPU kernels "
                                "cannot share with the host");
    constants.insert(global.getNameAttr());
    // The device copy is made on first use (fff-upload-device-constants);
    // when that fails, its address is null, and the call stops here.
    ImplicitLocOpBuilder b(global.getLoc(), rewriter);
    b.setInsertionPointAfter(global);
    Value address = memref::ExtractAlignedPointerAsIndexOp::create(b, global);
    Value copied = arith::CmpIOp::create(b, arith::CmpIPredicate::ne, address,
                                         arith::ConstantIndexOp::create(b, 0));
    cf::AssertOp::create(
        b, copied,
        ("cannot copy the constant @" + global.getName() + " to the GPU").str());
    return success();
  }

  IRRewriter rewriter;
  llvm::SetVector<Attribute> constants;
  llvm::DenseSet<Value> shapeBuffers;
};

struct DeviceBuffersPass : fff::impl::DeviceBuffersBase<DeviceBuffersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> hostOps;
    module->walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<gpu::GPUModuleOp>(op))
        return WalkResult::skip(); // kernels' own memory is on the device
      hostOps.push_back(op);
      return WalkResult::advance();
    });
    DevicePlacement placement(&getContext());
    for (Operation *op : hostOps)
      if (failed(placement.place(op)))
        return signalPassFailure();
    if (!placement.constantGlobals().empty())
      module->setAttr("fff.device_constants",
                      ArrayAttr::get(&getContext(), placement.constantGlobals()));
  }
};

} // namespace

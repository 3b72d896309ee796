//===- UploadDeviceConstants.cpp - device copies of constant globals ------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"

namespace fff {
#define GEN_PASS_DEF_UPLOADDEVICECONSTANTS
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// The runtime function that returns a constant's device copy.
constexpr llvm::StringLiteral kDeviceConstantFunction = "fffDeviceConstant";
constexpr llvm::StringLiteral kConstantsAttrName = "fff.device_constants";

struct UploadDeviceConstantsPass
    : fff::impl::UploadDeviceConstantsBase<UploadDeviceConstantsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto listed = module->getAttrOfType<ArrayAttr>(kConstantsAttrName);
    if (!listed)
      return;
    module->removeAttr(kConstantsAttrName);
    llvm::DenseSet<StringRef> constants;
    for (auto name : listed.getAsRange<FlatSymbolRefAttr>())
      constants.insert(name.getValue());

    SmallVector<LLVM::AddressOfOp> uses;
    for (auto function : module.getOps<LLVM::LLVMFuncOp>())
      function.walk([&](LLVM::AddressOfOp address) {
        if (constants.contains(address.getGlobalName()))
          uses.push_back(address);
      });
    if (uses.empty())
      return;

    OpBuilder builder(module.getContext());
    auto pointer = LLVM::LLVMPointerType::get(module.getContext());
    FailureOr<LLVM::LLVMFuncOp> upload = LLVM::lookupOrCreateFn(
        builder, module, kDeviceConstantFunction,
        {pointer, pointer, builder.getI64Type()}, pointer);
    if (failed(upload))
      return signalPassFailure();
    DataLayout layout(module);
    SymbolTableCollection symbols;
    llvm::StringMap<LLVM::GlobalOp> slots;
    for (LLVM::AddressOfOp address : uses) {
      LLVM::GlobalOp global = address.getGlobal(symbols);
      if (!global) {
        address.emitOpError("names no global");
        return signalPassFailure();
      }
      LLVM::GlobalOp &slot = slots[global.getSymName()];
      if (!slot)
        slot = createSlot(symbols.getSymbolTable(module), global);
      ImplicitLocOpBuilder b(address.getLoc(), address);
      b.setInsertionPointAfter(address);
      auto bytes = LLVM::ConstantOp::create(
          b, b.getI64Type(), int64_t(layout.getTypeSize(global.getType())));
      auto call = LLVM::CallOp::create(
          b, *upload,
          ValueRange{LLVM::AddressOfOp::create(b, slot), address, bytes});
      address.getResult().replaceAllUsesExcept(call.getResult(), call);
    }
  }

  /// A pointer-sized global, null until the first call stores the device
  /// copy of `global` in it; named after it, renamed if that name is taken.
  static LLVM::GlobalOp createSlot(SymbolTable &table, LLVM::GlobalOp global) {
    MLIRContext *context = global.getContext();
    ImplicitLocOpBuilder b(global.getLoc(), context);
    auto pointer = LLVM::LLVMPointerType::get(context);
    auto slot = LLVM::GlobalOp::create(
        b, pointer, /*isConstant=*/false, LLVM::Linkage::Internal,
        (global.getSymName() + "_device").str(), Attribute());
    b.setInsertionPointToStart(b.createBlock(&slot.getInitializerRegion()));
    LLVM::ReturnOp::create(b, LLVM::ZeroOp::create(b, pointer).getResult());
    table.insert(slot, std::next(global->getIterator()));
    return slot;
  }
};

} // namespace

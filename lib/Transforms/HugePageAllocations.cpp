//===- HugePageAllocations.cpp - large host buffers on huge pages ---------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace fff {
#define GEN_PASS_DEF_HUGEPAGEALLOCATIONS
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;

namespace {

/// Linux's transparent huge page size on x86-64 and AArch64 (4 KiB base
/// pages), and madvise's advice asking for them.
constexpr int64_t kHugePageBytes = int64_t(2) << 20;
constexpr int32_t kMadviseHugePage = 14; // MADV_HUGEPAGE

class AllocatorBuilder {
public:
  AllocatorBuilder(ModuleOp module, int64_t minBytes)
      : module(module), b(module.getLoc(), module.getContext()),
        minBytes(minBytes), i64(b.getI64Type()),
        pointer(LLVM::LLVMPointerType::get(b.getContext())) {
    b.setInsertionPointToEnd(module.getBody());
  }

  LogicalResult build() {
    FailureOr<LLVM::LLVMFuncOp> alloc =
        LLVM::lookupOrCreateGenericAllocFn(b, module, i64);
    FailureOr<LLVM::LLVMFuncOp> alignedAlloc =
        LLVM::lookupOrCreateGenericAlignedAllocFn(b, module, i64);
    FailureOr<LLVM::LLVMFuncOp> release =
        LLVM::lookupOrCreateGenericFreeFn(b, module);
    FailureOr<LLVM::LLVMFuncOp> malloc =
        LLVM::lookupOrCreateMallocFn(b, module, i64);
    FailureOr<LLVM::LLVMFuncOp> cAlignedAlloc =
        LLVM::lookupOrCreateAlignedAllocFn(b, module, i64);
    FailureOr<LLVM::LLVMFuncOp> cFree = LLVM::lookupOrCreateFreeFn(b, module);
    FailureOr<LLVM::LLVMFuncOp> madvise = LLVM::lookupOrCreateFn(
        b, module, "madvise", {pointer, i64, b.getI32Type()}, b.getI32Type());
    if (failed(alloc) || failed(alignedAlloc) || failed(release) ||
        failed(malloc) || failed(cAlignedAlloc) || failed(cFree) ||
        failed(madvise))
      return failure();
    libc = {*malloc, *cAlignedAlloc, *cFree, *madvise};
    defineIfDeclared(*alloc, [&](ValueRange args) {
      return allocate(args[0], [&]() { return call(libc.malloc, args[0]); });
    });
    defineIfDeclared(*alignedAlloc, [&](ValueRange args) {
      return allocate(args[1], [&]() {
        return call(libc.alignedAlloc, {args[0], args[1]});
      });
    });
    defineIfDeclared(*release, [&](ValueRange args) {
      LLVM::CallOp::create(b, libc.free, args);
      return Value();
    });
    return success();
  }

private:
  struct LibC {
    LLVM::LLVMFuncOp malloc, alignedAlloc, free, madvise;
  };

  /// Gives `function` (a declaration, or already this pass's definition)
  /// the body `body` builds, returning its result; internal, so that two
  /// modules in one process keep their own.
  void defineIfDeclared(LLVM::LLVMFuncOp function,
                        function_ref<Value(ValueRange)> body) {
    if (!function.isExternal())
      return;
    function.setLinkage(LLVM::Linkage::Internal);
    // Callers must still see an allocation: a pointer that aliases nothing
    // else. Inlined, the branch between two allocation calls would hide
    // that from LLVM, which then reloads and re-checks around every store
    // into a result (measured: a tree layer's token loop ran 1.7x slower).
    function.setPassthroughAttr(b.getArrayAttr({b.getStringAttr("noinline")}));
    if (function.getNumResults() == 1)
      function.setResultAttr(0, LLVM::LLVMDialect::getNoAliasAttrName(),
                             b.getUnitAttr());
    Block *entry = function.addEntryBlock(b);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(entry);
    Value result = body(entry->getArguments());
    LLVM::ReturnOp::create(b, result ? ValueRange{result} : ValueRange{});
  }

  Value call(LLVM::LLVMFuncOp function, ValueRange args) {
    return LLVM::CallOp::create(b, function, args).getResult();
  }

  Value constant(int64_t value) {
    return LLVM::ConstantOp::create(b, i64, b.getI64IntegerAttr(value));
  }

  /// `size` bytes: whole huge pages, advised as such, from `minBytes` on;
  /// else what `small` allocates. Returns the pointer (null on failure).
  Value allocate(Value size, function_ref<Value()> small) {
    Block *current = b.getInsertionBlock();
    Region *region = current->getParent();
    Block *smallBlock = b.createBlock(region, region->end());
    Block *largeBlock = b.createBlock(region, region->end());
    Block *done = b.createBlock(region, region->end(), {pointer}, {b.getLoc()});

    b.setInsertionPointToEnd(current);
    Value large = LLVM::ICmpOp::create(b, LLVM::ICmpPredicate::uge, size,
                                       constant(minBytes));
    LLVM::CondBrOp::create(b, large, largeBlock, smallBlock);

    b.setInsertionPointToEnd(smallBlock);
    LLVM::BrOp::create(b, ValueRange{small()}, done);

    b.setInsertionPointToEnd(largeBlock);
    Value pageMask = constant(kHugePageBytes - 1);
    Value rounded =
        LLVM::AndOp::create(b, LLVM::AddOp::create(b, size, pageMask),
                            LLVM::XOrOp::create(b, pageMask, constant(-1)));
    Value buffer = call(libc.alignedAlloc, {constant(kHugePageBytes), rounded});
    // madvise(NULL, ...) fails harmlessly; so does advice the kernel
    // cannot take.
    LLVM::CallOp::create(
        b, libc.madvise,
        ValueRange{
            buffer, rounded,
            LLVM::ConstantOp::create(b, b.getI32Type(),
                                     b.getI32IntegerAttr(kMadviseHugePage))});
    LLVM::BrOp::create(b, ValueRange{buffer}, done);

    b.setInsertionPointToStart(done);
    return done->getArgument(0);
  }

  ModuleOp module;
  ImplicitLocOpBuilder b;
  int64_t minBytes;
  Type i64, pointer;
  LibC libc;
};

struct HugePageAllocationsPass
    : fff::impl::HugePageAllocationsBase<HugePageAllocationsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (minBytes < 0) {
      getOperation().emitError()
          << "min-bytes must be 0 or positive, not " << int64_t(minBytes);
      return signalPassFailure();
    }
    if (failed(AllocatorBuilder(getOperation(), minBytes).build()))
      signalPassFailure();
  }
};

} // namespace

//===- LowerRuntimeChecks.cpp - cf.assert as report and return ------------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace fff {
#define GEN_PASS_DEF_LOWERRUNTIMECHECKS
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// The runtime function a failed check calls with its message.
constexpr llvm::StringLiteral kReportFunction = "fffReportCheckFailure";

/// The messages of a module's checks, each a NUL-terminated global made on
/// first use.
class MessageTable {
public:
  explicit MessageTable(ModuleOp module) : module(module) {}

  /// The address of `text`'s global.
  Value address(ImplicitLocOpBuilder &b, StringRef text) {
    auto [it, inserted] = globals.try_emplace(text);
    if (inserted) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      std::string data = (text + Twine('\0')).str();
      auto type = LLVM::LLVMArrayType::get(b.getI8Type(), data.size());
      it->second = LLVM::GlobalOp::create(
          b, type, /*isConstant=*/true, LLVM::Linkage::Internal,
          ("fff_check_message_" + Twine(globals.size() - 1)).str(),
          b.getStringAttr(data));
    }
    return LLVM::AddressOfOp::create(b, it->second);
  }

private:
  ModuleOp module;
  llvm::StringMap<LLVM::GlobalOp> globals;
};

struct LowerRuntimeChecksPass
    : fff::impl::LowerRuntimeChecksBase<LowerRuntimeChecksPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MessageTable messages(module);
    OpBuilder builder(module.getContext());
    auto pointer = LLVM::LLVMPointerType::get(module.getContext());
    FailureOr<LLVM::LLVMFuncOp> report =
        LLVM::lookupOrCreateFn(builder, module, kReportFunction, {pointer},
                               LLVM::LLVMVoidType::get(module.getContext()));
    if (failed(report))
      return signalPassFailure();

    for (auto function : module.getOps<func::FuncOp>()) {
      SmallVector<cf::AssertOp> checks;
      function.walk([&](cf::AssertOp check) { checks.push_back(check); });
      for (cf::AssertOp check : checks) {
        if (check->getParentRegion() != &function.getBody()) {
          check.emitOpError("is inside a nested region, where it cannot "
                            "return early; run convert-scf-to-cf first");
          return signalPassFailure();
        }
        lower(check, function, *report, messages);
      }
    }
  }

  /// Replaces `check` by a branch to a block that reports its message and
  /// returns poison.
  static void lower(cf::AssertOp check, func::FuncOp function,
                    LLVM::LLVMFuncOp report, MessageTable &messages) {
    Block *before = check->getBlock();
    Block *after = before->splitBlock(std::next(check->getIterator()));
    Block *failed = new Block();
    function.getBody().getBlocks().insert(after->getIterator(), failed);

    ImplicitLocOpBuilder b(check.getLoc(), check->getContext());
    b.setInsertionPointToEnd(failed);
    LLVM::CallOp::create(b, report,
                         ValueRange{messages.address(b, check.getMsg())});
    SmallVector<Value> poison;
    for (Type type : function.getResultTypes())
      poison.push_back(ub::PoisonOp::create(b, type));
    func::ReturnOp::create(b, poison);

    b.setInsertionPointToEnd(before);
    cf::CondBranchOp::create(b, check.getArg(), after, failed);
    check.erase();
  }
};

} // namespace

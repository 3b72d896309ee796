//===- OutlineOps.cpp - one function per distinct fff op ---------*- C++ -*-===//
//
// A model repeats its layers, and each copy of an op would otherwise be
// lowered, bufferized, translated and JIT-compiled again. Outlining every
// op into a function shared by its identical copies makes the CPU
// pipeline's work grow with the distinct ops, not with the layers.
//
//===----------------------------------------------------------------------===//

#include "fff/Dialect/FFF/Transforms/Passes.h"

#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "fff/Transforms/IdenticalOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace fff {
#define GEN_PASS_DEF_OUTLINEOPS
#include "fff/Dialect/FFF/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// The function's name: the op's, and a unit's norm.
std::string functionName(Operation *op) {
  if (auto unit = dyn_cast<FusionOp>(op)) {
    std::string name = "fff_fused";
    unit.getBody().walk([&](Operation *inner) {
      if (isa<LayerNormOp, RMSNormOp, TreeFFNOp, LeafTreeFFNOp>(inner))
        name += "_" + inner->getName().stripDialect().str();
    });
    return name;
  }
  return "fff_" + op->getName().stripDialect().str();
}

struct OutlineOpsPass : fff::impl::OutlineOpsBase<OutlineOpsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<LayerNormOp, RMSNormOp, TreeFFNOp, LeafTreeFFNOp, FusionOp>(op) &&
          !op->getParentOfType<FusionOp>() &&
          op->getParentOfType<func::FuncOp>() &&
          op->getParentOfType<ModuleOp>() == module)
        ops.push_back(op);
    });
    SymbolTable symbols(module);
    SmallVector<unsigned> kinds = kindsOfIdenticalOps(ops);
    SmallVector<func::FuncOp> functions(ops.size());
    OpBuilder b(&getContext());
    for (auto [index, op] : llvm::enumerate(ops)) {
      func::FuncOp &function = functions[kinds[index]];
      if (!function)
        function = outline(b, symbols, module, op);
      b.setInsertionPoint(op);
      auto call = func::CallOp::create(b, op->getLoc(), function,
                                       op->getOperands());
      op->replaceAllUsesWith(call.getResults());
      op->erase();
    }
  }

  /// A private function at the end of `module` whose body is a copy of `op`.
  func::FuncOp outline(OpBuilder &b, SymbolTable &symbols, ModuleOp module,
                       Operation *op) {
    b.setInsertionPointToEnd(module.getBody());
    auto function = func::FuncOp::create(
        b, op->getLoc(), functionName(op),
        b.getFunctionType(op->getOperandTypes(), op->getResultTypes()));
    function.setPrivate();
    symbols.insert(function); // renames it if the name is taken
    Block *body = function.addEntryBlock();
    b.setInsertionPointToStart(body);
    IRMapping mapping;
    mapping.map(op->getOperands(), body->getArguments());
    Operation *copy = b.clone(*op, mapping);
    func::ReturnOp::create(b, op->getLoc(), copy->getResults());
    return function;
  }
};

} // namespace

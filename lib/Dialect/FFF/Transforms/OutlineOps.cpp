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
      if (isa<LayerNormOp, RMSNormOp, LayerNormGradOp, RMSNormGradOp, TreeFFNOp,
              LeafTreeFFNOp>(inner))
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
        function = outlineOp(b, symbols, module, op, functionName(op)).first;
      b.setInsertionPoint(op);
      auto call = func::CallOp::create(b, op->getLoc(), function,
                                       op->getOperands());
      op->replaceAllUsesWith(call.getResults());
      op->erase();
    }
  }
};

} // namespace

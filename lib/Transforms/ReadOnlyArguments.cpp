//===- ReadOnlyArguments.cpp - callers' tensors are not written -----------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace fff {
#define GEN_PASS_DEF_READONLYARGUMENTS
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

struct ReadOnlyArgumentsPass
    : fff::impl::ReadOnlyArgumentsBase<ReadOnlyArgumentsPass> {
  void runOnOperation() override {
    auto readOnly = BoolAttr::get(&getContext(), false);
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (function.isExternal() || function.isPrivate())
        continue;
      for (BlockArgument argument : function.getArguments())
        if (isa<TensorType>(argument.getType()) &&
            !function.getArgAttr(
                argument.getArgNumber(),
                bufferization::BufferizationDialect::kWritableAttrName))
          function.setArgAttr(
              argument.getArgNumber(),
              bufferization::BufferizationDialect::kWritableAttrName, readOnly);
    }
  }
};

} // namespace

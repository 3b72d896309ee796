//===- Bf16ArithInF32.cpp - bf16 arithmetic as rounded f32 ----------------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/DenseSet.h"

namespace fff {
#define GEN_PASS_DEF_BF16ARITHINF32
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

struct Bf16ArithInF32Pass : fff::impl::Bf16ArithInF32Base<Bf16ArithInF32Pass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    llvm::DenseSet<Operation *> casts;
    getOperation()->walk([&](Operation *op) {
      if (isa<arith::ExtFOp, arith::TruncFOp>(op))
        casts.insert(op);
    });
    TypeConverter converter;
    arith::populateEmulateUnsupportedFloatsConversions(
        converter, {BFloat16Type::get(context)}, Float32Type::get(context));
    RewritePatternSet patterns(context);
    arith::populateEmulateUnsupportedFloatsPatterns(patterns, converter);
    ConversionTarget target(*context);
    arith::populateEmulateUnsupportedFloatsLegality(target, converter);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
    // The emulation marks its casts `contract`, which lets later folds drop
    // an extf of a truncf, and with it the rounding after an op.
    getOperation()->walk([&](Operation *op) {
      if (casts.contains(op))
        return;
      if (auto ext = dyn_cast<arith::ExtFOp>(op))
        ext->removeAttr(ext.getFastmathAttrName());
      else if (auto trunc = dyn_cast<arith::TruncFOp>(op))
        trunc->removeAttr(trunc.getFastmathAttrName());
    });
  }
};

} // namespace

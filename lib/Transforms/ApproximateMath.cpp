//===- ApproximateMath.cpp - inline polynomial math on the CPU --*- C++ -*-===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace fff {
#define GEN_PASS_DEF_APPROXIMATEMATH
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;

namespace {

struct ApproximateMathPass
    : fff::impl::ApproximateMathBase<ApproximateMathPass> {
  void runOnOperation() override {
    // The functions activations are made of, whose approximations hold to
    // a few ulp over all of f32 (not so sin and cos, whose range reduction
    // is coarse, nor rsqrt, which needs x86vector).
    auto approximated = [](StringRef name) {
      return llvm::is_contained(
          {math::ErfOp::getOperationName(), math::ErfcOp::getOperationName(),
           math::ExpOp::getOperationName(), math::ExpM1Op::getOperationName(),
           math::TanhOp::getOperationName()},
          name);
    };
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, approximated);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

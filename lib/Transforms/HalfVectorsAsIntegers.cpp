//===- HalfVectorsAsIntegers.cpp - 16-bit float vectors moved as i16 ------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace fff {
#define GEN_PASS_DEF_HALFVECTORSASINTEGERS
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// `type` with i16 elements if it is a vector of f16 or bf16; null if not.
VectorType asIntegers(Type type) {
  auto vector = dyn_cast<VectorType>(type);
  if (!vector || !isa<Float16Type, BFloat16Type>(vector.getElementType()))
    return {};
  return vector.clone(IntegerType::get(type.getContext(), 16));
}

struct MaskedLoadAsIntegers : OpRewritePattern<LLVM::MaskedLoadOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LLVM::MaskedLoadOp op,
                                PatternRewriter &rewriter) const override {
    VectorType integers = asIntegers(op.getType());
    if (!integers)
      return failure();
    Location loc = op.getLoc();
    Value passThru = op.getPassThru();
    if (passThru)
      passThru = LLVM::BitcastOp::create(rewriter, loc, integers, passThru);
    auto load = LLVM::MaskedLoadOp::create(
        rewriter, loc, integers, op.getData(), op.getMask(), passThru,
        op.getAlignmentAttr(), op.getNontemporalAttr());
    rewriter.replaceOpWithNewOp<LLVM::BitcastOp>(op, op.getType(), load);
    return success();
  }
};

struct LoadAsIntegers : OpRewritePattern<LLVM::LoadOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LLVM::LoadOp op,
                                PatternRewriter &rewriter) const override {
    VectorType integers = asIntegers(op.getType());
    if (!integers)
      return failure();
    auto load = cast<LLVM::LoadOp>(rewriter.clone(*op));
    load.getResult().setType(integers);
    rewriter.replaceOpWithNewOp<LLVM::BitcastOp>(op, op.getType(), load);
    return success();
  }
};

/// A store, masked (`LLVM::MaskedStoreOp`) or not (`LLVM::StoreOp`), of the
/// same bits as i16.
template <typename StoreOp> struct StoreAsIntegers : OpRewritePattern<StoreOp> {
  using OpRewritePattern<StoreOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(StoreOp op,
                                PatternRewriter &rewriter) const override {
    VectorType integers = asIntegers(op.getValue().getType());
    if (!integers)
      return failure();
    Value bits =
        LLVM::BitcastOp::create(rewriter, op.getLoc(), integers, op.getValue());
    rewriter.modifyOpInPlace(op, [&] { op.getValueMutable().assign(bits); });
    return success();
  }
};

struct HalfVectorsAsIntegersPass
    : fff::impl::HalfVectorsAsIntegersBase<HalfVectorsAsIntegersPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MaskedLoadAsIntegers, LoadAsIntegers,
                 StoreAsIntegers<LLVM::MaskedStoreOp>,
                 StoreAsIntegers<LLVM::StoreOp>>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

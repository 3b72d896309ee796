//===- LegalizeKernelMath.cpp - kernel math without libdevice --------------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace fff {
#define GEN_PASS_DEF_LEGALIZEKERNELMATH
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// `scalarOp` applied to `value`, element by element if it is a vector.
Value perElement(PatternRewriter &rewriter, Location loc, Value value,
                 function_ref<Value(Value)> scalarOp) {
  auto vectorType = dyn_cast<VectorType>(value.getType());
  if (!vectorType)
    return scalarOp(value);
  Value result = arith::ConstantOp::create(
      rewriter, loc, rewriter.getZeroAttr(vectorType));
  for (int64_t i = 0; i < vectorType.getNumElements(); ++i) {
    Value element = vector::ExtractOp::create(rewriter, loc, value, i);
    result = vector::InsertOp::create(rewriter, loc, scalarOp(element), result, i);
  }
  return result;
}

/// sqrt(x) as NVPTX's correctly rounded sqrt.rn, which needs no libdevice
/// (math.sqrt and llvm.sqrt both lower to a libdevice call).
Value sqrtRN(PatternRewriter &rewriter, Location loc, Value x) {
  return perElement(rewriter, loc, x, [&](Value scalar) -> Value {
    bool isF64 = scalar.getType().isF64();
    return LLVM::CallIntrinsicOp::create(
               rewriter, loc, scalar.getType(),
               rewriter.getStringAttr(isF64 ? "llvm.nvvm.sqrt.rn.d"
                                            : "llvm.nvvm.sqrt.rn.f"),
               ValueRange{scalar})
        .getResult(0);
  });
}

bool isF32OrF64(Type type) {
  return isa<Float32Type, Float64Type>(getElementTypeOrSelf(type));
}

bool isNarrowFloat(Type type) {
  return isa<Float16Type, BFloat16Type>(getElementTypeOrSelf(type));
}

/// Replaces `op` by `compute` of its operands, in f32 when they are f16 or
/// bf16 (widened before, the result rounded back after).
LogicalResult replaceComputingInF32OrF64(
    Operation *op, PatternRewriter &rewriter,
    function_ref<Value(ValueRange operands, Type type)> compute) {
  Type type = op->getResult(0).getType();
  if (isF32OrF64(type)) {
    rewriter.replaceOp(op, compute(op->getOperands(), type));
    return success();
  }
  if (!isNarrowFloat(type))
    return failure();
  Type wide = rewriter.getF32Type();
  if (auto vectorType = dyn_cast<VectorType>(type))
    wide = vectorType.clone(wide);
  SmallVector<Value> widened;
  for (Value operand : op->getOperands())
    widened.push_back(
        arith::ExtFOp::create(rewriter, op->getLoc(), wide, operand));
  rewriter.replaceOpWithNewOp<arith::TruncFOp>(op, type,
                                               compute(widened, wide));
  return success();
}

struct SqrtToNVPTX : OpRewritePattern<math::SqrtOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::SqrtOp op,
                                PatternRewriter &rewriter) const override {
    return replaceComputingInF32OrF64(
        op, rewriter, [&](ValueRange operands, Type) {
          return sqrtRN(rewriter, op.getLoc(), operands[0]);
        });
  }
};

/// 1 / sqrt.rn(x): each step correctly rounded, as the norm kernels do.
struct RsqrtToNVPTX : OpRewritePattern<math::RsqrtOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::RsqrtOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    return replaceComputingInF32OrF64(
        op, rewriter, [&](ValueRange operands, Type type) -> Value {
          Value one = arith::ConstantOp::create(
              rewriter, loc,
              rewriter.getFloatAttr(getElementTypeOrSelf(type), 1.0));
          if (auto vectorType = dyn_cast<VectorType>(type))
            one = vector::BroadcastOp::create(rewriter, loc, vectorType, one);
          return arith::DivFOp::create(rewriter, loc, one,
                                       sqrtRN(rewriter, loc, operands[0]));
        });
  }
};

/// LLVM's overload suffix for `type`: f32, f64, v4f32, ...
std::string overloadSuffix(Type type) {
  std::string suffix;
  llvm::raw_string_ostream os(suffix);
  if (auto vectorType = dyn_cast<VectorType>(type)) {
    os << "v" << vectorType.getNumElements();
    type = vectorType.getElementType();
  }
  os << (type.isF64() ? "f64" : "f32");
  return suffix;
}

/// `llvm.<name>.<type>`, as a generic intrinsic call: the NVVM conversion
/// would send the LLVM dialect's own ops for these (llvm.intr.floor, ...) to
/// libdevice, where NVPTX has instructions.
Value callIntrinsic(PatternRewriter &rewriter, Location loc, StringRef name,
                    Type type, ValueRange operands) {
  return LLVM::CallIntrinsicOp::create(
             rewriter, loc, type,
             rewriter.getStringAttr("llvm." + name + "." + overloadSuffix(type)),
             operands)
      .getResult(0);
}

/// A math op with an LLVM intrinsic that NVPTX implements in instructions.
template <typename MathOp>
struct ToLLVMIntrinsic : OpRewritePattern<MathOp> {
  ToLLVMIntrinsic(MLIRContext *context, StringRef intrinsic)
      : OpRewritePattern<MathOp>(context, /*benefit=*/2),
        intrinsic(intrinsic.str()) {}

  LogicalResult matchAndRewrite(MathOp op,
                                PatternRewriter &rewriter) const override {
    return replaceComputingInF32OrF64(
        op, rewriter, [&](ValueRange operands, Type type) -> Value {
          return callIntrinsic(rewriter, op.getLoc(), intrinsic, type,
                               operands);
        });
  }

  std::string intrinsic;
};

/// fmod(x, y) = x - trunc(x / y) * y, as NVPTX itself expands `frem`.
struct RemFToNVPTX : OpRewritePattern<arith::RemFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::RemFOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    return replaceComputingInF32OrF64(
        op, rewriter, [&](ValueRange operands, Type type) -> Value {
          Value quotient =
              arith::DivFOp::create(rewriter, loc, operands[0], operands[1]);
          Value whole =
              callIntrinsic(rewriter, loc, "trunc", type, ValueRange{quotient});
          Value multiple =
              arith::MulFOp::create(rewriter, loc, whole, operands[1]);
          return arith::SubFOp::create(rewriter, loc, operands[0], multiple);
        });
  }
};

/// log10(x) = log2(x) * log10(2), log2 having an approximation.
struct Log10ToLog2 : OpRewritePattern<math::Log10Op> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::Log10Op op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type element = getElementTypeOrSelf(op.getType());
    if (!isa<Float32Type, Float16Type, BFloat16Type>(element))
      return failure();
    Value scale = arith::ConstantOp::create(
        rewriter, loc, rewriter.getFloatAttr(element, 0.30102999566398120));
    if (auto vectorType = dyn_cast<VectorType>(op.getType()))
      scale = vector::BroadcastOp::create(rewriter, loc, vectorType, scale);
    Value log2 = math::Log2Op::create(rewriter, loc, op.getOperand());
    rewriter.replaceOpWithNewOp<arith::MulFOp>(op, log2, scale);
    return success();
  }
};

/// Float classification as comparisons: NaN is unordered with itself; an
/// infinity is the one value whose magnitude equals +inf.
template <typename ClassOp, arith::CmpFPredicate predicate, bool magnitude>
struct ClassToCompare : OpRewritePattern<ClassOp> {
  using OpRewritePattern<ClassOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(ClassOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = op.getOperand();
    if (!magnitude) {
      rewriter.replaceOpWithNewOp<arith::CmpFOp>(op, predicate, x, x);
      return success();
    }
    Type type = x.getType();
    auto element = cast<FloatType>(getElementTypeOrSelf(type));
    Value infinity = arith::ConstantOp::create(
        rewriter, loc,
        rewriter.getFloatAttr(element,
                              APFloat::getInf(element.getFloatSemantics())));
    if (auto vectorType = dyn_cast<VectorType>(type))
      infinity = vector::BroadcastOp::create(rewriter, loc, vectorType, infinity);
    Value absolute = math::AbsFOp::create(rewriter, loc, x);
    rewriter.replaceOpWithNewOp<arith::CmpFOp>(op, predicate, absolute,
                                               infinity);
    return success();
  }
};

/// A thread's vectors are a few registers wide. Vector math is unrolled per
/// element where NVPTX has no vector form, and a wider vector (from hostile
/// input, say) would unroll without end; NVPTX's instruction selection
/// aborts on a kernel argument or store of 65536 lanes.
constexpr int64_t kMaxVectorElements = 64;

struct LegalizeKernelMathPass
    : fff::impl::LegalizeKernelMathBase<LegalizeKernelMathPass> {
  void runOnOperation() override {
    SmallVector<gpu::GPUModuleOp> kernels(
        getOperation().getOps<gpu::GPUModuleOp>());
    for (gpu::GPUModuleOp module : kernels)
      if (failed(checkVectorWidths(module)) || failed(rewrite(module)) ||
          failed(checkNoneLeft(module)))
        return signalPassFailure();
  }

  /// Every value of the kernels, and the element types of their memrefs.
  static LogicalResult checkVectorWidths(gpu::GPUModuleOp module) {
    auto tooWide = [](Type type) -> VectorType {
      if (auto memref = dyn_cast<BaseMemRefType>(type))
        type = memref.getElementType();
      auto vectorType = dyn_cast<VectorType>(type);
      return vectorType && vectorType.getNumElements() > kMaxVectorElements
                 ? vectorType
                 : VectorType();
    };
    WalkResult wide = module.walk([&](Operation *op) {
      SmallVector<Type> types(op->getResultTypes());
      for (Region &region : op->getRegions())
        for (Block &block : region)
          llvm::append_range(types, block.getArgumentTypes());
      for (Type type : types)
        if (VectorType vectorType = tooWide(type)) {
          op->emitOpError("on ")
              << vectorType << " in a GPU kernel: vectors of more than "
              << kMaxVectorElements << " elements are not lowered";
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    return failure(wide.wasInterrupted());
  }

  LogicalResult rewrite(gpu::GPUModuleOp module) {
    MLIRContext *context = &getContext();
    auto all = [](StringRef) { return true; };
    // Approximations first, where MLIR has them (they beat the expansions
    // of tanh and the like into exp); then the expansions, whose results
    // the approximations take again.
    RewritePatternSet patterns(context);
    populateMathF32ExpansionPatterns(patterns, all);
    populateMathPolynomialApproximationPatterns(patterns, all);
    math::populateExpansionPatterns(patterns);
    patterns.add<
        ClassToCompare<math::IsNaNOp, arith::CmpFPredicate::UNO, false>,
        ClassToCompare<math::IsInfOp, arith::CmpFPredicate::OEQ, true>,
        ClassToCompare<math::IsFiniteOp, arith::CmpFPredicate::OLT, true>>(
        context);
    patterns.add<SqrtToNVPTX, RsqrtToNVPTX, RemFToNVPTX, Log10ToLog2>(context,
                                                        /*benefit=*/2);
    patterns.add<ToLLVMIntrinsic<math::AbsFOp>>(context, "fabs");
    patterns.add<ToLLVMIntrinsic<math::FmaOp>>(context, "fma");
    patterns.add<ToLLVMIntrinsic<math::FloorOp>>(context, "floor");
    patterns.add<ToLLVMIntrinsic<math::CeilOp>>(context, "ceil");
    patterns.add<ToLLVMIntrinsic<math::TruncOp>>(context, "trunc");
    patterns.add<ToLLVMIntrinsic<math::RoundEvenOp>>(context, "roundeven");
    patterns.add<ToLLVMIntrinsic<math::CopySignOp>>(context, "copysign");
    return applyPatternsGreedily(module, std::move(patterns));
  }

  static LogicalResult checkNoneLeft(gpu::GPUModuleOp module) {
    WalkResult left = module.walk([](Operation *op) {
      if (!isa_and_present<math::MathDialect>(op->getDialect()))
        return WalkResult::advance();
      auto kernel = op->getParentOfType<gpu::GPUFuncOp>();
      op->emitOpError("in GPU kernel '")
          << (kernel ? kernel.getName() : StringRef("?"))
          << "' has no GPU lowering without libdevice (CUDA's math library)";
      return WalkResult::interrupt();
    });
    return failure(left.wasInterrupted());
  }
};

} // namespace

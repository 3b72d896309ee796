//===- LinalgToGPU.cpp - linalg ops in host code -> GPU kernels -*- C++ -*-===//
//
// Runs the pass: each linalg op (and memref.copy) in host code becomes the
// launch of a tiled contraction kernel or a loop-nest kernel
// (LinalgKernels.h), with the strategy KernelStrategy.cpp picks.
//
//===----------------------------------------------------------------------===//

#include "fff/Conversion/Passes.h"

#include "fff/Transforms/IdenticalOps.h"

#include "LinalgKernels.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"

namespace fff {
#define GEN_PASS_DEF_CONVERTLINALGTOGPUKERNELS
#include "fff/Conversion/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// The static product of `op`'s loop extents over `dims`, if they are all
/// static and it fits in int64_t (a product past that is no size a kernel
/// is chosen for; it is treated as unknown).
std::optional<int64_t> staticExtent(linalg::LinalgOp op,
                                    ArrayRef<unsigned> dims) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  std::optional<int64_t> product = 1;
  for (unsigned d : dims) {
    if (ShapedType::isDynamic(ranges[d]))
      return std::nullopt;
    product = llvm::checkedMul(*product, ranges[d]);
    if (!product)
      return std::nullopt;
  }
  return product;
}

/// e.g. matmul_f32_tiled_64x64x16, generic_bf16_thread_per_point: the op it
/// came from, the element type it writes, and its strategy, as a profiler
/// should show them.
std::string kernelName(StringRef opName, linalg::GenericOp op,
                       StringRef strategy) {
  std::string name;
  llvm::raw_string_ostream os(name);
  os << opName << "_";
  if (op.getNumDpsInits() > 0)
    os << getElementTypeOrSelf(op.getDpsInits().front().getType());
  else
    os << "none";
  os << "_" << strategy;
  return name;
}

/// Replaces `op` by the launch of its kernel: `kernel` when set (an
/// identical op's), else one made here, which `kernel` is set to. Fails
/// (with an error on the op) when its body cannot run on the GPU.
LogicalResult lowerToKernel(RewriterBase &rewriter, linalg::LinalgOp op,
                            gpu::GPUFuncOp &kernel) {
  if (!op.hasPureBufferSemantics())
    return op->emitOpError(
        "is still on tensors; convert-linalg-to-gpu-kernels runs after "
        "bufferization");
  std::string opName = op->getName().stripDialect().str();
  linalg::GenericOp generic = dyn_cast<linalg::GenericOp>(*op);
  if (!generic) {
    rewriter.setInsertionPoint(op);
    FailureOr<linalg::GenericOp> generalized =
        linalg::generalizeNamedOp(rewriter, op);
    if (failed(generalized))
      return op->emitOpError("has no generic form to build a GPU kernel from");
    generic = *generalized;
  }
  if (std::string why = whyBodyCannotRunOnGPU(generic); !why.empty())
    return generic->emitOpError("cannot become a GPU kernel: ") << why;

  if (std::optional<ContractionDims> dims = matchTiledContraction(generic)) {
    ContractionStrategy strategy = selectContractionStrategy(
        staticExtent(generic, dims->m), staticExtent(generic, dims->n),
        staticExtent(generic, dims->k));
    std::string tiles = llvm::formatv("tiled_{0}x{1}x{2}", strategy.tileM,
                                      strategy.tileN, strategy.tileK);
    emitContractionKernel(rewriter, generic, *dims, strategy,
                          kernelName(opName, generic, tiles), kernel);
    return success();
  }
  LoopNestStrategy strategy =
      selectLoopNestStrategy(parallelPointsShareOutputs(generic));
  emitLoopNestKernel(
      rewriter, generic, strategy,
      kernelName(opName, generic,
                 strategy.serial ? "serial" : "thread_per_point"),
      kernel);
  return success();
}

struct ConvertLinalgToGPUKernelsPass
    : fff::impl::ConvertLinalgToGPUKernelsBase<ConvertLinalgToGPUKernelsPass> {
  void runOnOperation() override {
    // Host code only: what is inside gpu.modules runs on the device already.
    SmallVector<Operation *> work;
    getOperation()->walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<gpu::GPUModuleOp>(op))
        return WalkResult::skip();
      if (isa<linalg::LinalgOp, memref::CopyOp>(op))
        work.push_back(op);
      return WalkResult::advance();
    });
    // Ops identical to an earlier one (a repeated layer's) share its kernel:
    // found while all of them are still there, before any is lowered.
    SmallVector<unsigned> kindOf = kindsOfIdenticalOps(work);
    SmallVector<gpu::GPUFuncOp> kernelOfKind(work.size());
    IRRewriter rewriter(&getContext());
    for (auto [op, kind] : llvm::zip(work, kindOf)) {
      if (auto copy = dyn_cast<memref::CopyOp>(op)) {
        rewriter.setInsertionPoint(copy);
        op = rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(),
                                                         copy.getTarget());
      }
      if (failed(lowerToKernel(rewriter, cast<linalg::LinalgOp>(op),
                               kernelOfKind[kind])))
        return signalPassFailure();
    }
  }
};

} // namespace

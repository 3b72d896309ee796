//===- LaneEmitter.h - per-lane kernel code for a GPU or twin ---*- C++ -*-===//
//
// What every fff kernel emitter shares. A kernel is written once, as the
// code of one lane of a group of threads that cooperate on a row or token,
// and emitted in one of two forms:
//
//  * GPU: the body of a gpu.func; each thread runs its lane's code once, and
//    a sum over the group is a warp shuffle butterfly (plus shared memory
//    across warps);
//  * CPU twin: host loops in which each phase between two group sums runs
//    for every lane in turn, and each sum replays the GPU's butterfly on a
//    buffer, in the same order. fff-run executes it (`fff-run --gpu-twin`),
//    so the numeric tests check each kernel's algorithm on the CPU.
//
// Also here, for the host side: viewing tensors as buffers. Kernel functions
// and their launches are made with GPUCommon/KernelModule.h.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_LANEEMITTER_H
#define FFF_LIB_CONVERSION_FFFTOGPU_LANEEMITTER_H

#include "../GPUCommon/KernelModule.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"

#include <array>

namespace fff {

/// Marks the outermost loop of each CPU twin, so that the pass can give the
/// twins the same math approximations as the kernels.
constexpr llvm::StringLiteral kGPUTwinAttrName = "fff.gpu_twin";

class LaneEmitter {
protected:
  /// `lanes` threads (a multiple of the warp size) share each group.
  LaneEmitter(mlir::ImplicitLocOpBuilder &b, int64_t lanes)
      : b(b), lanes(lanes) {}

  /// Selects the GPU form: `lane` is this thread's lane in its group;
  /// `sharedPartials`, 32 f32 of workgroup memory, is needed when a group is
  /// more than one warp.
  void useGPULanes(mlir::Value lane, mlir::Value sharedPartials = {});
  /// Selects the twin form.
  void useTwinLanes();
  bool onGPU() const { return !twinBuffers[0]; }

  /// Runs per-lane code: on the GPU for this thread's lane, in the twin for
  /// every lane in turn.
  void forEachLane(llvm::function_ref<void(mlir::Value lane)> body);

  /// The sum over the group's lanes of `partialOf(lane)` (f32), seen by
  /// every lane. On the GPU every lane gets bitwise the same value: each
  /// butterfly step adds the same two operands in every lane of a pair.
  mlir::Value
  groupSum(llvm::function_ref<mlir::Value(mlir::Value lane)> partialOf);
  /// `count` group sums at once, of the partials `partialsOf(lane)` returns.
  /// On the GPU all partials are computed first and the warp butterflies
  /// interleave, so that their loads and shuffles overlap; across warps the
  /// sums share one barrier pair.
  llvm::SmallVector<mlir::Value>
  groupSums(int64_t count,
            llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value lane)>
                partialsOf);

  //===--- Small builders -------------------------------------------------===//

  mlir::Value index(int64_t v);
  mlir::Value f32(double v);
  mlir::Value add(mlir::Value x, mlir::Value y);
  mlir::Value mul(mlir::Value x, mlir::Value y);
  /// The sum of a vector's elements.
  mlir::Value sum(mlir::Value vector);
  /// 1 / sqrt(value) of an f32 scalar, correctly rounded in both forms.
  mlir::Value reciprocalSqrt(mlir::Value value);
  /// f16/bf16 scalars or vectors -> f32; f32 passes through.
  mlir::Value widen(mlir::Value value);
  /// Emits `body` at the end of `region`'s block, before its terminator.
  void inside(mlir::Region &region, llvm::function_ref<void()> body);

  mlir::ImplicitLocOpBuilder &b;
  int64_t lanes;
  mlir::Value gpuLane;

private:
  llvm::SmallVector<mlir::Value>
  gpuWarpSums(llvm::ArrayRef<mlir::Value> values);
  llvm::SmallVector<mlir::Value>
  gpuGroupSums(llvm::ArrayRef<mlir::Value> values);
  mlir::Value
  twinGroupSum(llvm::function_ref<mlir::Value(mlir::Value lane)> partialOf);

  mlir::Value sharedPartials;
  std::array<mlir::Value, 2> twinBuffers;
};

/// Collapses `tensor` to rank `groups.size()` and returns it as a read-only
/// buffer; null stays null.
mlir::Value collapsedBuffer(mlir::ImplicitLocOpBuilder &b, mlir::Value tensor,
                            llvm::ArrayRef<mlir::ReassociationIndices> groups);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_LANEEMITTER_H

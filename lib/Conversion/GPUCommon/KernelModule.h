//===- KernelModule.h - kernel functions and their launches -----*- C++ -*-===//
//
// What every fff kernel emitter does on the host side: create the kernel
// function in `gpu.module @fff_kernels`, with its shape recorded on it, pass
// it its parameters, and launch it.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_GPUCOMMON_KERNELMODULE_H
#define FFF_LIB_CONVERSION_GPUCOMMON_KERNELMODULE_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"

namespace fff {

/// A kernel's parameters: the buffers and sizes a problem has (its non-null
/// fields, given by address). The host launches the kernel with
/// `operands()`; `bind` then points each field at the kernel's argument, so
/// that the same problem struct describes the kernel body.
class KernelParameters {
public:
  explicit KernelParameters(llvm::ArrayRef<mlir::Value *> fields) {
    for (mlir::Value *field : fields)
      if (*field) {
        present.push_back(field);
        values.push_back(*field);
      }
  }
  mlir::ValueRange operands() const { return values; }
  void bind(mlir::gpu::GPUFuncOp kernel) const {
    for (auto [field, argument] : llvm::zip(present, kernel.getArguments()))
      *field = argument;
  }

private:
  llvm::SmallVector<mlir::Value *> present;
  llvm::SmallVector<mlir::Value> values;
};

/// A kernel's shape, as recorded on its gpu.func.
struct KernelSpec {
  /// The function's name, made unique in the kernel module by a suffix.
  std::string name;
  int64_t threadsPerBlock;
  int64_t maxRegisters;
  /// The strategy, for `fff.strategy`.
  mlir::DictionaryAttr strategy;
  /// Workgroup (shared) memory buffers the kernel allocates.
  llvm::SmallVector<mlir::Type> workgroupBuffers;
};

/// Creates the kernel `spec` describes for `op` in `gpu.module @fff_kernels`
/// (made on first use) of `op`'s module, taking `operands`' types as
/// arguments, with `rewriter` inside its empty body.
mlir::gpu::GPUFuncOp createKernel(mlir::RewriterBase &rewriter,
                                  mlir::Operation *op, const KernelSpec &spec,
                                  mlir::ValueRange operands);

/// The kernel that an identical op got earlier with the same `spec` and
/// kernel operand types (a repeated layer's), or null; if found, the caller
/// launches it and emits no body. Identical: the same op, attributes,
/// operand and result types and regions. `op` must be what the kernel is
/// made from as a whole (a fused unit, not the norm in it). Only ops that
/// read nothing from outside but their operands (fff's ops and fused units)
/// are looked up; createKernel records them.
mlir::gpu::GPUFuncOp lookupKernelOfIdenticalOp(mlir::Operation *op,
                                               const KernelSpec &spec,
                                               mlir::ValueRange operands);

/// The kernel `spec` describes for `op`, found (a repeated layer's) or made,
/// its body written by `emitBody` given the thread's and the block's ids;
/// `parameters` are bound to the kernel's arguments first.
mlir::gpu::GPUFuncOp kernelFor(
    mlir::RewriterBase &rewriter, mlir::Operation *op, const KernelSpec &spec,
    const KernelParameters &parameters,
    llvm::function_ref<void(mlir::ImplicitLocOpBuilder &, mlir::gpu::GPUFuncOp,
                            mlir::Value threadId, mlir::Value blockId)>
        emitBody);

/// Drops what createKernel recorded for lookupKernelOfIdenticalOp; a
/// conversion pass calls it once it is done.
void forgetKernelSources(mlir::Operation *root);

/// Launches `kernel` on `blocks` blocks of `threads` threads. No blocks (an
/// empty batch) is allowed: fff's CUDA runtime launches nothing then, where
/// CUDA would reject the launch. Launches are not wrapped in conditions, so
/// that gpu-async-region can chain a function's launches on one stream.
void launchKernel(mlir::ImplicitLocOpBuilder &b, mlir::gpu::GPUFuncOp kernel,
                  mlir::Value blocks, int64_t threads,
                  mlir::ValueRange operands);

/// A workgroup-memory buffer type.
mlir::MemRefType workgroupBufferType(llvm::ArrayRef<int64_t> shape,
                                     mlir::Type elementType);

} // namespace fff

#endif // FFF_LIB_CONVERSION_GPUCOMMON_KERNELMODULE_H

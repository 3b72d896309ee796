//===- KernelModule.cpp - kernel functions and their launches -------------===//

#include "KernelModule.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace fff;

MemRefType fff::workgroupBufferType(ArrayRef<int64_t> shape, Type elementType) {
  return MemRefType::get(
      shape, elementType, MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(elementType.getContext(),
                                 gpu::AddressSpace::Workgroup));
}

/// The gpu.module that holds fff's kernels, created on first use.
static gpu::GPUModuleOp kernelModule(RewriterBase &rewriter, Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  rewriter.getUnitAttr());
  constexpr StringLiteral kName = "fff_kernels";
  if (auto existing = module.lookupSymbol<gpu::GPUModuleOp>(kName))
    return existing;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToEnd(module.getBody());
  return gpu::GPUModuleOp::create(rewriter, module.getLoc(), kName);
}

gpu::GPUFuncOp fff::createKernel(RewriterBase &rewriter, Operation *op,
                                 const KernelSpec &spec, ValueRange operands) {
  gpu::GPUModuleOp module = kernelModule(rewriter, op);
  std::string name = spec.name;
  for (unsigned suffix = 1; module.lookupSymbol(name); ++suffix)
    name = spec.name + "_" + std::to_string(suffix);

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToEnd(module.getBody());
  auto kernel = gpu::GPUFuncOp::create(
      rewriter, op->getLoc(), name,
      rewriter.getFunctionType(operands.getTypes(), TypeRange{}),
      spec.workgroupBuffers);
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                  rewriter.getUnitAttr());
  // Shared memory is otherwise aligned only to its element type, and the
  // kernels access it with 128-bit vectors.
  for (unsigned i = 0; i < spec.workgroupBuffers.size(); ++i)
    kernel.setWorkgroupAttributionAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                                       rewriter.getI64IntegerAttr(16));
  kernel.setKnownBlockSizeAttr(
      rewriter.getDenseI32ArrayAttr({int32_t(spec.threadsPerBlock), 1, 1}));
  kernel->setAttr("fff.strategy", spec.strategy);
  // With the block size known, ptxas would otherwise cap registers for
  // occupancy (48 at 128 threads) and spill what is meant to stay in them.
  kernel->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(),
                  rewriter.getI32IntegerAttr(spec.maxRegisters));
  return kernel;
}

void fff::launchKernel(ImplicitLocOpBuilder &b, gpu::GPUFuncOp kernel,
                       Value blocks, int64_t threads, ValueRange operands) {
  Value one = arith::ConstantIndexOp::create(b, 1);
  gpu::LaunchFuncOp::create(
      b, kernel, gpu::KernelDim3{blocks, one, one},
      gpu::KernelDim3{arith::ConstantIndexOp::create(b, threads), one, one},
      /*dynamicSharedMemorySize=*/Value(), operands);
}

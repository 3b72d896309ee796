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

constexpr StringLiteral kKernelModuleName = "fff_kernels";

/// The gpu.module that holds fff's kernels, created on first use.
static gpu::GPUModuleOp kernelModule(RewriterBase &rewriter, Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  rewriter.getUnitAttr());
  if (auto existing = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName))
    return existing;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToEnd(module.getBody());
  return gpu::GPUModuleOp::create(rewriter, module.getLoc(), kKernelModuleName);
}

/// What a kernel was made from, while its conversion runs.
constexpr StringLiteral kSourceAttrName = "fff.kernel_source";

/// The op, spec and kernel argument types as text, for kernels of ops that
/// read nothing from outside: the op's generic form, with operand and
/// region types, attributes and bodies, and nothing of where the op is.
/// Null for other ops.
static StringAttr kernelSource(Operation *op, const KernelSpec &spec,
                               ValueRange operands) {
  if (op->getNumRegions() != 0 && !op->hasTrait<OpTrait::IsIsolatedFromAbove>())
    return {};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << spec.name << " " << spec.threadsPerBlock << " " << spec.maxRegisters
     << " " << spec.strategy << "\n";
  llvm::interleaveComma(operands.getTypes(), os);
  os << "\n";
  op->print(os, OpPrintingFlags().printGenericOpForm().useLocalScope());
  return StringAttr::get(op->getContext(), text);
}

gpu::GPUFuncOp fff::lookupKernelOfIdenticalOp(Operation *op,
                                              const KernelSpec &spec,
                                              ValueRange operands) {
  auto module = op->getParentOfType<ModuleOp>();
  auto kernels = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
  StringAttr source = kernelSource(op, spec, operands);
  if (!kernels || !source)
    return {};
  for (auto kernel : kernels.getOps<gpu::GPUFuncOp>())
    if (kernel->getAttr(kSourceAttrName) == source)
      return kernel;
  return {};
}

void fff::forgetKernelSources(Operation *root) {
  root->walk(
      [](gpu::GPUFuncOp kernel) { kernel->removeAttr(kSourceAttrName); });
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
  if (StringAttr source = kernelSource(op, spec, operands))
    kernel->setAttr(kSourceAttrName, source);
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

gpu::GPUFuncOp fff::kernelFor(
    RewriterBase &rewriter, Operation *op, const KernelSpec &spec,
    const KernelParameters &parameters,
    function_ref<void(ImplicitLocOpBuilder &, gpu::GPUFuncOp, Value, Value)>
        emitBody) {
  ValueRange operands = parameters.operands();
  if (gpu::GPUFuncOp kernel = lookupKernelOfIdenticalOp(op, spec, operands))
    return kernel;
  gpu::GPUFuncOp kernel = createKernel(rewriter, op, spec, operands);
  parameters.bind(kernel);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(&kernel.front());
  ImplicitLocOpBuilder kb(op->getLoc(), rewriter);
  emitBody(kb, kernel, gpu::ThreadIdOp::create(kb, gpu::Dimension::x),
           gpu::BlockIdOp::create(kb, gpu::Dimension::x));
  gpu::ReturnOp::create(kb);
  return kernel;
}

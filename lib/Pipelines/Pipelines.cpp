//===- Pipelines.cpp - fff's end-to-end pass pipelines ----------*- C++ -*-===//

#include "fff/Pipelines/Pipelines.h"

#include "fff/Conversion/Passes.h"
#include "fff/Dialect/FFF/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

/// Whole-module bufferization; function arguments and results become
/// identity-layout memrefs, the ABI fff-run and AOT callers rely on.
static void addBufferization(OpPassManager &pm) {
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
}

/// Frontend IR -> fff ops, each with its pointwise neighbours in one unit.
static void addRaiseAndFuse(OpPassManager &pm) {
  pm.addPass(fff::createRaiseNorms());
  pm.addPass(fff::createFuseNorms());
}

void fff::buildCPUPipeline(OpPassManager &pm,
                           const CPUPipelineOptions &options) {
  if (options.raise)
    addRaiseAndFuse(pm);
  // fff ops and elementwise tensor math -> linalg / scf on tensors.
  if (options.gpuTwin) {
    ConvertFFFToGPUOptions twins;
    twins.cpuTwin = true;
    pm.addPass(createConvertFFFToGPU(twins));
  }
  pm.addPass(createConvertFFFToLoops());
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());

  // Tensors -> buffers, with deallocation of everything not returned.
  addBufferization(pm);
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(
      createConvertBufferizationToMemRefPass()); // clones -> alloc + copy

  // Buffers and loops -> LLVM.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // Math ops with an LLVM intrinsic go to LLVM first; what remains (erf,
  // tanh) becomes a libm call.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true; // bf16 <-> f32 in integer ops: no libcalls needed
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void fff::buildGPUPipeline(OpPassManager &pm,
                           const GPUPipelineOptions &options) {
  addRaiseAndFuse(pm);
  // One kernel (gpu.func) and its gpu.launch_func per norm, fused unit or
  // tree layer (two for a tree layer: latency and throughput), on buffers
  // viewed from the tensors.
  ConvertFFFToGPUOptions kernels;
  kernels.treeVariant = options.treeVariant;
  kernels.treeStaging = options.treeStaging;
  pm.addPass(createConvertFFFToGPU(kernels));
  pm.addPass(createCanonicalizerPass());

  // Tensors -> device buffers; results become caller-allocated out-params,
  // so no host code touches device memory.
  addBufferization(pm);
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.hoistDynamicAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(createCanonicalizerPass());

  // Upstream: NVVM, PTX as text in gpu.binary, host LLVM.
  gpu::GPUToNVVMPipelineOptions nvvm;
  nvvm.cubinChip = options.chip;
  nvvm.cubinFeatures = options.features;
  nvvm.optLevel = options.optLevel;
  nvvm.cubinFormat = "isa";
  gpu::buildLowerToNVVMPassPipeline(pm, nvvm);
}

void fff::registerFFFPipelines() {
  PassPipelineRegistration<CPUPipelineOptions>(
      "fff-cpu-pipeline",
      "Lower fff and linalg-on-tensors IR to LLVM dialect for the host CPU",
      buildCPUPipeline);
  PassPipelineRegistration<GPUPipelineOptions>(
      "fff-gpu-pipeline",
      "Lower fff ops to CUDA kernels (PTX in gpu.binary) and host LLVM "
      "dialect that launches them",
      buildGPUPipeline);
}

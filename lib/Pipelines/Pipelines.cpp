//===- Pipelines.cpp - fff's end-to-end pass pipelines ----------*- C++ -*-===//

#include "fff/Pipelines/Pipelines.h"

#include "fff/Conversion/Passes.h"
#include "fff/Dialect/FFF/Transforms/Passes.h"
#include "fff/Pipelines/GPUTarget.h"
#include "fff/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Async/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

/// scf to cf without the conversion driver's rollback bookkeeping, which
/// makes each loop's block split cost the size of the function: 2.4 s of a
/// 24-layer BERT stack's host code becomes 0.1 s, with the same output.
static std::unique_ptr<Pass> createControlFlowFromSCF() {
  SCFToControlFlowPassOptions options;
  options.allowPatternRollback = false;
  return createSCFToControlFlowPass(options);
}

/// Frontend IR (first checked for what upstream passes would crash on) ->
/// fff ops, each with its pointwise neighbours in one unit, and run-time
/// checks of the extents the ops tie together. The checks go
/// in before fusion, so that they read the extents of the values fusion
/// moves into units.
static void addFrontEnd(OpPassManager &pm, bool raise) {
  pm.addPass(fff::createCheckInput());
  if (raise)
    pm.addPass(fff::createRaiseNorms());
  pm.addPass(fff::createInsertShapeChecks());
  if (raise)
    pm.addPass(fff::createFuseNorms());
}

/// Whole-module bufferization; function arguments and results become
/// identity-layout memrefs, the ABI fff-run and AOT callers rely on. The
/// callers' buffers are never written, and every result gets its own.
static void addBufferization(OpPassManager &pm) {
  pm.addPass(fff::createReadOnlyArguments());
  pm.addPass(fff::createFreshResultBuffers());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
}

/// The norms' row loops and the tree layers' token loops (scf.parallel)
/// become tasks of the async runtime (fff's, lib/Runtime/AsyncRuntime.cpp),
/// one contiguous block of iterations per thread, for `threads` threads (0:
/// one per core). Each row or token is computed by one task whatever the split,
/// so the results do not depend on the thread count.
static void addRowThreads(OpPassManager &pm, int64_t threads) {
  if (threads == 1)
    return;
  fff::BlockParallelLoopsOptions blocks;
  blocks.threads = threads;
  pm.addPass(fff::createBlockParallelLoops(blocks));
  AsyncParallelForPassOptions parallel;
  parallel.asyncDispatch = true;
  parallel.numWorkerThreads = threads == 0 ? -1 : int32_t(threads);
  // A row is already thousands of operations' work.
  parallel.minTaskSize = 1;
  pm.addPass(createAsyncParallelForPass(parallel));
  pm.addPass(createAsyncToAsyncRuntimePass());
  pm.addPass(createAsyncRuntimeRefCountingPass());
  pm.addPass(createAsyncRuntimeRefCountingOptPass());
  pm.addPass(createConvertAsyncToLLVMPass());
}

void fff::buildCPUPipeline(OpPassManager &pm,
                           const CPUPipelineOptions &options) {
  addFrontEnd(pm, options.raise);
  // fff ops and elementwise tensor math -> linalg / scf on tensors.
  if (options.gpuTwin) {
    ConvertFFFToGPUOptions twins;
    twins.cpuTwin = true;
    pm.addPass(createConvertFFFToGPU(twins));
  }
  // Each distinct op is lowered once, however many layers repeat it. (Not
  // with out-params: they would turn the outlined functions' results, whose
  // dynamic extents only the callee knows, into out-params as well.)
  if (!options.outParams)
    pm.addPass(fff::createOutlineOps());
  if (!options.reference) {
    // Elementwise tensor work as linalg ops, each maximal group of
    // producers and consumers fused into one: a norm computes the one that
    // feeds it alone as it reads its rows, a tree layer applies the one
    // that alone reads its result as it writes its rows, and the rest
    // become vector loops of their own.
    pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
    pm.addPass(createLinalgElementwiseOpFusionPass());
    // Fusion and the shape checks read extents off the results of ops
    // (tensor.dim), which then have readers besides the op that consumes
    // them. Read off their operands instead, the results have one reader
    // again, and a second round fuses them: a chain such as dx's cast and
    // the residual add after a norm's backward becomes one generic.
    pm.addPass(memref::createResolveShapedTypeResultDimsPass());
    pm.addPass(createLinalgElementwiseOpFusionPass());
    ConvertFFFNormsToVectorOptions vectors;
    vectors.vectorBits = options.vectorBits;
    vectors.integerBf16 = options.integerBf16;
    pm.addPass(createConvertFFFNormsToVector(vectors));
    ConvertFFFTreesToVectorOptions trees;
    trees.vectorBits = options.vectorBits;
    trees.integerBf16 = options.integerBf16;
    pm.addPass(createConvertFFFTreesToVector(trees));
    ConvertElementwiseToVectorOptions elementwise;
    elementwise.vectorBits = options.vectorBits;
    elementwise.outline = !options.outParams;
    pm.addPass(createConvertElementwiseToVector(elementwise));
  }
  pm.addPass(createConvertFFFToLoops());
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());

  // Tensors -> buffers, with deallocation of everything not returned; the
  // caller's buffers and every allocation are checked.
  addBufferization(pm);
  if (options.outParams) {
    // Results become trailing caller-allocated buffers, as on the GPU. As
    // there, the arguments are checked first, with ties between each
    // result's allocation and its extents, which then hold for the
    // out-param that replaces it; the checks below cover the out-params.
    pm.addPass(createCheckEntryBuffers());
    bufferization::BufferResultsToOutParamsPassOptions outParams;
    outParams.hoistStaticAllocs = true;
    outParams.hoistDynamicAllocs = true;
    outParams.modifyPublicFunctions = true;
    pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
    pm.addPass(createCanonicalizerPass());
  }
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(
      createConvertBufferizationToMemRefPass()); // clones -> alloc + copy
  pm.addPass(createCheckAllocations());
  pm.addPass(createCheckEntryBuffers());
  addRowThreads(pm, options.threads);

  // Buffers and loops -> LLVM.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // Activations become inline polynomials, as in the GPU kernels; the
  // reference keeps libm's.
  if (!options.reference)
    pm.addPass(createApproximateMath());
  // Math ops with an LLVM intrinsic go to LLVM first; what remains (erf,
  // tanh in the reference) becomes a libm call.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  // bf16 arithmetic (a residual add or a mask in bf16) in f32, rounded to
  // bf16 after each op, without LLVM's __truncsfbf2 libcall.
  pm.addPass(createBf16ArithInF32());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true; // bf16 <-> f32 in integer ops: no libcalls needed
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createControlFlowFromSCF());
  pm.addPass(createLowerRuntimeChecks());
  // The norms' and tree layers' vector code: masks and reductions need the
  // vector dialect's own lowering patterns, which the generic conversion
  // does not run; AVX512-BF16's rounding is an x86vector op.
  ConvertVectorToLLVMPassOptions vectorToLLVM;
  vectorToLLVM.x86Vector = true;
  pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  // 16-bit float vectors moved as i16: x86 without AVX512-FP16/BF16
  // selects no masked load or store of them, and scalarizes a select of
  // them, which LLVM's combines make of a bf16 rounding's NaN select.
  pm.addPass(createHalfVectorsAsIntegers());
  // Large buffers (results, above all) on huge pages: one page fault per 2
  // MiB instead of per 4 KiB; or from the host's buffer cache, whose pages
  // a previous call already faulted in.
  if (options.hugePages || options.bufferCache) {
    if (options.hugePages)
      pm.addPass(createHugePageAllocations());
    else
      pm.addPass(createRuntimeAllocations());
    FinalizeMemRefToLLVMConversionPassOptions memrefs;
    memrefs.useGenericFunctions = true;
    pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefs));
  }
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  VerifyLoweredOptions verify;
  verify.pipelineName = "fff-cpu-pipeline";
  pm.addPass(createVerifyLowered(verify));
}

llvm::Error fff::buildGPUPipeline(OpPassManager &pm,
                                  const GPUPipelineOptions &options) {
  llvm::Expected<GPUTarget> target =
      resolveGPUTarget(options.chip, options.features);
  if (!target)
    return target.takeError();

  addFrontEnd(pm, /*raise=*/true);
  // One kernel (gpu.func) and its gpu.launch_func per norm, fused unit or
  // tree layer (two for a tree layer: latency and throughput), on buffers
  // viewed from the tensors; a repeated layer's kernels are dropped at once,
  // before any later pass spends time on them.
  ConvertFFFToGPUOptions kernels;
  kernels.treeVariant = options.treeVariant;
  kernels.treeStaging = options.treeStaging;
  pm.addPass(createConvertFFFToGPU(kernels));
  pm.addPass(createDedupeKernels());
  // The rest of the module's tensor work as linalg ops, each maximal group
  // of elementwise producers and consumers fused into one op, which becomes
  // one kernel below.
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createLinalgElementwiseOpFusionPass());
  pm.addPass(createCanonicalizerPass());

  // Tensors -> buffers; results become caller-allocated out-params. The
  // caller's buffers are checked before any launch: the arguments first,
  // with ties between each result's allocation and its extents, which then
  // hold for the out-param that replaces it; then the out-params
  // themselves. The kernels' 128-bit accesses need 16-byte aligned buffers.
  addBufferization(pm);
  CheckEntryBuffersOptions entryChecks;
  entryChecks.alignment = 16;
  pm.addPass(createCheckEntryBuffers(entryChecks));
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.hoistDynamicAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(createFreshResultBuffers());
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(createCheckEntryBuffers(entryChecks));
  pm.addPass(createCanonicalizerPass());

  // What host code still computes on buffers (linalg ops, copies) becomes
  // kernels, and identical kernels (repeated layers) become one; then host
  // code only allocates, frees and launches, and its buffers move to the
  // device. Kernel math avoids libdevice.
  pm.addPass(createConvertLinalgToGPUKernels());
  pm.addPass(createDedupeKernels());
  pm.addPass(createDeviceBuffers());
  pm.addPass(createLegalizeKernelMath());
  pm.addPass(createCanonicalizerPass());
  // Each function's allocations, launches and frees queue on one stream,
  // which the function waits for once, at its end; run-time checks (each a
  // point where the queue is waited for) break the chain, so the
  // allocation checks go in after it.
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());
  pm.addPass(createCheckAllocations());

  // Host control flow, with failed checks returning early, then the host
  // and kernel code to LLVM and NVVM (the steps of upstream's
  // gpu-lower-to-nvvm-pipeline, which has no place for the checks).
  pm.addPass(createConvertVectorToSCFPass());
  pm.addPass(createControlFlowFromSCF());
  pm.addPass(createLowerRuntimeChecks());
  pm.addPass(createConvertNVVMToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  GpuNVVMAttachTargetOptions nvvmTarget;
  nvvmTarget.chip = target->chip;
  nvvmTarget.features = target->features;
  nvvmTarget.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(nvvmTarget));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  OpPassManager &kernelCode = pm.nest<gpu::GPUModuleOp>();
  kernelCode.addPass(createStripDebugInfoPass());
  kernelCode.addPass(createConvertGpuOpsToNVVMOps());
  kernelCode.addPass(LLVM::createNVVMOptimizeForTargetPass());
  kernelCode.addPass(createCanonicalizerPass());
  kernelCode.addPass(createCSEPass());
  kernelCode.addPass(createReconcileUnrealizedCastsPass());

  // Launches -> fff's runtime calls; kernels -> PTX text in gpu.binary.
  // Constants read by kernels get device copies.
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createUploadDeviceConstants());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  VerifyLoweredOptions verify;
  verify.allowGPULaunches = true;
  verify.pipelineName = "fff-gpu-pipeline";
  pm.addPass(createVerifyLowered(verify));
  return llvm::Error::success();
}

/// Parses a pipeline's options from `text`; a bad option is an error through
/// `errorHandler` (which a caller such as fff's C API reports as one line),
/// not lines that the option parser prints on stderr beside a bare failure.
static LogicalResult
parsePipelineOptions(StringRef pipeline, StringRef text,
                     detail::PassOptions &options,
                     function_ref<LogicalResult(const Twine &)> errorHandler) {
  std::string message;
  llvm::raw_string_ostream errors(message);
  if (succeeded(options.parseFromString(text, errors)))
    return success();
  // The option parser reports an unknown option to `errors`, behind a
  // "<Pass-Options-Parser>: " that names no pipeline; a bad value it prints
  // on stderr itself (LLVM's cl), leaving `errors` empty.
  StringRef reason = StringRef(message).trim();
  size_t prefix = reason.find(": ");
  if (prefix != StringRef::npos)
    reason = reason.drop_front(prefix + 2);
  if (reason.empty())
    return errorHandler("bad option value for " + pipeline + " in '" + text +
                        "'");
  return errorHandler("bad option for " + pipeline + ": " + reason);
}

/// Registers pipeline `name`, whose options are parsed as
/// parsePipelineOptions does and whose builder may fail (an llvm::Error,
/// reported through the handler). The typed helper
/// (PassPipelineRegistration<Options>) can neither report a bad option nor
/// fail: a bad option or chip must be an error, not an abort inside LLVM.
template <typename Options>
static void registerPipeline(
    StringRef name, StringRef description,
    std::function<llvm::Error(OpPassManager &, const Options &)> build) {
  registerPassPipeline(
      name, description,
      [name, build](OpPassManager &pm, StringRef text,
                    function_ref<LogicalResult(const Twine &)> errorHandler) {
        Options options;
        if (failed(parsePipelineOptions(name, text, options, errorHandler)))
          return failure();
        if (llvm::Error error = build(pm, options))
          return errorHandler(llvm::toString(std::move(error)));
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> handler) {
        handler(Options());
      });
}

void fff::registerFFFPipelines() {
  registerPipeline<CPUPipelineOptions>(
      "fff-cpu-pipeline",
      "Lower fff and linalg-on-tensors IR to LLVM dialect for the host CPU",
      [](OpPassManager &pm, const CPUPipelineOptions &options) {
        buildCPUPipeline(pm, options);
        return llvm::Error::success();
      });
  registerPipeline<GPUPipelineOptions>(
      "fff-gpu-pipeline",
      "Lower fff ops to CUDA kernels (PTX in gpu.binary) and host LLVM "
      "dialect that launches them",
      buildGPUPipeline);
}

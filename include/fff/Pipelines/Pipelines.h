//===- Pipelines.h - fff's end-to-end pass pipelines ------------*- C++ -*-===//

#ifndef FFF_PIPELINES_PIPELINES_H
#define FFF_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace fff {

/// Options of `--fff-gpu-pipeline`.
struct GPUPipelineOptions : mlir::PassPipelineOptions<GPUPipelineOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("GPU architecture to compile for"),
                           llvm::cl::init("sm_90")};
  Option<std::string> features{
      *this, "features",
      llvm::cl::desc("NVPTX features, e.g. the PTX ISA version (+ptx80); "
                     "by default PTX 8.0, or the chip's minimum if newer"),
      llvm::cl::init("")};
  Option<int> optLevel{*this, "opt-level",
                       llvm::cl::desc("LLVM optimization level for kernels"),
                       llvm::cl::init(3)};
  Option<std::string> treeVariant{
      *this, "tree-variant",
      llvm::cl::desc("Tree kernels: auto (latency and throughput, picked by "
                     "batch size), latency or throughput"),
      llvm::cl::init("auto")};
  Option<bool> treeStaging{
      *this, "tree-staging",
      llvm::cl::desc("Stage the top tree levels in shared memory in "
                     "throughput kernels"),
      llvm::cl::init(true)};
};

/// Options of `--fff-cpu-pipeline`.
struct CPUPipelineOptions : mlir::PassPipelineOptions<CPUPipelineOptions> {
  Option<bool> raise{
      *this, "raise",
      llvm::cl::desc("Raise decomposed norms to fff ops and fuse their "
                     "pointwise neighbours first"),
      llvm::cl::init(true)};
  Option<bool> gpuTwin{
      *this, "gpu-twin",
      llvm::cl::desc("Run norms as the CPU twins of their GPU kernels, to "
                     "check the kernels' arithmetic without a GPU"),
      llvm::cl::init(false)};
  Option<int64_t> vectorBits{
      *this, "vector-bits",
      llvm::cl::desc("Vector register width the norms' and tree layers' "
                     "loops fill: 128, 256 or 512; 0 takes this host's "
                     "widest"),
      llvm::cl::init(0)};
  Option<bool> integerBf16{
      *this, "integer-bf16",
      llvm::cl::desc("Round f32 results to bf16 with integer operations "
                     "even where this host has AVX512-BF16 (the same bits "
                     "either way)"),
      llvm::cl::init(false)};
  Option<int64_t> threads{
      *this, "threads",
      llvm::cl::desc("Threads the norms' rows and tree layers' tokens are "
                     "split across: 0 takes all the cores of the machine "
                     "that runs the code (MLIR's async runtime, "
                     "libmlir_async_runtime.so, must then be loaded); 1 runs "
                     "them in the calling thread"),
      llvm::cl::init(0)};
  Option<bool> outParams{
      *this, "out-params",
      llvm::cl::desc("Public functions write their results into trailing "
                     "caller-allocated buffers, as --fff-gpu-pipeline's do, "
                     "instead of returning buffers they allocate"),
      llvm::cl::init(false)};
  Option<bool> hugePages{
      *this, "huge-pages",
      llvm::cl::desc("Put buffers of 32 MiB or more on transparent huge "
                     "pages (fff-huge-page-allocations): a fresh result "
                     "then faults once per 2 MiB instead of once per 4 KiB. "
                     "Off by default: on this project's VM, whose balloon "
                     "hands freed memory back to the host, it measured "
                     "faster at times and slower on average"),
      llvm::cl::init(false)};
  Option<bool> bufferCache{
      *this, "buffer-cache",
      llvm::cl::desc("Allocate buffers from the host's buffer cache "
                     "(fff-runtime-allocations): calls MLIR's generic "
                     "allocation functions, which fff-run and the Python "
                     "package bind to fffHostAlloc and fffHostFree, so that "
                     "a buffer freed is reused, its pages already mapped, "
                     "by the next call. Results are then freed with "
                     "fffHostFree. huge-pages, where set, allocates instead"),
      llvm::cl::init(false)};
  Option<bool> reference{
      *this, "reference",
      llvm::cl::desc("Lower norms and tree layers with the scalar "
                     "reference lowering (convert-fff-to-loops) instead of "
                     "vector code, and keep libm's activations"),
      llvm::cl::init(false)};
};

/// Lowers a module at fff or linalg-on-tensors level to LLVM-dialect IR for
/// the host CPU (`--fff-cpu-pipeline`), after raising and fusion. Public
/// functions keep tensor arguments as identity-layout memrefs; their results
/// are freshly allocated buffers the caller owns. A failed run-time check
/// (a buffer or extent that contradicts the IR, an allocation that fails)
/// calls `fffReportCheckFailure(message)` and returns poison results.
void buildCPUPipeline(mlir::OpPassManager &pm,
                      const CPUPipelineOptions &options = {});

/// Lowers a module whose computation is fff ops to host LLVM-dialect code
/// that launches one kernel per op or fused unit, with the kernels compiled
/// to PTX and embedded as text in `gpu.binary` ops (`--fff-gpu-pipeline`).
/// Fails, adding nothing to `pm`, for a chip or PTX features the NVPTX
/// backend cannot compile for.
///
/// Functions take device buffers: tensor arguments become memrefs, and
/// results become trailing out-parameters the caller allocates. Each public
/// function checks the buffers it is given and the extents of its ops, and
/// reports a failed check through `fffGetLastError()` instead of launching.
llvm::Error buildGPUPipeline(mlir::OpPassManager &pm,
                             const GPUPipelineOptions &options);

/// Registers fff's pipelines under their command-line names.
void registerFFFPipelines();

} // namespace fff

#endif // FFF_PIPELINES_PIPELINES_H

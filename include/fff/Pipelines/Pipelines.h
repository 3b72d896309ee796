//===- Pipelines.h - fff's end-to-end pass pipelines ------------*- C++ -*-===//

#ifndef FFF_PIPELINES_PIPELINES_H
#define FFF_PIPELINES_PIPELINES_H

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace fff {

/// Lowers a module at fff or linalg-on-tensors level to LLVM-dialect IR for
/// the host CPU (`--fff-cpu-pipeline`). Public functions keep tensor
/// arguments as identity-layout memrefs; their results are freshly allocated
/// buffers the caller owns.
void buildCPUPipeline(mlir::OpPassManager &pm);

/// Registers fff's pipelines under their command-line names.
void registerFFFPipelines();

} // namespace fff

#endif // FFF_PIPELINES_PIPELINES_H

//===- Passes.td - fff conversion passes -------------------*- tablegen -*-===//

#ifndef FFF_CONVERSION_PASSES_TD
#define FFF_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertFFFToLoops : Pass<"convert-fff-to-loops"> {
  let summary = "Lower fff ops to linalg reductions and scf loops (CPU reference)";
  let description = [{
    Gives every fff op an executable lowering that runs on any host, which
    is also the numeric oracle for the GPU kernels:

    * `fff.layer_norm` / `fff.rms_norm` become `linalg.generic` ops on
      tensors: f32 reductions over the normalized dims (two-pass mean and
      variance), then one elementwise op that normalizes, applies the affine
      parameters and casts back to the input element type;
    * `fff.tree_ffn` / `fff.leaf_tree_ffn` become `scf.for` loops over
      buffers (`bufferization.to_buffer` of the operands, a fresh buffer for
      the result), because each row's path through the tree is data
      dependent. Accumulation is in f32.

    All other ops are left alone. Run before bufferization.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def ConvertFFFToGPU : Pass<"convert-fff-to-gpu"> {
  let summary = "Lower fff norms to one gpu.launch kernel each";
  let description = [{
    Replaces each `fff.layer_norm` and `fff.rms_norm` by one `gpu.launch`
    over a grid of rows. The kernel strategy (warp per row, block per row,
    or looped) is chosen from the static row size and element type by
    `selectNormStrategy` and recorded on the launch as `fff.strategy`; the
    launch names its kernel `<op>_<strategy>` for kernel outlining.

    Operands are viewed as a [rows, row size] matrix (`tensor.collapse_shape`
    then `bufferization.to_buffer`); results are fresh buffers. Run before
    bufferization.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::vector::VectorDialect",
  ];
}

#endif // FFF_CONVERSION_PASSES_TD

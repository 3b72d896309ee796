//===- SublayerToGPU.h - a norm and a tree layer in one kernel --*- C++ -*-===//

#ifndef FFF_LIB_CONVERSION_FFFTOGPU_SUBLAYERTOGPU_H
#define FFF_LIB_CONVERSION_FFFTOGPU_SUBLAYERTOGPU_H

#include "TreeFFNToGPU.h"
#include "fff/Dialect/FFF/IR/FFFOps.h"

namespace fff {

/// Why the fused unit `unit`, which holds a tree layer, cannot become one
/// kernel, or "" when it can.
std::string whySublayerCannotBeOneKernel(FusionOp unit,
                                         const TreeKernelOptions &options);

/// The pattern lowering a fused unit with a tree layer to one kernel (or
/// its CPU twin) per tree variant.
void populateSublayerToGPUPatterns(mlir::RewritePatternSet &patterns,
                                   const TreeKernelOptions &options);

/// Inlines every sublayer unit under `root` that cannot be one kernel, with
/// a remark that says why, so that its tree layer gets its own kernel; its
/// norm is fused with its pointwise neighbours on its own.
void separateSublayersWithoutKernel(mlir::Operation *root,
                                    const TreeKernelOptions &options);

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOGPU_SUBLAYERTOGPU_H

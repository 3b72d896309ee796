//===- InitFFF.cpp - registration entry points for embedders ---*- C++ -*-===//

#include "fff/InitFFF.h"

#include "fff/Conversion/Passes.h"
#include "fff/Dialect/FFF/IR/FFFDialect.h"
#include "fff/Dialect/FFF/Transforms/Passes.h"
#include "fff/Pipelines/Pipelines.h"
#include "fff/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"

void fff::registerFFFDialects(mlir::DialectRegistry &registry) {
  registry.insert<fff::FFFDialect, mlir::arith::ArithDialect,
                  mlir::bufferization::BufferizationDialect,
                  mlir::func::FuncDialect, mlir::linalg::LinalgDialect,
                  mlir::LLVM::LLVMDialect, mlir::math::MathDialect,
                  mlir::memref::MemRefDialect, mlir::scf::SCFDialect,
                  mlir::tensor::TensorDialect>();
}

void fff::registerFFFPasses() {
  registerFFFConversionPasses();
  registerFFFTransformsPasses();
  registerFFFGenericPasses();
  registerFFFPipelines();
}

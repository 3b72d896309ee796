//===- fff-opt.cpp - mlir-opt with fff's dialect and passes -----*- C++ -*-===//

#include "fff/InitFFF.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  fff::registerFFFPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates kernels to LLVM IR, then PTX.
  mlir::registerAllToLLVMIRTranslations(registry);
  fff::registerFFFDialects(registry);

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "fff optimizer driver\n", registry));
}

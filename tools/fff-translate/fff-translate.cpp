//===- fff-translate.cpp - translations out of fff's IR ---------*- C++ -*-===//
//
// mlir-translate with fff's translations:
//
//   --fff-extract-ptx   prints the PTX of every kernel in a module after
//                       --fff-gpu-pipeline (each gpu.binary's objects).
//
//===----------------------------------------------------------------------===//

#include "fff/Target/PTX/ExtractPTX.h"
#include "mlir/InitAllTranslations.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  mlir::registerAllTranslations();
  fff::registerExtractPTXTranslation();
  return failed(mlir::mlirTranslateMain(argc, argv, "fff translation driver"));
}

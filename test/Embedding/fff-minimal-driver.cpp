//===- fff-minimal-driver.cpp - a tool that registers only fff -----------===//
//
// What an embedder's tool looks like when it calls fff's registration and
// nothing else (no registerAll* function): `fff-minimal-driver opt ...` is
// an mlir-opt, `fff-minimal-driver translate ...` an mlir-translate. The
// tests run both pipelines and --fff-extract-ptx through it and compare
// with fff-opt, which registers everything.
//
//===----------------------------------------------------------------------===//

#include "fff/InitFFF.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

#include <cstring>

int main(int argc, char **argv) {
  if (argc < 2 || (std::strcmp(argv[1], "opt") != 0 &&
                   std::strcmp(argv[1], "translate") != 0)) {
    llvm::errs() << "usage: fff-minimal-driver opt|translate ...\n";
    return 2;
  }
  bool translate = std::strcmp(argv[1], "translate") == 0;
  // The subcommand takes the place of the program name.
  --argc;
  ++argv;

  fff::registerFFFPasses();
  if (translate)
    return mlir::failed(mlir::mlirTranslateMain(argc, argv, "fff translate"));
  mlir::DialectRegistry registry;
  fff::registerFFFDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "fff opt", registry));
}

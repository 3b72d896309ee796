//===- fff-opt.cpp - mlir-opt with fff's dialect and passes -----*- C++ -*-===//

#include "fff/InitFFF.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/ADT/STLExtras.h"

#include <vector>

/// Errors are one line plus the source line they point at: unless asked,
/// fff-opt does not attach a dump of the failing op to each diagnostic.
static std::vector<char *> withConciseDiagnostics(int argc, char **argv) {
  static char concise[] = "--mlir-print-op-on-diagnostic=false";
  std::vector<char *> args(argv, argv + argc);
  bool chosen = llvm::any_of(args, [](llvm::StringRef arg) {
    return arg.contains("mlir-print-op-on-diagnostic");
  });
  if (!chosen)
    args.insert(args.begin() + 1, concise);
  return args;
}

int main(int argc, char **argv) {
  std::vector<char *> args = withConciseDiagnostics(argc, argv);
  mlir::registerAllPasses();
  fff::registerFFFPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates kernels to LLVM IR, then PTX.
  mlir::registerAllToLLVMIRTranslations(registry);
  fff::registerFFFDialects(registry);

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(static_cast<int>(args.size()), args.data(),
                        "fff optimizer driver\n", registry));
}

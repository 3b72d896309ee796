//===- fff-translate.cpp - translations out of fff's IR ---------*- C++ -*-===//
//
// mlir-translate with fff's translations:
//
//   --fff-extract-ptx   prints the PTX of every kernel in a module after
//                       --fff-gpu-pipeline (each gpu.binary's objects).
//
//===----------------------------------------------------------------------===//

#include "fff/InitFFF.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllTranslations.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

using namespace mlir;

namespace {

LogicalResult extractPTX(Operation *module, raw_ostream &os) {
  unsigned kernels = 0;
  WalkResult result = module->walk([&](gpu::BinaryOp binary) {
    for (Attribute attr : binary.getObjects()) {
      auto object = cast<gpu::ObjectAttr>(attr);
      if (object.getFormat() != gpu::CompilationTarget::Assembly) {
        binary.emitError("holds a binary object, not PTX text; compile with "
                         "--fff-gpu-pipeline (which embeds PTX)");
        return WalkResult::interrupt();
      }
      os << "// ---- gpu.binary @" << binary.getSymName() << " ("
         << object.getTarget() << ")\n"
         << object.getObject().getValue() << "\n";
      ++kernels;
    }
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  if (kernels == 0)
    return module->emitError("no gpu.binary with PTX in the module; run "
                             "--fff-gpu-pipeline first");
  return success();
}

} // namespace

int main(int argc, char **argv) {
  registerAllTranslations();
  TranslateFromMLIRRegistration extract(
      "fff-extract-ptx", "print the PTX of every kernel in the module",
      extractPTX, [](DialectRegistry &registry) {
        registerAllDialects(registry);
        registerAllExtensions(registry);
        fff::registerFFFDialects(registry);
      });
  return failed(mlirTranslateMain(argc, argv, "fff translation driver"));
}

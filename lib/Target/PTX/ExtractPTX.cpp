//===- ExtractPTX.cpp - the PTX of a compiled module's kernels ------------===//

#include "fff/Target/PTX/ExtractPTX.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/Translation.h"

using namespace mlir;

LogicalResult fff::extractPTX(Operation *module, raw_ostream &os) {
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

void fff::registerExtractPTXTranslation() {
  static TranslateFromMLIRRegistration registration(
      "fff-extract-ptx", "print the PTX of every kernel in the module",
      extractPTX, [](DialectRegistry &registry) {
        // What the GPU pipeline's output holds.
        registry
            .insert<gpu::GPUDialect, LLVM::LLVMDialect, NVVM::NVVMDialect>();
      });
}

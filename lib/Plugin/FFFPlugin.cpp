//===- FFFPlugin.cpp - fff as a plugin for mlir-opt -------------*- C++ -*-===//
//
// FFFPlugin.so is both a dialect plugin and a pass plugin for an mlir-opt
// that links libMLIR.so, as Debian's does:
//
//   mlir-opt --load-dialect-plugin=FFFPlugin.so --load-pass-plugin=FFFPlugin.so
//   \
//     --pass-pipeline='builtin.module(fff-cpu-pipeline)' in.mlir
//
// It shares that libMLIR.so, and so MLIR's registries, with the tool.
//
//===----------------------------------------------------------------------===//

#include "fff/InitFFF.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"

extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "FFF", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            fff::registerFFFDialects(*registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "FFF", LLVM_VERSION_STRING,
          []() { fff::registerFFFPasses(); }};
}

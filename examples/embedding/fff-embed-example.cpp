//===- fff-embed-example.cpp - a compiler that embeds fff -------*- C++ -*-===//
//
// Reads an MLIR module, runs one of fff's pipelines on it (any textual pass
// pipeline, in fact) and prints the result. It registers fff and nothing
// else: fff's two registration calls bring every dialect, external model and
// translation its pipelines need.
//
//   fff-embed-example --pipeline fff-gpu-pipeline{chip=sm_90} in.mlir
//
//===----------------------------------------------------------------------===//

#include "fff/InitFFF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

static cl::opt<std::string> input(cl::Positional, cl::desc("<input.mlir>"),
                                  cl::init("-"));
static cl::opt<std::string> pipeline("pipeline",
                                     cl::desc("The pass pipeline to run"),
                                     cl::init("fff-cpu-pipeline"));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "a compiler that embeds fff\n");

  fff::registerFFFPasses();
  mlir::DialectRegistry registry;
  fff::registerFFFDialects(registry);
  mlir::MLIRContext context(registry);

  llvm::SourceMgr sources;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(input, sources, &context);
  if (!module)
    return 1;
  mlir::PassManager pm(&context);
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm, llvm::errs())) ||
      mlir::failed(pm.run(*module)))
    return 1;
  module->print(llvm::outs());
  llvm::outs() << "\n";
  return 0;
}

//===- InitFFF.cpp - registration entry points for embedders ---*- C++ -*-===//

#include "fff/InitFFF.h"

#include "fff/Dialect/FFF/IR/FFFDialect.h"
#include "mlir/IR/DialectRegistry.h"

void fff::registerFFFDialects(mlir::DialectRegistry &registry) {
  registry.insert<fff::FFFDialect>();
}

void fff::registerFFFPasses() {}

//===- Compiler.cpp - fff's registration and pipelines, C API -------------===//

#include "fff-c/Compiler.h"
#include "fff-c/Dialect/FFF.h"

#include "fff/Dialect/FFF/IR/FFFDialect.h"
#include "fff/InitFFF.h"
#include "fff/Target/PTX/ExtractPTX.h"
#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/CAPI/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/JSON.h"

using namespace mlir;

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(FFF, fff, fff::FFFDialect)

namespace {

/// Collects the first error diagnostic as one line ("file:line:col: message"),
/// and keeps every diagnostic off stderr while it lives.
class FirstError {
public:
  explicit FirstError(MLIRContext *context)
      : handler(context, [this](Diagnostic &diagnostic) {
          if (diagnostic.getSeverity() == DiagnosticSeverity::Error &&
              message.empty()) {
            llvm::raw_string_ostream os(message);
            if (auto loc = dyn_cast<FileLineColLoc>(diagnostic.getLocation()))
              os << loc.getFilename().getValue() << ":" << loc.getLine() << ":"
                 << loc.getColumn() << ": ";
            os << diagnostic.str();
          }
          return success();
        }) {}

  /// Reports `fallback` when no diagnostic said why.
  void report(MlirStringCallback onError, void *userData,
              llvm::StringRef fallback) {
    if (!onError)
      return;
    std::string text = message.empty() ? fallback.str() : message;
    onError(wrap(llvm::StringRef(text)), userData);
  }

  std::string message;

private:
  ScopedDiagnosticHandler handler;
};

/// "f32", "bf16", "i64", ... for an element type.
std::string elementName(Type type) {
  std::string name;
  llvm::raw_string_ostream(name) << type;
  return name;
}

llvm::json::Value describe(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return llvm::json::Object{{"element", nullptr}};
  llvm::json::Array shape;
  for (int64_t extent : tensor.getShape())
    shape.push_back(ShapedType::isDynamic(extent) ? int64_t(-1) : extent);
  return llvm::json::Object{{"element", elementName(tensor.getElementType())},
                            {"shape", std::move(shape)}};
}

} // namespace

void fffRegisterDialects(MlirDialectRegistry registry) {
  fff::registerFFFDialects(*unwrap(registry));
}

void fffRegisterPasses(void) { fff::registerFFFPasses(); }

MlirLogicalResult fffRunPipeline(MlirModule module, MlirStringRef pipeline,
                                 MlirStringCallback onError, void *userData) {
  ModuleOp op = unwrap(module);
  FirstError error(op.getContext());
  std::string text = unwrap(pipeline).str();
  // A bare pipeline name runs on the module.
  if (!llvm::StringRef(text).starts_with("builtin.module("))
    text = "builtin.module(" + text + ")";
  std::string parseError;
  llvm::raw_string_ostream parseErrors(parseError);
  FailureOr<OpPassManager> parsed = parsePassPipeline(text, parseErrors);
  if (failed(parsed)) {
    // The parser's message, without the pipeline text and caret under it.
    llvm::StringRef firstLine =
        llvm::StringRef(parseError).trim().split('\n').first;
    error.report(onError, userData,
                 firstLine.empty() ? "invalid pass pipeline '" + text + "'"
                                   : firstLine.str());
    return wrap(failure());
  }
  PassManager pm(op.getContext());
  static_cast<OpPassManager &>(pm) = std::move(*parsed);
  if (failed(pm.run(op))) {
    error.report(onError, userData, "the pipeline failed");
    return wrap(failure());
  }
  return wrap(success());
}

MlirLogicalResult fffExtractPTX(MlirModule module, MlirStringCallback callback,
                                MlirStringCallback onError, void *userData) {
  ModuleOp op = unwrap(module);
  FirstError error(op.getContext());
  detail::CallbackOstream stream(callback, userData);
  if (failed(fff::extractPTX(op, stream))) {
    error.report(onError, userData, "no PTX in the module");
    return wrap(failure());
  }
  return wrap(success());
}

void fffDescribeFunctions(MlirModule module, MlirStringCallback callback,
                          void *userData) {
  llvm::json::Array functions;
  for (auto function : unwrap(module).getOps<func::FuncOp>()) {
    if (!function.isPublic() || function.isExternal())
      continue;
    llvm::json::Array arguments, results;
    for (Type type : function.getArgumentTypes())
      arguments.push_back(describe(type));
    for (Type type : function.getResultTypes())
      results.push_back(describe(type));
    functions.push_back(llvm::json::Object{{"name", function.getSymName()},
                                           {"arguments", std::move(arguments)},
                                           {"results", std::move(results)}});
  }
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(functions));
  callback(wrap(llvm::StringRef(text)), userData);
}

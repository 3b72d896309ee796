//===- FFFModule.cpp - fff._fff, Python bindings over the C API ----------===//
//
// The thin native layer of the `fff` package: parsing, running pipelines
// and JIT-compiling modules, through fff's C API (libFFFCAPI.so, which
// carries MLIR's), and the common case of a call to a compiled CPU function
// (HostCall.h). Everything above it (argument checks and conversions, the
// other calls) is Python, in fff/.
//
//===----------------------------------------------------------------------===//

#include "FFFError.h"
#include "HostCall.h"
#include "fff-c/Compiler.h"
#include "fff/Runtime/CudaRuntime.h"
#include "fff/Runtime/Runtime.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/ExecutionEngine.h"
#include "mlir-c/IR.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <dlfcn.h>

#include <cstdint>
#include <string>

namespace nb = nanobind;
using fff::python::FFFError;
using fff::python::HostCall;
using fff::python::TensorSpec;

namespace {

void appendText(MlirStringRef text, void *string) {
  static_cast<std::string *>(string)->append(text.data, text.length);
}

/// The first error diagnostic of a context, as one line.
MlirLogicalResult keepFirstError(MlirDiagnostic diagnostic, void *first) {
  auto *message = static_cast<std::string *>(first);
  if (mlirDiagnosticGetSeverity(diagnostic) == MlirDiagnosticError &&
      message->empty()) {
    std::string location;
    mlirLocationPrint(mlirDiagnosticGetLocation(diagnostic), appendText,
                      &location);
    std::string text;
    mlirDiagnosticPrint(diagnostic, appendText, &text);
    *message = location + ": " + text;
  }
  return mlirLogicalResultSuccess();
}

/// A context with fff's dialects and a parsed module, which errors on.
class Module {
public:
  explicit Module(const std::string &ir) {
    static bool registered = (fffRegisterPasses(), true);
    (void)registered;
    MlirDialectRegistry registry = mlirDialectRegistryCreate();
    fffRegisterDialects(registry);
    context =
        mlirContextCreateWithRegistry(registry, /*threadingEnabled=*/false);
    mlirDialectRegistryDestroy(registry);
    mlirContextAttachDiagnosticHandler(context, keepFirstError, &firstError,
                                       nullptr);
    module = mlirModuleCreateParse(context,
                                   mlirStringRefCreate(ir.data(), ir.size()));
    if (mlirModuleIsNull(module))
      fail("cannot parse the module");
  }
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;
  ~Module() {
    if (!mlirModuleIsNull(module))
      mlirModuleDestroy(module);
    mlirContextDestroy(context);
  }

  /// Runs `pipeline`; throws FFFError with its first error.
  void run(const std::string &pipeline) {
    std::string error;
    if (mlirLogicalResultIsFailure(fffRunPipeline(
            module, mlirStringRefCreate(pipeline.data(), pipeline.size()),
            appendText, &error)))
      throw FFFError(error);
  }

  std::string print() {
    std::string text;
    mlirOperationPrint(mlirModuleGetOperation(module), appendText, &text);
    return text;
  }

  std::string describe() {
    std::string text;
    fffDescribeFunctions(module, appendText, &text);
    return text;
  }

  /// Gives public functions a C interface (one pointer per memref
  /// descriptor), which the Python side calls.
  void requestCInterfaces() {
    MlirOperation op = mlirBlockGetFirstOperation(mlirModuleGetBody(module));
    for (; !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
      MlirIdentifier name = mlirOperationGetName(op);
      MlirStringRef text = mlirIdentifierStr(name);
      if (std::string(text.data, text.length) != "func.func")
        continue;
      MlirAttribute visibility = mlirOperationGetInherentAttributeByName(
          op, mlirStringRefCreateFromCString("sym_visibility"));
      if (!mlirAttributeIsNull(visibility))
        continue;
      mlirOperationSetDiscardableAttributeByName(
          op, mlirStringRefCreateFromCString("llvm.emit_c_interface"),
          mlirUnitAttrGet(context));
    }
  }

  [[noreturn]] void fail(const std::string &what) {
    throw FFFError(firstError.empty() ? what : firstError);
  }

  MlirContext context;
  MlirModule module;
  std::string firstError;
};

/// A module compiled by a pipeline and JIT-compiled for this host, with
/// fff's runtimes linked in. Keeps its context alive.
class Engine {
public:
  Engine(const std::string &ir, const std::string &pipeline, int optLevel,
         const std::string &runnerUtils)
      : module(ir) {
    module.requestCInterfaces();
    module.run(pipeline);
    // No shared libraries through the engine: it would open them with
    // RTLD_GLOBAL, and with them libMLIR.so and libLLVM.so, whose symbols
    // would then take the place of those of any other LLVM later loaded
    // into this process (torch-mlir's, say).
    engine = mlirExecutionEngineCreate(module.module, optLevel, /*numPaths=*/0,
                                       nullptr, /*enableObjectDump=*/false,
                                       /*enablePIC=*/false);
    if (mlirExecutionEngineIsNull(engine))
      module.fail("cannot JIT-compile the module for this host");
    // MLIR's C runner utilities, opened privately, for the one function
    // compiled code calls in them (memref.copy of a strided buffer).
    if (void *utils = dlopen(runnerUtils.c_str(), RTLD_NOW | RTLD_LOCAL))
      if (void *copy = dlsym(utils, "memrefCopy"))
        registerSymbol("memrefCopy", copy);
    // The runtimes, for the compiled code: failed checks report to
    // fff_runtime, whose buffer cache CPU code allocates from and whose
    // async runtime runs its rows and tokens in threads; GPU host code
    // launches through the CUDA runtime.
    size_t count;
    const FFFRuntimeSymbol *async = fffAsyncRuntimeSymbols(&count);
    for (size_t i = 0; i < count; ++i)
      registerSymbol(async[i].name, async[i].address);
    registerSymbol("fffReportCheckFailure", (void *)&fffReportCheckFailure);
    registerSymbol("_mlir_memref_to_llvm_alloc", (void *)&fffHostAlloc);
    registerSymbol("_mlir_memref_to_llvm_aligned_alloc",
                   (void *)&fffHostAlignedAlloc);
    registerSymbol("_mlir_memref_to_llvm_free", (void *)&fffHostFree);
    registerSymbol("mgpuModuleLoad", (void *)&mgpuModuleLoad);
    registerSymbol("mgpuModuleLoadJIT", (void *)&mgpuModuleLoadJIT);
    registerSymbol("mgpuModuleUnload", (void *)&mgpuModuleUnload);
    registerSymbol("mgpuModuleGetFunction", (void *)&mgpuModuleGetFunction);
    registerSymbol("mgpuStreamCreate", (void *)&mgpuStreamCreate);
    registerSymbol("mgpuStreamSynchronize", (void *)&mgpuStreamSynchronize);
    registerSymbol("mgpuStreamDestroy", (void *)&mgpuStreamDestroy);
    registerSymbol("mgpuLaunchKernel", (void *)&mgpuLaunchKernel);
    registerSymbol("mgpuMemAlloc", (void *)&mgpuMemAlloc);
    registerSymbol("mgpuMemFree", (void *)&mgpuMemFree);
    registerSymbol("fffDeviceConstant", (void *)&fffDeviceConstant);
    mlirExecutionEngineInitialize(engine);
  }
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;
  ~Engine() { mlirExecutionEngineDestroy(engine); }

  /// The address of `name`'s packed entry point, void (*)(void **).
  uintptr_t lookup(const std::string &name) {
    void *function = mlirExecutionEngineLookupPacked(
        engine, mlirStringRefCreate(name.data(), name.size()));
    if (!function)
      throw FFFError("no compiled function " + name);
    return reinterpret_cast<uintptr_t>(function);
  }

private:
  void registerSymbol(const char *name, void *address) {
    mlirExecutionEngineRegisterSymbol(
        engine, mlirStringRefCreateFromCString(name), address);
  }

  Module module;
  MlirExecutionEngine engine;
};

} // namespace

NB_MODULE(_fff, m) {
  m.doc() = "fff's native layer: pipelines and JIT compilation over fff's C "
            "API. Use the fff package.";
  nb::exception<FFFError>(m, "FFFError");

  m.def(
      "lower",
      [](const std::string &ir, const std::string &pipeline) {
        Module module(ir);
        module.run(pipeline);
        return module.print();
      },
      nb::arg("ir"), nb::arg("pipeline"),
      "Runs a pass pipeline on MLIR text and returns the result as text.");
  m.def(
      "describe", [](const std::string &ir) { return Module(ir).describe(); },
      nb::arg("ir"),
      "The public functions of MLIR text and their tensor types, as JSON.");
  m.def(
      "last_error",
      []() -> nb::object {
        const char *error = fffGetLastError();
        if (!error)
          return nb::none();
        return nb::str(error);
      },
      "The first error compiled code reported since the last call, or None.");
  m.def(
      "free_host_buffer",
      [](uintptr_t buffer) { fffHostFree(reinterpret_cast<void *>(buffer)); },
      nb::arg("buffer"),
      "Frees a CPU result's buffer into the host buffer cache.");
  m.def(
      "set_buffer_cache_limit",
      [](size_t bytes) { return fffSetHostCacheLimit(bytes); },
      nb::arg("bytes"),
      "Sets how many bytes of freed CPU buffers the host buffer cache keeps "
      "for later calls (0: none), releasing the oldest beyond it; returns "
      "the previous limit.");
  m.def(
      "parallel_runtime",
      []() {
        int threads = 0;
        const char *source = fffParallelRuntime(&threads);
        return nb::make_tuple(nb::str(source), threads);
      },
      "Where CPU code's parallel loops run: (\"openmp\" or \"fff\", "
      "threads).");
  m.def(
      "set_stream",
      [](uintptr_t stream) { fffSetStream(reinterpret_cast<void *>(stream)); },
      nb::arg("stream"),
      "The CUstream GPU calls run on (0: a private one, synchronously).");

  nb::class_<Engine>(m, "Engine")
      .def(nb::init<const std::string &, const std::string &, int,
                    const std::string &>(),
           nb::arg("ir"), nb::arg("pipeline"), nb::arg("opt_level"),
           nb::arg("runner_utils"))
      .def("lookup", &Engine::lookup, nb::arg("name"));

  using Signature = std::vector<std::pair<std::string, std::vector<int64_t>>>;
  auto specs = [](const Signature &signature) {
    std::vector<TensorSpec> specs;
    for (const auto &[element, shape] : signature)
      specs.push_back({element, shape});
    return specs;
  };
  nb::class_<HostCall>(m, "HostCall")
      .def(
          "__init__",
          [specs](HostCall *self, nb::object engine, uintptr_t entry,
                  const Signature &arguments, const Signature &results) {
            new (self)
                HostCall(engine, entry, specs(arguments), specs(results));
          },
          nb::arg("engine"), nb::arg("entry"), nb::arg("arguments"),
          nb::arg("results"),
          "A compiled CPU function's packed entry point (an address in "
          "`engine`) and its signature: (element, shape) pairs, -1 for a "
          "dynamic extent.")
      .def("__call__", &HostCall::operator(),
           "Calls the function on arrays it can read as they are and "
           "returns its results; None, calling nothing, for other "
           "arguments.");
}

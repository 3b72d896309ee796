//===- fff-run.cpp - JIT-run a function on .npy inputs ----------*- C++ -*-===//
//
//   fff-run FILE.mlir -e FUNC --arg a.npy ... --out y.npy ... [--repeat N]
//
// Compiles FILE with fff's CPU pipeline, calls FUNC on arrays read from
// .npy files and writes its results to .npy files. Every argument and result
// of FUNC is a ranked tensor; dynamic dims take their extent from the input
// files. bf16 tensors travel as uint16 .npy arrays holding the raw bits.
//
//===----------------------------------------------------------------------===//

#include "Npy.h"

#include "fff/InitFFF.h"
#include "fff/Pipelines/Pipelines.h"
#include "fff/Runtime/Runtime.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

using namespace mlir;
using llvm::Error;
using llvm::Expected;
using fff::NpyArray;

namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input.mlir>"),
                                      cl::Required);
static cl::opt<std::string> entryName("e", cl::desc("Function to run"),
                                      cl::value_desc("name"), cl::Required);
static cl::list<std::string> argFiles("arg",
                                      cl::desc("Argument .npy file, in order"),
                                      cl::value_desc("file.npy"));
static cl::list<std::string> outFiles("out",
                                      cl::desc("Result .npy file, in order"),
                                      cl::value_desc("file.npy"));
static cl::opt<bool>
    gpuTwin("gpu-twin",
            cl::desc("Run norms as the CPU twins of their GPU kernels (same "
                     "per-lane arithmetic and reduction order)"),
            cl::init(false));
static cl::opt<bool>
    noRaise("no-raise",
            cl::desc("Run the module as written: no raising of decomposed "
                     "norms to fff ops, no fusion"),
            cl::init(false));
static cl::opt<bool>
    reference("reference",
              cl::desc("Lower norms and tree layers with the scalar "
                       "reference lowering instead of vector code, and "
                       "activations with libm"),
              cl::init(false));
static cl::opt<int64_t>
    vectorBits("vector-bits",
               cl::desc("Vector register width the norms' and tree layers' "
                        "loops fill: 128, 256 or 512 (default: this host's "
                        "widest)"),
               cl::init(0));
static cl::opt<bool>
    integerBf16("integer-bf16",
                cl::desc("Round f32 results to bf16 with integer operations "
                         "even where this host has AVX512-BF16 (the same "
                         "bits either way)"),
                cl::init(false));
static cl::opt<bool>
    hugePages("huge-pages",
              cl::desc("Put buffers of 32 MiB or more on transparent huge "
                       "pages (the CPU pipeline's huge-pages option)"),
              cl::init(false));
static cl::opt<bool> noBufferCache(
    "no-buffer-cache",
    cl::desc("Allocate with malloc instead of fff's host buffer cache, "
             "which keeps freed buffers for the next call (the CPU "
             "pipeline's buffer-cache option)"),
    cl::init(false));
/// `--threads N`, parsed by main (see takeThreadsFlag).
static int64_t threadCount = 0;
static cl::opt<unsigned>
    repeat("repeat",
           cl::desc("After one warm-up call, call the function N more times "
                    "and print the median time per call"),
           cl::value_desc("N"), cl::init(0));
static cl::opt<bool> perfMap(
    "perf-map",
    cl::desc("Write /tmp/perf-<pid>.map, which names the compiled functions "
             "(the outlined parallel loop bodies included) for `perf report`"),
    cl::init(false));
static cl::opt<std::string> objectFile(
    "object-file",
    cl::desc("Write the compiled code as an object file, whose disassembly "
             "(objdump -d) the offsets `perf report` gives point into"),
    cl::value_desc("path"), cl::init(""));

namespace {

/// Writes perf's symbol map of a JIT (/tmp/perf-<pid>.map: start, size and
/// name per line) for the functions `names` of `engine`. The JIT does not
/// say how long a function is: each is taken to run to the next one's
/// start, the last one for 64 KiB.
Error writePerfMap(ExecutionEngine &engine, ArrayRef<std::string> names) {
  std::vector<std::pair<uint64_t, std::string>> starts;
  for (const std::string &name : names) {
    Expected<void *> address = engine.lookup(name);
    if (!address) {
      llvm::consumeError(address.takeError()); // inlined away
      continue;
    }
    starts.push_back({reinterpret_cast<uint64_t>(*address), name});
  }
  llvm::sort(starts);
  std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  if (error)
    return llvm::createStringError(error, "cannot write " + path);
  llvm::errs() << "fff-run: wrote " << path << "\n";
  for (size_t i = 0; i < starts.size(); ++i) {
    uint64_t end = i + 1 < starts.size() ? starts[i + 1].first : starts[i].first + (64 << 10);
    os << llvm::format_hex_no_prefix(starts[i].first, 1) << " "
       << llvm::format_hex_no_prefix(end - starts[i].first, 1) << " " << starts[i].second << "\n";
  }
  return Error::success();
}

/// The .npy dtype that carries a tensor element type, or "" if none does.
std::string npyDtypeFor(Type type) {
  if (type.isF32())
    return "f4";
  if (type.isF16())
    return "f2";
  if (type.isBF16())
    return "u2"; // raw bits
  if (type.isF64())
    return "f8";
  if (auto integer = dyn_cast<IntegerType>(type)) {
    switch (integer.getWidth()) {
    case 8: return "i1";
    case 16: return "i2";
    case 32: return "i4";
    case 64: return "i8";
    }
  }
  return "";
}

std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (auto [i, extent] : llvm::enumerate(shape))
    text += (i ? ", " : "") +
            (ShapedType::isDynamic(extent) ? std::string("?") : std::to_string(extent));
  return text + "]";
}

Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// A memref descriptor as the C interface lays it out:
/// {allocated, aligned, offset, sizes[rank], strides[rank]}, all 8 bytes.
struct Descriptor {
  static size_t words(int64_t rank) { return 3 + 2 * rank; }
  static void *allocated(const int64_t *d) { return reinterpret_cast<void *>(d[0]); }
  static char *aligned(const int64_t *d) { return reinterpret_cast<char *>(d[1]); }
  static int64_t offset(const int64_t *d) { return d[2]; }
  static int64_t size(const int64_t *d, int64_t rank, int64_t i) { return d[3 + i]; }
  static int64_t stride(const int64_t *d, int64_t rank, int64_t i) { return d[3 + rank + i]; }
};

/// Checks `array` against the tensor type of argument `index` and builds its
/// descriptor (pointing into `array.data`, which must outlive the call).
Expected<std::vector<int64_t>> describeArgument(unsigned index, StringRef path,
                                                RankedTensorType type,
                                                NpyArray &array) {
  std::string where = ("argument #" + llvm::Twine(index) + " ('" + path + "')").str();
  std::string expected = npyDtypeFor(type.getElementType());
  if (array.dtype != expected) {
    std::string typeText;
    llvm::raw_string_ostream(typeText) << type.getElementType();
    return failure(where + " has dtype '" + array.dtype + "' but the function takes " +
                   typeText + " (dtype '" + expected + "'" +
                   (type.getElementType().isBF16() ? ", raw bf16 bits" : "") + ")");
  }
  if (int64_t(array.shape.size()) != type.getRank())
    return failure(where + " has rank " + llvm::Twine(array.shape.size()) +
                   " but the function takes rank " + llvm::Twine(type.getRank()) +
                   " " + formatShape(type.getShape()));
  for (auto [dim, extent] : llvm::enumerate(type.getShape()))
    if (!ShapedType::isDynamic(extent) && extent != array.shape[dim])
      return failure(where + " has shape " + formatShape(array.shape) +
                     " but the function takes " + formatShape(type.getShape()));

  int64_t rank = type.getRank();
  std::vector<int64_t> descriptor(Descriptor::words(rank));
  descriptor[0] = descriptor[1] = reinterpret_cast<int64_t>(array.data.data());
  descriptor[2] = 0;
  int64_t stride = 1;
  for (int64_t dim = rank - 1; dim >= 0; --dim) {
    descriptor[3 + dim] = array.shape[dim];
    descriptor[3 + rank + dim] = stride;
    stride *= array.shape[dim];
  }
  return descriptor;
}

/// Copies a result buffer, whatever its strides, into a C-order array.
NpyArray gatherResult(const int64_t *descriptor, RankedTensorType type) {
  int64_t rank = type.getRank();
  NpyArray array;
  array.dtype = npyDtypeFor(type.getElementType());
  for (int64_t dim = 0; dim < rank; ++dim)
    array.shape.push_back(Descriptor::size(descriptor, rank, dim));
  size_t elementSize = type.getElementTypeBitWidth() / 8;
  int64_t count = array.numElements();
  array.data.resize(count * elementSize);
  char *base = Descriptor::aligned(descriptor) +
               Descriptor::offset(descriptor) * elementSize;
  std::vector<int64_t> position(rank, 0);
  for (int64_t linear = 0; linear < count; ++linear) {
    int64_t element = 0;
    for (int64_t dim = 0; dim < rank; ++dim)
      element += position[dim] * Descriptor::stride(descriptor, rank, dim);
    std::memcpy(&array.data[linear * elementSize], base + element * elementSize,
                elementSize);
    for (int64_t dim = rank - 1; dim >= 0; --dim) {
      if (++position[dim] < array.shape[dim])
        break;
      position[dim] = 0;
    }
  }
  return array;
}

/// Frees result buffers the function allocated: each once, and none that is
/// one of the caller's argument arrays.
void freeResults(ArrayRef<const int64_t *> results,
                 ArrayRef<std::vector<int64_t>> arguments) {
  llvm::SmallPtrSet<void *, 4> seen;
  for (const auto &argument : arguments)
    seen.insert(Descriptor::allocated(argument.data()));
  for (const int64_t *result : results) {
    void *allocated = Descriptor::allocated(result);
    if (allocated && seen.insert(allocated).second)
      fffHostFree(allocated);
  }
}

Error run() {
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  fff::registerFFFDialects(registry);
  MLIRContext context(registry);

  // Keep the first error (with its location) to report as one line; MLIR's
  // default handler would print source snippets and notes over many lines.
  std::string firstError;
  ScopedDiagnosticHandler diagnostics(&context, [&](Diagnostic &diagnostic) {
    if (diagnostic.getSeverity() == DiagnosticSeverity::Error && firstError.empty()) {
      llvm::raw_string_ostream os(firstError);
      if (auto loc = dyn_cast<FileLineColLoc>(diagnostic.getLocation()))
        os << loc.getFilename().getValue() << ":" << loc.getLine() << ":"
           << loc.getColumn() << ": ";
      os << diagnostic.str();
    }
    return success();
  });
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(inputFile, &context);
  if (!module)
    return failure("cannot parse '" + inputFile + "'" +
                   (firstError.empty() ? "" : ": " + firstError));

  auto function = module->lookupSymbol<func::FuncOp>(entryName);
  if (!function || function.isExternal())
    return failure("no function @" + entryName + " with a body in '" + inputFile + "'");
  FunctionType signature = function.getFunctionType();
  SmallVector<RankedTensorType> inputTypes, resultTypes;
  for (auto [kind, types, out] :
       {std::tuple{"argument", signature.getInputs(), &inputTypes},
        std::tuple{"result", signature.getResults(), &resultTypes}}) {
    for (auto [i, type] : llvm::enumerate(types)) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!tensor || npyDtypeFor(tensor.getElementType()).empty()) {
        std::string text;
        llvm::raw_string_ostream(text) << type;
        return failure(llvm::Twine("@") + entryName + " " + kind + " #" + llvm::Twine(i) +
                       " has type " + text +
                       "; fff-run passes ranked tensors of f32, f16, bf16, f64 or integers");
      }
      out->push_back(tensor);
    }
  }
  if (argFiles.size() != inputTypes.size())
    return failure("@" + entryName + " takes " + llvm::Twine(inputTypes.size()) +
                   " arguments but " + llvm::Twine(argFiles.size()) + " --arg files were given");
  if (outFiles.size() != resultTypes.size())
    return failure("@" + entryName + " returns " + llvm::Twine(resultTypes.size()) +
                   " results but " + llvm::Twine(outFiles.size()) + " --out files were given");

  std::vector<NpyArray> arrays;
  std::vector<std::vector<int64_t>> argDescriptors;
  for (auto [i, path] : llvm::enumerate(argFiles)) {
    Expected<NpyArray> array = fff::readNpy(path);
    if (!array)
      return array.takeError();
    arrays.push_back(std::move(*array));
  }
  for (auto [i, path] : llvm::enumerate(argFiles)) {
    auto descriptor = describeArgument(i, path, inputTypes[i], arrays[i]);
    if (!descriptor)
      return descriptor.takeError();
    argDescriptors.push_back(std::move(*descriptor));
  }

  // Compile. The C interface passes each memref as one descriptor pointer.
  function->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), UnitAttr::get(&context));
  PassManager pm(&context);
  fff::CPUPipelineOptions pipelineOptions;
  pipelineOptions.gpuTwin = gpuTwin;
  pipelineOptions.raise = !noRaise;
  pipelineOptions.reference = reference;
  pipelineOptions.vectorBits = vectorBits;
  pipelineOptions.integerBf16 = integerBf16;
  pipelineOptions.hugePages = hugePages;
  pipelineOptions.bufferCache = !noBufferCache;
  pipelineOptions.threads = threadCount;
  fff::buildCPUPipeline(pm, pipelineOptions);
  if (failed(pm.run(*module)))
    return failure("lowering '" + inputFile + "' with the CPU pipeline failed: " + firstError);

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  // Optimize for this host: without its TargetMachine, LLVM's cost models
  // assume no vector units and the loop vectorizer does nothing.
  auto machineBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!machineBuilder)
    return machineBuilder.takeError();
  auto targetMachine = machineBuilder->createTargetMachine();
  if (!targetMachine)
    return targetMachine.takeError();
  ExecutionEngineOptions options;
  auto transformer = makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0,
                                               targetMachine->get());
  options.transformer = transformer;
  options.enableObjectDump = !objectFile.empty();
  SmallVector<StringRef> libraries{FFF_C_RUNNER_UTILS};
  options.sharedLibPaths = libraries;
  auto engine = ExecutionEngine::create(*module, options, std::move(*targetMachine));
  if (!engine)
    return engine.takeError();
  // Failed run-time checks in the compiled code report here, its buffers
  // come from the host buffer cache, and its rows and tokens run in the
  // threads of fff's async runtime.
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    auto bind = [&](StringRef name, auto *function) {
      symbols[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(function),
                                 llvm::JITSymbolFlags::Exported};
    };
    bind("fffReportCheckFailure", &fffReportCheckFailure);
    bind("_mlir_memref_to_llvm_alloc", &fffHostAlloc);
    bind("_mlir_memref_to_llvm_aligned_alloc", &fffHostAlignedAlloc);
    bind("_mlir_memref_to_llvm_free", &fffHostFree);
    size_t count;
    const FFFRuntimeSymbol *async = fffAsyncRuntimeSymbols(&count);
    for (size_t i = 0; i < count; ++i)
      bind(async[i].name, async[i].address);
    return symbols;
  });
  (*engine)->initialize();
  if (!objectFile.empty())
    (*engine)->dumpToObjectFile(objectFile);
  if (perfMap) {
    SmallVector<std::string> names;
    module->walk([&](LLVM::LLVMFuncOp f) {
      if (!f.isExternal())
        names.push_back(f.getName().str());
    });
    if (Error error = writePerfMap(**engine, names))
      return error;
  }
  auto entry = (*engine)->lookupPacked("_mlir_ciface_" + entryName);
  if (!entry)
    return entry.takeError();

  // Results come back through one out-pointer: a descriptor, or a struct of
  // descriptors (all 8-byte fields, so laid end to end).
  size_t resultWords = 0;
  for (RankedTensorType type : resultTypes)
    resultWords += Descriptor::words(type.getRank());
  std::vector<int64_t> resultStorage(std::max<size_t>(resultWords, 1));
  SmallVector<const int64_t *> resultDescriptors;
  for (size_t i = 0, offset = 0; i < resultTypes.size(); ++i) {
    resultDescriptors.push_back(resultStorage.data() + offset);
    offset += Descriptor::words(resultTypes[i].getRank());
  }
  SmallVector<void *> pointers;
  if (!resultTypes.empty())
    pointers.push_back(resultStorage.data());
  for (auto &descriptor : argDescriptors)
    pointers.push_back(descriptor.data());
  SmallVector<void *> packed;
  for (void *&pointer : pointers)
    packed.push_back(&pointer);

  // A call that reports a failed check returned early: its results are
  // poison, so they are neither read nor freed.
  auto call = [&]() -> Error {
    (*entry)(packed.data());
    if (const char *error = fffGetLastError())
      return failure(error);
    return Error::success();
  };

  if (repeat > 0) {
    if (Error error = call()) // warm-up
      return error;
    freeResults(resultDescriptors, argDescriptors);
    std::vector<double> milliseconds;
    for (unsigned i = 0; i < repeat; ++i) {
      auto start = std::chrono::steady_clock::now();
      if (Error error = call())
        return error;
      auto stop = std::chrono::steady_clock::now();
      milliseconds.push_back(
          std::chrono::duration<double, std::milli>(stop - start).count());
      freeResults(resultDescriptors, argDescriptors);
    }
    std::sort(milliseconds.begin(), milliseconds.end());
    llvm::outs() << llvm::format("fff-run: @%s median %.4f ms per call over %u calls (min %.4f ms)\n",
                                 entryName.c_str(), milliseconds[milliseconds.size() / 2],
                                 unsigned(repeat), milliseconds.front());
  }

  if (Error error = call())
    return error;
  for (auto [i, path] : llvm::enumerate(outFiles))
    if (Error error = fff::writeNpy(path, gatherResult(resultDescriptors[i], resultTypes[i])))
      return error;
  freeResults(resultDescriptors, argDescriptors);
  return Error::success();
}

} // namespace

/// Takes `--threads N` (or `--threads=N`, one dash or two) out of the
/// arguments into `threadCount`. libLLVM registers a hidden `--threads`
/// option of its own, so fff-run cannot register one; it parses its own
/// before LLVM's parser sees the rest.
static Error takeThreadsFlag(SmallVectorImpl<char *> &args) {
  for (size_t i = 1; i < args.size(); ++i) {
    StringRef arg = StringRef(args[i]).ltrim('-');
    if (!StringRef(args[i]).starts_with("-") ||
        !(arg == "threads" || arg.starts_with("threads=")))
      continue;
    StringRef value;
    size_t taken = 1;
    if (arg.consume_front("threads=")) {
      value = arg;
    } else if (i + 1 < args.size()) {
      value = args[i + 1];
      taken = 2;
    }
    if (value.getAsInteger(10, threadCount) || threadCount < 0)
      return failure("--threads takes a count of threads, 0 for all cores; got '" + value + "'");
    args.erase(args.begin() + i, args.begin() + i + taken);
    --i;
  }
  return Error::success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  SmallVector<char *> args(argv, argv + argc);
  if (Error error = takeThreadsFlag(args)) {
    llvm::errs() << "fff-run: error: " << llvm::toString(std::move(error)) << "\n";
    return 1;
  }
  cl::ParseCommandLineOptions(
      int(args.size()), args.data(),
      "fff-run: compile an MLIR file with fff's CPU pipeline and run one "
      "function on .npy inputs\n\n"
      "bf16 arguments and results are uint16 .npy arrays of raw bf16 bits.\n\n"
      "--threads N splits the norms' rows across N threads (default 0: all "
      "cores); results are the same for any N.\n");
  if (Error error = run()) {
    llvm::errs() << "fff-run: error: " << llvm::toString(std::move(error)) << "\n";
    return 1;
  }
  return 0;
}

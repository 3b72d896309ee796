//===- Driver.cpp - The emulated device and its driver objects --*- C++ -*-===//

#include "Driver.h"

#include "Errors.h"
#include "Interpreter.h"
#include "PtxParser.h"
#include "Stats.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fff::emulator {
namespace {

/// Removes the object `pointer` from `owners`, destroying it.
template <typename T>
void erase(std::vector<std::unique_ptr<T>> &owners, const T *pointer) {
  owners.erase(std::remove_if(owners.begin(), owners.end(),
                              [&](const std::unique_ptr<T> &owner) {
                                return owner.get() == pointer;
                              }),
               owners.end());
}

template <typename T>
bool contains(const std::vector<std::unique_ptr<T>> &owners, const T *pointer) {
  return pointer && std::any_of(owners.begin(), owners.end(),
                                [&](const std::unique_ptr<T> &owner) {
                                  return owner.get() == pointer;
                                });
}

bool isBinaryImage(const char *image) {
  static constexpr unsigned char elf[] = {0x7f, 'E', 'L', 'F'};
  // Fat binaries: the wrapper's magic, then the data header's.
  static constexpr unsigned char fatbinWrapper[] = {0xb1, 0x43, 0x62, 0x46};
  static constexpr unsigned char fatbinData[] = {0x50, 0xed, 0x55, 0xba};
  return std::memcmp(image, elf, 4) == 0 ||
         std::memcmp(image, fatbinWrapper, 4) == 0 ||
         std::memcmp(image, fatbinData, 4) == 0;
}

} // namespace

Driver &Driver::instance() {
  // Never destroyed: fff's runtime unloads modules from static destructors,
  // which may run after this library's.
  static Driver *driver = new Driver;
  return *driver;
}

std::vector<Context *> &Driver::contextStack() {
  static thread_local std::vector<Context *> stack;
  return stack;
}

CUresult Driver::currentContext(Context *&context) {
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  std::vector<Context *> &stack = contextStack();
  if (stack.empty() || !stack.back() || !isContext(stack.back()))
    return CUDA_ERROR_INVALID_CONTEXT;
  context = stack.back();
  return context->stickyError;
}

Context *Driver::createContext() {
  createdContexts.push_back(std::make_unique<Context>());
  return createdContexts.back().get();
}

void Driver::destroyContext(Context *context) {
  resetContext(context);
  std::vector<Context *> &stack = contextStack();
  stack.erase(std::remove(stack.begin(), stack.end(), context), stack.end());
  erase(createdContexts, context);
}

void Driver::resetContext(Context *context) {
  for (auto it = modules.begin(); it != modules.end();) {
    if ((*it)->context != context) {
      ++it;
      continue;
    }
    for (const auto &function : (*it)->functions)
      functions.erase(function.second.get());
    memory.releaseAll((*it)->module.get());
    it = modules.erase(it);
  }
  streams.erase(std::remove_if(streams.begin(), streams.end(),
                               [&](const std::unique_ptr<Stream> &stream) {
                                 return stream->context == context;
                               }),
                streams.end());
  events.erase(std::remove_if(events.begin(), events.end(),
                              [&](const std::unique_ptr<Event> &event) {
                                return event->context == context;
                              }),
               events.end());
  memory.releaseAll(context);
  context->stickyError = CUDA_SUCCESS;
}

bool Driver::isContext(const Context *context) const {
  return context == &primaryContext || contains(createdContexts, context);
}

bool Driver::isModule(const LoadedModule *module) const {
  return contains(modules, module);
}

bool Driver::isFunction(const Function *function) const {
  return functions.count(function);
}

bool Driver::isStream(const Stream *stream) const {
  return contains(streams, stream);
}

bool Driver::isEvent(const Event *event) const {
  return contains(events, event);
}

CUresult Driver::loadModule(Context *context, const char *image,
                            LoadedModule *&module, std::string &log) {
  if (isBinaryImage(image)) {
    log = "cubin and fatbin images are not supported: the emulator runs PTX "
          "text";
    return reportError(CUDA_ERROR_INVALID_IMAGE, log);
  }
  ParseError error;
  std::unique_ptr<Module> parsed = parsePtx(image, memory, error);
  if (!parsed) {
    log = error.message;
    return reportError(error.code, error.message);
  }
  auto loaded = std::make_unique<LoadedModule>();
  loaded->context = context;
  loaded->module = std::move(parsed);
  module = loaded.get();
  modules.push_back(std::move(loaded));
  return CUDA_SUCCESS;
}

void Driver::unloadModule(LoadedModule *module) {
  for (const auto &function : module->functions)
    functions.erase(function.second.get());
  memory.releaseAll(module->module.get());
  erase(modules, module);
}

CUresult Driver::getFunction(LoadedModule *module, const char *name,
                             Function *&function) {
  auto existing = module->functions.find(name);
  if (existing != module->functions.end()) {
    function = existing->second.get();
    return CUDA_SUCCESS;
  }
  auto kernel = module->module->kernels.find(name);
  if (kernel == module->module->kernels.end())
    return reportError(CUDA_ERROR_NOT_FOUND,
                       std::string("no kernel '") + name + "' in the module");
  auto created = std::make_unique<Function>();
  created->module = module;
  created->kernel = kernel->second.get();
  function = created.get();
  functions.insert(function);
  module->functions.emplace(name, std::move(created));
  return CUDA_SUCCESS;
}

Stream *Driver::createStream(Context *context) {
  streams.push_back(std::make_unique<Stream>());
  streams.back()->context = context;
  return streams.back().get();
}

void Driver::destroyStream(Stream *stream) { erase(streams, stream); }

Event *Driver::createEvent(Context *context, unsigned flags) {
  events.push_back(std::make_unique<Event>());
  events.back()->context = context;
  events.back()->timed = !(flags & CU_EVENT_DISABLE_TIMING);
  return events.back().get();
}

void Driver::destroyEvent(Event *event) { erase(events, event); }

CUresult Driver::checkDeviceRange(uint64_t address, uint64_t bytes,
                                  const char *what) {
  if (memory.find(address, bytes))
    return CUDA_SUCCESS;
  return reportError(CUDA_ERROR_INVALID_VALUE,
                     std::string(what) + ": " + std::to_string(bytes) +
                         " bytes at device address " + formatHex(address) +
                         " are not within one allocation");
}

CUresult Driver::launch(Context *context, Function *function, Dim3 grid,
                        Dim3 block, unsigned sharedBytes, void **parameters,
                        void **extra) {
  const Kernel &kernel = *function->kernel;
  LaunchConfig config;
  config.grid = grid;
  config.block = block;
  config.dynamicSharedBytes = sharedBytes;
  config.parameters.assign(kernel.parameterBytes, 0);
  std::string name = "kernel '" + kernel.name + "': ";
  if (parameters) {
    for (const KernelParameter &parameter : kernel.parameters)
      std::memcpy(config.parameters.data() + parameter.offset,
                  parameters[&parameter - kernel.parameters.data()],
                  parameter.bytes);
  } else if (extra) {
    const void *buffer = nullptr;
    size_t bytes = 0;
    for (void **entry = extra;
         reinterpret_cast<uintptr_t>(*entry) != CU_LAUNCH_PARAM_END;
         entry += 2) {
      uintptr_t key = reinterpret_cast<uintptr_t>(entry[0]);
      if (key == CU_LAUNCH_PARAM_BUFFER_POINTER)
        buffer = entry[1];
      else if (key == CU_LAUNCH_PARAM_BUFFER_SIZE)
        bytes = *static_cast<const size_t *>(entry[1]);
      else
        return reportError(CUDA_ERROR_INVALID_VALUE,
                           name + "unknown entry in the launch's extra list");
    }
    if (!buffer || bytes != kernel.parameterBytes)
      return reportError(CUDA_ERROR_INVALID_VALUE,
                         name + "the extra parameter buffer holds " +
                             std::to_string(bytes) +
                             " bytes; the kernel takes " +
                             std::to_string(kernel.parameterBytes));
    std::memcpy(config.parameters.data(), buffer, bytes);
  } else if (!kernel.parameters.empty()) {
    return reportError(CUDA_ERROR_INVALID_VALUE,
                       name + "launched without its parameters");
  }
  if (std::string problem = checkLaunch(kernel, config); !problem.empty())
    return reportError(CUDA_ERROR_INVALID_VALUE, problem);

  const std::vector<std::string> &opcodeNames =
      function->module->module->opcodeNames;
  const char *statsPath = std::getenv("FFF_EMU_STATS");
  std::unique_ptr<LaunchStats> stats;
  if (statsPath && *statsPath)
    stats = std::make_unique<LaunchStats>(opcodeNames.size(), memory);
  Fault fault = runKernel(kernel, opcodeNames, config, memory, stats.get());
  if (fault.code != CUDA_SUCCESS) {
    context->stickyError = fault.code;
    return reportError(fault.code, fault.message);
  }
  if (stats && !appendStatsLine(statsPath, stats->toJson(kernel.name, grid,
                                                         block, opcodeNames)))
    std::fprintf(stderr,
                 "fff-emulator: cannot append statistics to %s "
                 "(FFF_EMU_STATS)\n",
                 statsPath);
  return CUDA_SUCCESS;
}

} // namespace fff::emulator

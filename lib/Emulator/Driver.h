//===- Driver.h - The emulated device and its driver objects ----*- C++ -*-===//
//
// One device (ordinal 0) with a primary context and any contexts created
// explicitly. Each context owns its modules, allocations, streams and
// events. Everything runs synchronously on the calling thread: a launch
// has finished when cuLaunchKernel returns, so streams only order what is
// already ordered, and events time the emulator, not a GPU.
//
// A launch that faults leaves its context's error sticky, as on hardware:
// every later call that uses the context returns it, until the context is
// destroyed or, for the primary context, reset (cuDevicePrimaryCtxReset).
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_DRIVER_H
#define FFF_EMULATOR_DRIVER_H

#include "CudaTypes.h"
#include "Memory.h"
#include "Program.h"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace fff::emulator {

struct Context {
  bool primary = false;
  CUresult stickyError = CUDA_SUCCESS;
};

struct Function {
  LoadedModule *module = nullptr;
  const Kernel *kernel = nullptr;
};

struct LoadedModule {
  Context *context = nullptr;
  std::unique_ptr<Module> module;
  std::map<std::string, std::unique_ptr<Function>, std::less<>> functions;
};

struct Stream {
  Context *context = nullptr;
};

struct Event {
  Context *context = nullptr;
  bool timed = true;
  bool recorded = false;
  std::chrono::steady_clock::time_point time;
};

class Driver {
public:
  static Driver &instance();

  /// Serializes the driver API: launches run under it.
  std::mutex mutex;
  bool initialized = false;
  DeviceMemory memory;

  Context primaryContext{true, CUDA_SUCCESS};
  int primaryRetains = 0;

  /// The calling thread's context stack; its top is the current context.
  static std::vector<Context *> &contextStack();
  /// The current context, or an error: CUDA_ERROR_NOT_INITIALIZED,
  /// CUDA_ERROR_INVALID_CONTEXT, or the context's sticky error.
  CUresult currentContext(Context *&context);

  Context *createContext();
  void destroyContext(Context *context);
  /// Frees all the context holds and clears its sticky error.
  void resetContext(Context *context);

  // Handle validation: a handle is valid while the object lives.
  bool isContext(const Context *context) const;
  bool isModule(const LoadedModule *module) const;
  bool isFunction(const Function *function) const;
  bool isStream(const Stream *stream) const;
  bool isEvent(const Event *event) const;

  CUresult loadModule(Context *context, const char *image,
                      LoadedModule *&module, std::string &log);
  void unloadModule(LoadedModule *module);
  CUresult getFunction(LoadedModule *module, const char *name,
                       Function *&function);

  Stream *createStream(Context *context);
  void destroyStream(Stream *stream);
  Event *createEvent(Context *context, unsigned flags);
  void destroyEvent(Event *event);

  /// Whether [address, address + bytes) lies in one allocation; else
  /// reports CUDA_ERROR_INVALID_VALUE naming `what`.
  CUresult checkDeviceRange(uint64_t address, uint64_t bytes, const char *what);

  CUresult launch(Context *context, Function *function, Dim3 grid, Dim3 block,
                  unsigned sharedBytes, void **parameters, void **extra);

private:
  std::vector<std::unique_ptr<Context>> createdContexts;
  std::vector<std::unique_ptr<LoadedModule>> modules;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::unique_ptr<Event>> events;
  std::set<const void *> functions;
};

} // namespace fff::emulator

#endif // FFF_EMULATOR_DRIVER_H

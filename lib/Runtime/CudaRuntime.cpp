//===- CudaRuntime.cpp - fff's CUDA host runtime ----------------*- C++ -*-===//
//
// The mgpu* entry points that MLIR's gpu-to-llvm lowering calls, over the
// CUDA driver API. Debian's MLIR ships no libmlir_cuda_runtime, and a
// library that links libcuda would not even load on machines without a GPU
// driver, so the driver is opened with dlopen on first use and its few
// functions are declared here: building needs no CUDA toolkit.
//
// The driver is the library named by $FFF_CUDA_DRIVER, or libcuda.so.1.
//
// Kernels run in the device's primary context, the one the CUDA runtime
// (and so PyTorch) uses, so device pointers pass freely between them.
//
//===----------------------------------------------------------------------===//

#include "fff/Runtime/CudaRuntime.h"

#include "Errors.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// The slice of cuda.h this file uses.
using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
constexpr CUresult CUDA_SUCCESS = 0;
constexpr int CU_JIT_OPTIMIZATION_LEVEL = 7;
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext *);
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *,
                                 void **);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUcontext context = nullptr;
};

/// Settings. Function-local so that it is constructed on first use:
/// compiled modules load their kernels from global constructors that may
/// run before this library's own static initializers.
struct State {
  void *userStream = nullptr;
};

State &state() {
  static State instance;
  return instance;
}

/// Driver errors are also printed: a module that fails to load does so in
/// a global constructor, before its user can ask fffGetLastError.
void recordError(const std::string &message) {
  std::fprintf(stderr, "fff cuda runtime: %s\n", message.c_str());
  fff::runtime::recordError(message);
}

/// The driver library: $FFF_CUDA_DRIVER when set (fff's PTX emulator, say),
/// else the system's.
const char *driverLibraryName() {
  const char *name = std::getenv("FFF_CUDA_DRIVER");
  return name && *name ? name : "libcuda.so.1";
}

/// Opens the driver and makes the primary context of device 0 available;
/// null (with the reason recorded) when there is no usable driver.
Driver *driver() {
  static Driver *loaded = [] () -> Driver * {
    void *library = dlopen(driverLibraryName(), RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      recordError(std::string("cannot load the CUDA driver: ") + dlerror());
      return nullptr;
    }
    static Driver d;
    bool complete = true;
    auto bind = [&](auto &function, const char *name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(
          dlsym(library, name));
      if (!function) {
        recordError(std::string("the CUDA driver lacks ") + name);
        complete = false;
      }
    };
    bind(d.cuInit, "cuInit");
    bind(d.cuDeviceGet, "cuDeviceGet");
    bind(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    bind(d.cuCtxPushCurrent, "cuCtxPushCurrent_v2");
    bind(d.cuCtxPopCurrent, "cuCtxPopCurrent_v2");
    bind(d.cuModuleLoadDataEx, "cuModuleLoadDataEx");
    bind(d.cuModuleUnload, "cuModuleUnload");
    bind(d.cuModuleGetFunction, "cuModuleGetFunction");
    bind(d.cuStreamCreate, "cuStreamCreate");
    bind(d.cuStreamSynchronize, "cuStreamSynchronize");
    bind(d.cuStreamDestroy, "cuStreamDestroy_v2");
    bind(d.cuLaunchKernel, "cuLaunchKernel");
    bind(d.cuGetErrorString, "cuGetErrorString");
    if (!complete)
      return nullptr;
    CUdevice device;
    if (d.cuInit(0) != CUDA_SUCCESS || d.cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
        d.cuDevicePrimaryCtxRetain(&d.context, device) != CUDA_SUCCESS) {
      recordError("no usable CUDA device");
      return nullptr;
    }
    return &d;
  }();
  return loaded;
}

/// Runs a driver call in the primary context; false (and the error recorded)
/// on failure or when there is no driver.
template <typename Call>
bool inContext(const char *what, Call call) {
  Driver *d = driver();
  if (!d)
    return false;
  d->cuCtxPushCurrent(d->context);
  CUresult result = call(*d);
  CUcontext popped;
  d->cuCtxPopCurrent(&popped);
  if (result == CUDA_SUCCESS)
    return true;
  const char *text = "unknown error";
  d->cuGetErrorString(result, &text);
  recordError(std::string(what) + " failed: " + text);
  return false;
}

} // namespace

extern "C" {

void fffSetStream(void *stream) { state().userStream = stream; }

// PTX text from a gpu.binary, compiled by the driver's JIT.
void *mgpuModuleLoadJIT(void *data, int optLevel) {
  CUmodule module = nullptr;
  int options[] = {CU_JIT_OPTIMIZATION_LEVEL};
  void *values[] = {reinterpret_cast<void *>(static_cast<intptr_t>(optLevel))};
  inContext("loading PTX", [&](Driver &d) {
    return d.cuModuleLoadDataEx(&module, data, 1, options, values);
  });
  return module;
}

void *mgpuModuleLoad(void *data, size_t /*size*/) {
  CUmodule module = nullptr;
  inContext("loading a CUDA module", [&](Driver &d) {
    return d.cuModuleLoadDataEx(&module, data, 0, nullptr, nullptr);
  });
  return module;
}

void mgpuModuleUnload(void *module) {
  // Unloading happens from static destructors, possibly after the driver
  // has shut down; nothing useful can be done on failure then.
  if (module && driver())
    driver()->cuModuleUnload(module);
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  CUfunction function = nullptr;
  if (!module) {
    recordError(std::string("kernel ") + name + " is unavailable: its module did not load");
    return nullptr;
  }
  inContext("looking up a kernel", [&](Driver &d) {
    return d.cuModuleGetFunction(&function, module, name);
  });
  return function;
}

void *mgpuStreamCreate() {
  if (void *stream = state().userStream)
    return stream;
  CUstream stream = nullptr;
  inContext("creating a stream", [&](Driver &d) {
    return d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
  });
  return stream;
}

void mgpuStreamSynchronize(void *stream) {
  if (stream && stream == state().userStream)
    return; // the caller orders work on its own stream
  inContext("synchronizing", [&](Driver &d) { return d.cuStreamSynchronize(stream); });
}

void mgpuStreamDestroy(void *stream) {
  if (!stream || stream == state().userStream)
    return;
  inContext("destroying a stream", [&](Driver &d) { return d.cuStreamDestroy(stream); });
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t sharedMemoryBytes, void *stream,
                      void **params, void **extra, size_t /*paramsCount*/) {
  if (!function) {
    recordError("launch skipped: the kernel is unavailable");
    return;
  }
  if (gridX == 0 || gridY == 0 || gridZ == 0)
    return; // empty batch: nothing to do
  inContext("launching a kernel", [&](Driver &d) {
    return d.cuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY,
                            blockZ, sharedMemoryBytes, stream, params, extra);
  });
}

} // extern "C"

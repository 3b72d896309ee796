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
#include <mutex>
#include <string>

namespace {

// The slice of cuda.h this file uses.
using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
using CUdeviceptr = uintptr_t;
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
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUcontext context = nullptr;
};

/// Settings. Function-local so that it is constructed on first use:
/// compiled modules load their kernels from global constructors that may
/// run before this library's own static initializers.
struct State {
  void *userStream = nullptr;
  /// Held while a constant is copied to the device, so that each is copied
  /// once however many threads call at once.
  std::mutex constantsMutex;
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
    bind(d.cuMemAlloc, "cuMemAlloc_v2");
    bind(d.cuMemFree, "cuMemFree_v2");
    bind(d.cuMemAllocAsync, "cuMemAllocAsync");
    bind(d.cuMemFreeAsync, "cuMemFreeAsync");
    bind(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
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

/// The kernel the last mgpuModuleGetFunction on this thread looked up: the
/// lowering calls it right before each launch, which names it if it fails.
thread_local std::string kernelToLaunch;

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
  kernelToLaunch = name;
  if (!module)
    return nullptr; // an error only if a launch needs it (not an empty one)
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
  if (gridX == 0 || gridY == 0 || gridZ == 0)
    return; // empty batch: nothing to do, which CUDA would reject
  if (!function) {
    recordError("kernel " + kernelToLaunch +
                " is unavailable: its module did not load");
    return;
  }
  inContext("launching a kernel", [&](Driver &d) {
    return d.cuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY,
                            blockZ, sharedMemoryBytes, stream, params, extra);
  });
}

// Buffers of the compiled code, allocated and freed in order with the
// kernels on `stream` (the function's stream, or the caller's): a buffer
// is freed only after the kernels queued before that use it. Without a
// stream, allocation is plain, and so is freeing, which waits for the
// device. An empty buffer is null: nothing reads it, and CUDA rejects size
// 0.
void *mgpuMemAlloc(uint64_t bytes, void *stream, bool hostShared) {
  if (hostShared) {
    recordError("host-shared GPU allocations are not supported");
    return nullptr;
  }
  CUdeviceptr pointer = 0;
  if (bytes == 0)
    return nullptr;
  inContext("allocating device memory", [&](Driver &d) {
    return stream ? d.cuMemAllocAsync(&pointer, bytes, stream)
                  : d.cuMemAlloc(&pointer, bytes);
  });
  return reinterpret_cast<void *>(pointer);
}

void mgpuMemFree(void *pointer, void *stream) {
  if (!pointer)
    return;
  auto address = reinterpret_cast<CUdeviceptr>(pointer);
  inContext("freeing device memory", [&](Driver &d) {
    return stream ? d.cuMemFreeAsync(address, stream) : d.cuMemFree(address);
  });
}

void *fffDeviceConstant(void **slot, const void *host, int64_t bytes) {
  std::lock_guard<std::mutex> lock(state().constantsMutex);
  if (*slot || bytes <= 0)
    return *slot;
  CUdeviceptr pointer = 0;
  bool copied = inContext("copying a constant to the device", [&](Driver &d) {
    CUresult result = d.cuMemAlloc(&pointer, bytes);
    if (result != CUDA_SUCCESS)
      return result;
    result = d.cuMemcpyHtoD(pointer, host, bytes);
    if (result != CUDA_SUCCESS)
      d.cuMemFree(pointer);
    return result;
  });
  if (copied)
    *slot = reinterpret_cast<void *>(pointer);
  return *slot;
}

} // extern "C"

//===- DriverApi.cpp - The CUDA driver API over the emulator ----*- C++ -*-===//
//
// The library's only exported symbols: driver API entry points under their
// standard names and ABI (the _v2 names cuda.h maps the plain ones to), so
// any driver-API client can load the emulator in place of libcuda.so.1.
// Each validates its arguments and handles, then calls into the Driver
// under its lock.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "Errors.h"

#include <algorithm>
#include <cstring>

#define FFF_DRIVER_API extern "C" __attribute__((visibility("default")))

using namespace fff::emulator;

namespace {

constexpr int DriverVersion = 13000; // CUDA 13.0, whose cuda.h this follows
constexpr unsigned long long TotalMemory = 143771ull << 20; // an H200's
constexpr const char *DeviceName = "NVIDIA H200 (fff PTX emulator)";

Driver &driver() { return Driver::instance(); }

using Lock = std::lock_guard<std::mutex>;

/// The null, legacy (0x1) and per-thread (0x2) default streams, or one
/// cuStreamCreate made.
bool isValidStream(CUstream stream) {
  uintptr_t value = reinterpret_cast<uintptr_t>(stream);
  return value <= 2 || driver().isStream(stream);
}

CUresult checkDevice(CUdevice device) {
  if (!driver().initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  return device == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/// The attributes of an H200 as the emulator presents it; features the
/// emulator lacks (managed memory, cooperative launches, opt-in shared
/// memory) read as absent.
bool deviceAttribute(int attribute, int &value) {
  static constexpr std::pair<int, int> attributes[] = {
      {1, 1024},        // MAX_THREADS_PER_BLOCK
      {2, 1024},        // MAX_BLOCK_DIM_X
      {3, 1024},        // MAX_BLOCK_DIM_Y
      {4, 64},          // MAX_BLOCK_DIM_Z
      {5, 2147483647},  // MAX_GRID_DIM_X
      {6, 65535},       // MAX_GRID_DIM_Y
      {7, 65535},       // MAX_GRID_DIM_Z
      {8, 49152},       // MAX_SHARED_MEMORY_PER_BLOCK
      {9, 65536},       // TOTAL_CONSTANT_MEMORY
      {10, 32},         // WARP_SIZE
      {11, 2147483647}, // MAX_PITCH
      {12, 65536},      // MAX_REGISTERS_PER_BLOCK
      {13, 1980000},    // CLOCK_RATE (kHz)
      {14, 512},        // TEXTURE_ALIGNMENT
      {15, 1},          // GPU_OVERLAP
      {16, 132},        // MULTIPROCESSOR_COUNT
      {17, 0},          // KERNEL_EXEC_TIMEOUT
      {18, 0},          // INTEGRATED
      {19, 0},          // CAN_MAP_HOST_MEMORY
      {20, 0},          // COMPUTE_MODE (default)
      {31, 0},          // CONCURRENT_KERNELS
      {32, 1},          // ECC_ENABLED
      {36, 2619000},    // MEMORY_CLOCK_RATE (kHz)
      {37, 6144},       // GLOBAL_MEMORY_BUS_WIDTH
      {38, 50331648},   // L2_CACHE_SIZE
      {39, 2048},       // MAX_THREADS_PER_MULTIPROCESSOR
      {41, 1},          // UNIFIED_ADDRESSING
      {75, 9},          // COMPUTE_CAPABILITY_MAJOR
      {76, 0},          // COMPUTE_CAPABILITY_MINOR
      {81, 233472},     // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
      {82, 65536},      // MAX_REGISTERS_PER_MULTIPROCESSOR
      {83, 0},          // MANAGED_MEMORY
      {95, 0},          // COOPERATIVE_LAUNCH
      {97, 49152},      // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
      {106, 32},        // MAX_BLOCKS_PER_MULTIPROCESSOR
      {111, 0},         // RESERVED_SHARED_MEMORY_PER_BLOCK
  };
  for (const auto &[key, attributeValue] : attributes)
    if (key == attribute) {
      value = attributeValue;
      return true;
    }
  return false;
}

CUresult copy(CUdeviceptr destination, CUdeviceptr source, size_t bytes,
              bool destinationOnDevice, bool sourceOnDevice, CUstream stream,
              const char *what) {
  Lock lock(driver().mutex);
  Context *context;
  if (CUresult result = driver().currentContext(context))
    return result;
  if (!isValidStream(stream))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!bytes)
    return CUDA_SUCCESS;
  if (!destination || !source)
    return CUDA_ERROR_INVALID_VALUE;
  if (destinationOnDevice)
    if (CUresult result = driver().checkDeviceRange(destination, bytes, what))
      return result;
  if (sourceOnDevice)
    if (CUresult result = driver().checkDeviceRange(source, bytes, what))
      return result;
  std::memmove(DeviceMemory::hostAddress(destination),
               DeviceMemory::hostAddress(source), bytes);
  return CUDA_SUCCESS;
}

CUresult fill(CUdeviceptr destination, unsigned char value, size_t count,
              CUstream stream) {
  Lock lock(driver().mutex);
  Context *context;
  if (CUresult result = driver().currentContext(context))
    return result;
  if (!isValidStream(stream))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!count)
    return CUDA_SUCCESS;
  if (CUresult result =
          driver().checkDeviceRange(destination, count, "cuMemsetD8"))
    return result;
  std::memset(DeviceMemory::hostAddress(destination), value, count);
  return CUDA_SUCCESS;
}

/// Writes `text` into a JIT log buffer given through `options`, and its
/// length into the matching size option, as the driver's JIT does.
void writeJitLog(unsigned numOptions, const CUjit_option *options,
                 void **values, int bufferOption, int sizeOption,
                 const std::string &text) {
  char *buffer = nullptr;
  int sizeIndex = -1;
  for (unsigned i = 0; i < numOptions; ++i) {
    if (options[i] == bufferOption)
      buffer = static_cast<char *>(values[i]);
    else if (options[i] == sizeOption)
      sizeIndex = int(i);
  }
  if (!buffer || sizeIndex < 0)
    return;
  size_t capacity = reinterpret_cast<uintptr_t>(values[sizeIndex]);
  if (!capacity)
    return;
  size_t written = std::min(text.size(), capacity - 1);
  std::memcpy(buffer, text.data(), written);
  buffer[written] = '\0';
  values[sizeIndex] = reinterpret_cast<void *>(uintptr_t(written));
}

} // namespace

//===----------------------------------------------------------------------===//
// Initialization, device and version
//===----------------------------------------------------------------------===//

FFF_DRIVER_API CUresult cuInit(unsigned flags) {
  if (flags)
    return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver().mutex);
  driver().initialized = true;
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuDriverGetVersion(int *version) {
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  *version = DriverVersion;
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  Lock lock(driver().mutex);
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult result = checkDevice(ordinal))
    return result;
  *device = 0;
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuDeviceGetCount(int *count) {
  Lock lock(driver().mutex);
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  if (!driver().initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  *count = 1;
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuDeviceGetName(char *name, int length,
                                        CUdevice device) {
  Lock lock(driver().mutex);
  if (!name || length <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult result = checkDevice(device))
    return result;
  std::strncpy(name, DeviceName, size_t(length));
  name[length - 1] = '\0';
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuDeviceGetAttribute(int *value,
                                             CUdevice_attribute attribute,
                                             CUdevice device) {
  Lock lock(driver().mutex);
  if (!value)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult result = checkDevice(device))
    return result;
  return deviceAttribute(attribute, *value) ? CUDA_SUCCESS
                                            : CUDA_ERROR_INVALID_VALUE;
}

FFF_DRIVER_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
  Lock lock(driver().mutex);
  if (!bytes)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult result = checkDevice(device))
    return result;
  *bytes = TotalMemory;
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Contexts
//===----------------------------------------------------------------------===//

FFF_DRIVER_API CUresult cuDevicePrimaryCtxRetain(CUcontext *context,
                                                 CUdevice device) {
  Lock lock(driver().mutex);
  if (!context)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult result = checkDevice(device))
    return result;
  ++driver().primaryRetains;
  *context = &driver().primaryContext;
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  Lock lock(driver().mutex);
  if (CUresult result = checkDevice(device))
    return result;
  if (driver().primaryRetains == 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (--driver().primaryRetains == 0)
    driver().resetContext(&driver().primaryContext);
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice device) {
  Lock lock(driver().mutex);
  if (CUresult result = checkDevice(device))
    return result;
  driver().resetContext(&driver().primaryContext);
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuCtxCreate_v2(CUcontext *context, unsigned flags,
                                       CUdevice device) {
  Lock lock(driver().mutex);
  if (!context)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult result = checkDevice(device))
    return result;
  *context = driver().createContext();
  Driver::contextStack().push_back(*context);
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuCtxDestroy_v2(CUcontext context) {
  Lock lock(driver().mutex);
  if (!driver().isContext(context) || context->primary)
    return CUDA_ERROR_INVALID_CONTEXT;
  driver().destroyContext(context);
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuCtxSetCurrent(CUcontext context) {
  Lock lock(driver().mutex);
  if (!driver().initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  std::vector<Context *> &stack = Driver::contextStack();
  if (!context) {
    if (!stack.empty())
      stack.pop_back();
    return CUDA_SUCCESS;
  }
  if (!driver().isContext(context))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (stack.empty())
    stack.push_back(context);
  else
    stack.back() = context;
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuCtxGetCurrent(CUcontext *context) {
  Lock lock(driver().mutex);
  if (!context)
    return CUDA_ERROR_INVALID_VALUE;
  if (!driver().initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  std::vector<Context *> &stack = Driver::contextStack();
  *context = stack.empty() ? nullptr : stack.back();
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuCtxPushCurrent_v2(CUcontext context) {
  Lock lock(driver().mutex);
  if (!driver().initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!driver().isContext(context))
    return CUDA_ERROR_INVALID_CONTEXT;
  Driver::contextStack().push_back(context);
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuCtxPopCurrent_v2(CUcontext *context) {
  Lock lock(driver().mutex);
  if (!driver().initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  std::vector<Context *> &stack = Driver::contextStack();
  if (stack.empty())
    return CUDA_ERROR_INVALID_CONTEXT;
  if (context)
    *context = stack.back();
  stack.pop_back();
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuCtxGetDevice(CUdevice *device) {
  Lock lock(driver().mutex);
  Context *context;
  if (CUresult result = driver().currentContext(context))
    return result;
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}

/// CUDA 13's form, naming the context (null: the current one).
FFF_DRIVER_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext context) {
  if (!context)
    return cuCtxGetDevice(device);
  Lock lock(driver().mutex);
  if (!driver().isContext(context))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}

/// Work is done when it returns, so only a sticky error is left to report.
FFF_DRIVER_API CUresult cuCtxSynchronize() {
  Lock lock(driver().mutex);
  Context *context;
  return driver().currentContext(context);
}

FFF_DRIVER_API CUresult cuCtxSynchronize_v2(CUcontext context) {
  if (!context)
    return cuCtxSynchronize();
  Lock lock(driver().mutex);
  if (!driver().isContext(context))
    return CUDA_ERROR_INVALID_CONTEXT;
  return context->stickyError;
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

FFF_DRIVER_API CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
  Lock lock(driver().mutex);
  Context *context;
  if (CUresult result = driver().currentContext(context))
    return result;
  if (!pointer || !bytes)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t address = driver().memory.allocate(bytes, context);
  if (!address)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = address;
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuMemFree_v2(CUdeviceptr pointer) {
  Lock lock(driver().mutex);
  Context *context;
  if (CUresult result = driver().currentContext(context))
    return result;
  if (!pointer)
    return CUDA_SUCCESS;
  if (!driver().memory.release(pointer))
    return reportError(CUDA_ERROR_INVALID_VALUE,
                       "cuMemFree: " + formatHex(pointer) +
                           " is not the start of an allocation");
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuMemcpyHtoD_v2(CUdeviceptr destination,
                                        const void *source, size_t bytes) {
  return copy(destination, reinterpret_cast<uintptr_t>(source), bytes, true,
              false, nullptr, "cuMemcpyHtoD");
}

FFF_DRIVER_API CUresult cuMemcpyDtoH_v2(void *destination, CUdeviceptr source,
                                        size_t bytes) {
  return copy(reinterpret_cast<uintptr_t>(destination), source, bytes, false,
              true, nullptr, "cuMemcpyDtoH");
}

FFF_DRIVER_API CUresult cuMemcpyDtoD_v2(CUdeviceptr destination,
                                        CUdeviceptr source, size_t bytes) {
  return copy(destination, source, bytes, true, true, nullptr, "cuMemcpyDtoD");
}

FFF_DRIVER_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr destination,
                                             const void *source, size_t bytes,
                                             CUstream stream) {
  return copy(destination, reinterpret_cast<uintptr_t>(source), bytes, true,
              false, stream, "cuMemcpyHtoDAsync");
}

FFF_DRIVER_API CUresult cuMemcpyDtoHAsync_v2(void *destination,
                                             CUdeviceptr source, size_t bytes,
                                             CUstream stream) {
  return copy(reinterpret_cast<uintptr_t>(destination), source, bytes, false,
              true, stream, "cuMemcpyDtoHAsync");
}

FFF_DRIVER_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr destination,
                                             CUdeviceptr source, size_t bytes,
                                             CUstream stream) {
  return copy(destination, source, bytes, true, true, stream,
              "cuMemcpyDtoDAsync");
}

FFF_DRIVER_API CUresult cuMemsetD8_v2(CUdeviceptr destination,
                                      unsigned char value, size_t count) {
  return fill(destination, value, count, nullptr);
}

// Stream-ordered allocation: the emulator runs work as it is queued, so
// allocating and freeing "on a stream" is allocating and freeing now.
FFF_DRIVER_API CUresult cuMemAllocAsync(CUdeviceptr *pointer, size_t bytes,
                                        CUstream stream) {
  {
    Lock lock(driver().mutex);
    if (!isValidStream(stream))
      return CUDA_ERROR_INVALID_HANDLE;
  }
  return cuMemAlloc_v2(pointer, bytes);
}

FFF_DRIVER_API CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  {
    Lock lock(driver().mutex);
    if (!isValidStream(stream))
      return CUDA_ERROR_INVALID_HANDLE;
  }
  return cuMemFree_v2(pointer);
}

FFF_DRIVER_API CUresult cuMemsetD8Async(CUdeviceptr destination,
                                        unsigned char value, size_t count,
                                        CUstream stream) {
  return fill(destination, value, count, stream);
}

//===----------------------------------------------------------------------===//
// Modules and launches
//===----------------------------------------------------------------------===//

FFF_DRIVER_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                                           unsigned numOptions,
                                           CUjit_option *options,
                                           void **optionValues) {
  Lock lock(driver().mutex);
  Context *context;
  if (CUresult result = driver().currentContext(context))
    return result;
  if (!module || !image || (numOptions && (!options || !optionValues)))
    return CUDA_ERROR_INVALID_VALUE;
  std::string log;
  CUresult result = driver().loadModule(
      context, static_cast<const char *>(image), *module, log);
  writeJitLog(numOptions, options, optionValues, CU_JIT_ERROR_LOG_BUFFER,
              CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, log);
  writeJitLog(numOptions, options, optionValues, CU_JIT_INFO_LOG_BUFFER,
              CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, "");
  return result;
}

FFF_DRIVER_API CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  return cuModuleLoadDataEx(module, image, 0, nullptr, nullptr);
}

FFF_DRIVER_API CUresult cuModuleUnload(CUmodule module) {
  Lock lock(driver().mutex);
  if (!driver().initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!driver().isModule(module))
    return CUDA_ERROR_INVALID_HANDLE;
  driver().unloadModule(module);
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuModuleGetFunction(CUfunction *function,
                                            CUmodule module, const char *name) {
  Lock lock(driver().mutex);
  Context *context;
  if (CUresult result = driver().currentContext(context))
    return result;
  if (!function || !name)
    return CUDA_ERROR_INVALID_VALUE;
  if (!driver().isModule(module))
    return CUDA_ERROR_INVALID_HANDLE;
  return driver().getFunction(module, name, *function);
}

FFF_DRIVER_API CUresult cuLaunchKernel(CUfunction function, unsigned gridX,
                                       unsigned gridY, unsigned gridZ,
                                       unsigned blockX, unsigned blockY,
                                       unsigned blockZ, unsigned sharedBytes,
                                       CUstream stream, void **parameters,
                                       void **extra) {
  Lock lock(driver().mutex);
  Context *context;
  if (CUresult result = driver().currentContext(context))
    return result;
  if (!driver().isFunction(function) || !isValidStream(stream))
    return CUDA_ERROR_INVALID_HANDLE;
  return driver().launch(context, function, {gridX, gridY, gridZ},
                         {blockX, blockY, blockZ}, sharedBytes, parameters,
                         extra);
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

FFF_DRIVER_API CUresult cuStreamCreate(CUstream *stream, unsigned flags) {
  Lock lock(driver().mutex);
  Context *context;
  if (CUresult result = driver().currentContext(context))
    return result;
  if (!stream)
    return CUDA_ERROR_INVALID_VALUE;
  *stream = driver().createStream(context);
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuStreamDestroy_v2(CUstream stream) {
  Lock lock(driver().mutex);
  if (!driver().isStream(stream))
    return CUDA_ERROR_INVALID_HANDLE;
  driver().destroyStream(stream);
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuStreamSynchronize(CUstream stream) {
  Lock lock(driver().mutex);
  Context *context;
  if (CUresult result = driver().currentContext(context))
    return result;
  return isValidStream(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FFF_DRIVER_API CUresult cuEventCreate(CUevent *event, unsigned flags) {
  Lock lock(driver().mutex);
  Context *context;
  if (CUresult result = driver().currentContext(context))
    return result;
  if (!event)
    return CUDA_ERROR_INVALID_VALUE;
  *event = driver().createEvent(context, flags);
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuEventRecord(CUevent event, CUstream stream) {
  Lock lock(driver().mutex);
  Context *context;
  if (CUresult result = driver().currentContext(context))
    return result;
  if (!driver().isEvent(event) || !isValidStream(stream))
    return CUDA_ERROR_INVALID_HANDLE;
  event->recorded = true;
  event->time = std::chrono::steady_clock::now();
  return CUDA_SUCCESS;
}

FFF_DRIVER_API CUresult cuEventSynchronize(CUevent event) {
  Lock lock(driver().mutex);
  if (!driver().isEvent(event))
    return CUDA_ERROR_INVALID_HANDLE;
  return event->context->stickyError;
}

/// The host time between the two records: the emulator's, not a GPU's.
FFF_DRIVER_API CUresult cuEventElapsedTime(float *milliseconds, CUevent start,
                                           CUevent end) {
  Lock lock(driver().mutex);
  if (!milliseconds)
    return CUDA_ERROR_INVALID_VALUE;
  if (!driver().isEvent(start) || !driver().isEvent(end) || !start->timed ||
      !end->timed || !start->recorded || !end->recorded)
    return CUDA_ERROR_INVALID_HANDLE;
  *milliseconds =
      std::chrono::duration<float, std::milli>(end->time - start->time).count();
  return CUDA_SUCCESS;
}

/// CUDA 12.8's version: the same contract.
FFF_DRIVER_API CUresult cuEventElapsedTime_v2(float *milliseconds,
                                              CUevent start, CUevent end) {
  return cuEventElapsedTime(milliseconds, start, end);
}

FFF_DRIVER_API CUresult cuEventDestroy_v2(CUevent event) {
  Lock lock(driver().mutex);
  if (!driver().isEvent(event))
    return CUDA_ERROR_INVALID_HANDLE;
  driver().destroyEvent(event);
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Errors and entry points by name
//===----------------------------------------------------------------------===//

FFF_DRIVER_API CUresult cuGetErrorName(CUresult error, const char **name) {
  if (!name)
    return CUDA_ERROR_INVALID_VALUE;
  *name = errorName(error);
  return *name ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FFF_DRIVER_API CUresult cuGetErrorString(CUresult error, const char **text) {
  if (!text)
    return CUDA_ERROR_INVALID_VALUE;
  *text = errorString(error);
  return *text ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FFF_DRIVER_API CUresult cuGetProcAddress(const char *symbol, void **function,
                                         int cudaVersion, cuuint64_t flags);
FFF_DRIVER_API CUresult
cuGetProcAddress_v2(const char *symbol, void **function, int cudaVersion,
                    cuuint64_t flags, CUdriverProcAddressQueryResult *status);

namespace {

/// An entry point by its base name, as of the CUDA version that introduced
/// that ABI (cudaTypedefs.h's PFN_name_vVERSION). Versions whose ABI the
/// emulator does not implement have no function.
struct EntryPoint {
  const char *name;
  int version;
  void *function;
};

#define IMPLEMENTED(NAME, VERSION, FUNCTION)                                   \
  { NAME, VERSION, reinterpret_cast<void *>(&FUNCTION) }
#define MISSING(NAME, VERSION)                                                 \
  { NAME, VERSION, nullptr }

const EntryPoint entryPoints[] = {
    IMPLEMENTED("cuInit", 2000, cuInit),
    IMPLEMENTED("cuDriverGetVersion", 2020, cuDriverGetVersion),
    IMPLEMENTED("cuDeviceGet", 2000, cuDeviceGet),
    IMPLEMENTED("cuDeviceGetCount", 2000, cuDeviceGetCount),
    IMPLEMENTED("cuDeviceGetName", 2000, cuDeviceGetName),
    IMPLEMENTED("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    MISSING("cuDeviceTotalMem", 2000),
    IMPLEMENTED("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    IMPLEMENTED("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    MISSING("cuDevicePrimaryCtxRelease", 7000),
    IMPLEMENTED("cuDevicePrimaryCtxRelease", 11000,
                cuDevicePrimaryCtxRelease_v2),
    MISSING("cuDevicePrimaryCtxReset", 7000),
    IMPLEMENTED("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
    MISSING("cuCtxCreate", 2000),
    IMPLEMENTED("cuCtxCreate", 3020, cuCtxCreate_v2),
    MISSING("cuCtxCreate", 11040),
    MISSING("cuCtxCreate", 12050),
    MISSING("cuCtxDestroy", 2000),
    IMPLEMENTED("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    IMPLEMENTED("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    IMPLEMENTED("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    MISSING("cuCtxPushCurrent", 2000),
    IMPLEMENTED("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    MISSING("cuCtxPopCurrent", 2000),
    IMPLEMENTED("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    IMPLEMENTED("cuCtxGetDevice", 2000, cuCtxGetDevice),
    IMPLEMENTED("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
    IMPLEMENTED("cuCtxSynchronize", 2000, cuCtxSynchronize),
    IMPLEMENTED("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
    MISSING("cuMemAlloc", 2000),
    IMPLEMENTED("cuMemAlloc", 3020, cuMemAlloc_v2),
    MISSING("cuMemFree", 2000),
    IMPLEMENTED("cuMemFree", 3020, cuMemFree_v2),
    MISSING("cuMemcpyHtoD", 2000),
    IMPLEMENTED("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2),
    MISSING("cuMemcpyDtoH", 2000),
    IMPLEMENTED("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2),
    MISSING("cuMemcpyDtoD", 2000),
    IMPLEMENTED("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2),
    MISSING("cuMemcpyHtoDAsync", 2000),
    IMPLEMENTED("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2),
    MISSING("cuMemcpyDtoHAsync", 2000),
    IMPLEMENTED("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2),
    MISSING("cuMemcpyDtoDAsync", 3000),
    IMPLEMENTED("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2),
    MISSING("cuMemsetD8", 2000),
    IMPLEMENTED("cuMemsetD8", 3020, cuMemsetD8_v2),
    IMPLEMENTED("cuMemsetD8Async", 3020, cuMemsetD8Async),
    IMPLEMENTED("cuMemAllocAsync", 11020, cuMemAllocAsync),
    IMPLEMENTED("cuMemFreeAsync", 11020, cuMemFreeAsync),
    IMPLEMENTED("cuModuleLoadData", 2000, cuModuleLoadData),
    IMPLEMENTED("cuModuleLoadDataEx", 2010, cuModuleLoadDataEx),
    IMPLEMENTED("cuModuleUnload", 2000, cuModuleUnload),
    IMPLEMENTED("cuModuleGetFunction", 2000, cuModuleGetFunction),
    IMPLEMENTED("cuLaunchKernel", 4000, cuLaunchKernel),
    IMPLEMENTED("cuStreamCreate", 2000, cuStreamCreate),
    MISSING("cuStreamDestroy", 2000),
    IMPLEMENTED("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    IMPLEMENTED("cuStreamSynchronize", 2000, cuStreamSynchronize),
    IMPLEMENTED("cuEventCreate", 2000, cuEventCreate),
    IMPLEMENTED("cuEventRecord", 2000, cuEventRecord),
    IMPLEMENTED("cuEventSynchronize", 2000, cuEventSynchronize),
    IMPLEMENTED("cuEventElapsedTime", 2000, cuEventElapsedTime),
    IMPLEMENTED("cuEventElapsedTime", 12080, cuEventElapsedTime_v2),
    MISSING("cuEventDestroy", 2000),
    IMPLEMENTED("cuEventDestroy", 4000, cuEventDestroy_v2),
    IMPLEMENTED("cuGetErrorName", 6000, cuGetErrorName),
    IMPLEMENTED("cuGetErrorString", 6000, cuGetErrorString),
    IMPLEMENTED("cuGetProcAddress", 11030, cuGetProcAddress),
    IMPLEMENTED("cuGetProcAddress", 12000, cuGetProcAddress_v2),
};

#undef IMPLEMENTED
#undef MISSING

} // namespace

/// The function `symbol` names in the ABI of `cudaVersion`. Launches and
/// copies run synchronously, so the per-thread default-stream variants the
/// flags may ask for are the same functions.
FFF_DRIVER_API CUresult
cuGetProcAddress_v2(const char *symbol, void **function, int cudaVersion,
                    cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
  if (!symbol || !function)
    return CUDA_ERROR_INVALID_VALUE;
  const EntryPoint *best = nullptr;
  bool known = false;
  for (const EntryPoint &entry : entryPoints) {
    if (std::strcmp(entry.name, symbol) != 0)
      continue;
    known = true;
    if (entry.version <= cudaVersion &&
        (!best || entry.version > best->version))
      best = &entry;
  }
  *function = best ? best->function : nullptr;
  if (status)
    *status = *function        ? CU_GET_PROC_ADDRESS_SUCCESS
              : known && !best ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                               : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *function ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/// The CUDA 11.3 form, without the status.
FFF_DRIVER_API CUresult cuGetProcAddress(const char *symbol, void **function,
                                         int cudaVersion, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, function, cudaVersion, flags, nullptr);
}

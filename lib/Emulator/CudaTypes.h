//===- CudaTypes.h - The slice of cuda.h the emulator uses ------*- C++ -*-===//
//
// Declared here rather than taken from cuda.h, so that the emulator builds
// without a CUDA toolkit. Values and layouts are the driver API's.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_CUDATYPES_H
#define FFF_EMULATOR_CUDATYPES_H

#include <cstdint>

namespace fff::emulator {
struct Context;
struct LoadedModule;
struct Function;
struct Stream;
struct Event;
} // namespace fff::emulator

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = fff::emulator::Context *;
using CUmodule = fff::emulator::LoadedModule *;
using CUfunction = fff::emulator::Function *;
using CUstream = fff::emulator::Stream *;
using CUevent = fff::emulator::Event *;
using CUdevice_attribute = int;
using CUjit_option = int;
using cuuint64_t = uint64_t;
using CUdriverProcAddressQueryResult = int;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
constexpr CUresult CUDA_ERROR_MISALIGNED_ADDRESS = 716;
constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;

constexpr int CU_JIT_INFO_LOG_BUFFER = 3;
constexpr int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

constexpr uintptr_t CU_LAUNCH_PARAM_END = 0;
constexpr uintptr_t CU_LAUNCH_PARAM_BUFFER_POINTER = 1;
constexpr uintptr_t CU_LAUNCH_PARAM_BUFFER_SIZE = 2;

constexpr int CU_GET_PROC_ADDRESS_SUCCESS = 0;
constexpr int CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1;
constexpr int CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2;

constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;

#endif // FFF_EMULATOR_CUDATYPES_H

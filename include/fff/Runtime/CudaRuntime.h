/*===- CudaRuntime.h - fff's CUDA host runtime, C API -------------*- C -*-===*\
|*                                                                            *|
|* Kernels compiled by --fff-gpu-pipeline call the mgpu* entry points that    *|
|* MLIR's gpu-to-llvm emits; libfff_cuda_runtime implements them over the     *|
|* CUDA driver API, which it loads only when first needed: the library named  *|
|* by the environment variable FFF_CUDA_DRIVER (fff's PTX emulator, say), or  *|
|* libcuda.so.1 when it is unset.                                             *|
|* These functions let an embedder steer it.                                  *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef FFF_RUNTIME_CUDARUNTIME_H
#define FFF_RUNTIME_CUDARUNTIME_H

/* fffGetLastError reports CUDA errors too. */
#include "fff/Runtime/Runtime.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Launch fff's kernels on `stream` (a CUstream, e.g. PyTorch's
   torch.cuda.current_stream().cuda_stream) and return without waiting, like
   any other work queued on that stream. NULL (the default) restores
   synchronous calls on a private stream. */
void fffSetStream(void *stream);

/* The entry points compiled GPU modules call (the ABI of MLIR's
   gpu-to-llvm lowering); a JIT that runs such a module resolves them here. */
void *mgpuModuleLoadJIT(void *data, int optLevel);
void *mgpuModuleLoad(void *data, size_t size);
void mgpuModuleUnload(void *module);
void *mgpuModuleGetFunction(void *module, const char *name);
void *mgpuStreamCreate(void);
void mgpuStreamSynchronize(void *stream);
void mgpuStreamDestroy(void *stream);
void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t sharedMemoryBytes, void *stream,
                      void **params, void **extra, size_t paramsCount);
void *mgpuMemAlloc(uint64_t bytes, void *stream, bool hostShared);
void mgpuMemFree(void *pointer, void *stream);

/* The device copy of the host constant at `host` (`bytes` long), made on
   the first call and kept in `*slot`; NULL, with the error recorded, when
   it cannot be made. Compiled GPU modules call it for the weights baked
   into their IR (see the pass fff-upload-device-constants). */
void *fffDeviceConstant(void **slot, const void *host, int64_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* FFF_RUNTIME_CUDARUNTIME_H */

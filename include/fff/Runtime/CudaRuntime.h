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

#ifdef __cplusplus
extern "C" {
#endif

/* Launch fff's kernels on `stream` (a CUstream, e.g. PyTorch's
   torch.cuda.current_stream().cuda_stream) and return without waiting, like
   any other work queued on that stream. NULL (the default) restores
   synchronous calls on a private stream. */
void fffSetStream(void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FFF_RUNTIME_CUDARUNTIME_H */

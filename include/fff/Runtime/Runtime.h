/*===- Runtime.h - what every compiled fff module calls, C API ----*- C -*-===*\
|*                                                                            *|
|* Code that fff's pipelines compile checks what it is given (buffers,        *|
|* extents, allocations) and reports a failed check here rather than          *|
|* aborting the process; the caller asks for it with fffGetLastError. Every   *|
|* fff runtime (fff-run's JIT, libfff_cuda_runtime in AOT libraries) links    *|
|* this one implementation, and with it the host buffer cache.                *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef FFF_RUNTIME_RUNTIME_H
#define FFF_RUNTIME_RUNTIME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The first error since the last call, as one line, or NULL; clears it.
   Compiled entry points cannot return errors through MLIR's calling
   convention, so they record the first one here. After an entry point
   reports an error its results must not be read: it returned early. */
const char *fffGetLastError(void);

/* Called by compiled code when a run-time check fails (see the pass
   fff-lower-runtime-checks); records `message` unless an error is already
   recorded. */
void fffReportCheckFailure(const char *message);

/* The host buffer cache. A fresh buffer costs a page fault, and the kernel
   zeroing a page, on first touch of each 4 KiB: writing a fresh 64 MB result
   took 25 ms on this project's machine where writing one already touched
   took 5.5. Buffers of 128 KiB or more allocated here are kept when freed,
   up to a limit, and handed to the next allocation of their size class
   (sizes rounded up by at most 1/8), whose pages are then already mapped.
   Smaller ones are malloc's. Thread-safe.

   Code from the CPU pipeline's `buffer-cache` option allocates through
   MLIR's generic allocation functions, which fff-run and the Python package
   bind to these: _mlir_memref_to_llvm_alloc to fffHostAlloc,
   _mlir_memref_to_llvm_aligned_alloc to fffHostAlignedAlloc and
   _mlir_memref_to_llvm_free to fffHostFree. The caller then frees the
   results with fffHostFree. */
void *fffHostAlloc(size_t bytes);
void *fffHostAlignedAlloc(size_t alignment, size_t bytes);
/* Frees `buffer`, from fffHostAlloc, fffHostAlignedAlloc or malloc; NULL is
   ignored. */
void fffHostFree(void *buffer);
/* Sets how many bytes of freed buffers the cache keeps, releasing the
   oldest beyond it (0 keeps none), and returns the previous limit. The
   limit starts at the environment's FFF_BUFFER_CACHE_BYTES, or 1 GiB. */
size_t fffSetHostCacheLimit(size_t bytes);

/* A function compiled code calls, by the name it calls it. */
typedef struct {
  const char *name;
  void *address;
} FFFRuntimeSymbol;

/* fff's implementation of MLIR's async runtime (the entry points of
   mlir/ExecutionEngine/AsyncRuntime.h, under their names), on which CPU code
   runs its row and token loops in threads: `*count` symbols, for a JIT to
   resolve. AOT libraries link them from this library. */
const FFFRuntimeSymbol *fffAsyncRuntimeSymbols(size_t *count);

/* Where those loops' blocks run: "openmp" when the process has an OpenMP
   runtime loaded (torch's libgomp, say) and FFF_OPENMP is not 0, on teams
   of its threads (omp_get_max_threads() of them, so torch.set_num_threads
   applies); "fff" otherwise, on fff's own threads (one per usable core).
   Sets `*threads` to how many threads compute blocks. */
const char *fffParallelRuntime(int *threads);

#ifdef __cplusplus
}
#endif

#endif /* FFF_RUNTIME_RUNTIME_H */

/*===- Runtime.h - what every compiled fff module calls, C API ----*- C -*-===*\
|*                                                                            *|
|* Code that fff's pipelines compile checks what it is given (buffers,        *|
|* extents, allocations) and reports a failed check here rather than          *|
|* aborting the process; the caller asks for it with fffGetLastError. Every   *|
|* fff runtime (fff-run's JIT, libfff_cuda_runtime in AOT libraries) links    *|
|* this one implementation.                                                   *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef FFF_RUNTIME_RUNTIME_H
#define FFF_RUNTIME_RUNTIME_H

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

#ifdef __cplusplus
}
#endif

#endif /* FFF_RUNTIME_RUNTIME_H */

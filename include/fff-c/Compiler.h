/*===- Compiler.h - fff's registration and pipelines, C API ---------*- C -*-===*\
|*                                                                            *|
|* libFFFCAPI.so holds these, fff's runtime API (fff/Runtime/Runtime.h) and   *|
|* MLIR's own C API (mlir-c/IR.h, mlir-c/Pass.h, mlir-c/ExecutionEngine.h,    *|
|* ...), so that a C program or a language binding links it alone.            *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef FFF_C_COMPILER_H
#define FFF_C_COMPILER_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Adds to `registry` the fff dialect, every dialect fff's passes create,
   the external models its pipelines need and the translations to LLVM IR;
   with fffRegisterPasses, all a tool needs (fff/InitFFF.h). */
MLIR_CAPI_EXPORTED void fffRegisterDialects(MlirDialectRegistry registry);

/* Registers fff's passes, pipelines and translations globally. */
MLIR_CAPI_EXPORTED void fffRegisterPasses(void);

/* Runs the textual pass pipeline `pipeline` on `module`: a pipeline name
   such as "fff-cpu-pipeline", "fff-gpu-pipeline{chip=sm_90}", or a full
   "builtin.module(...)". On failure, calls `onError` (when not null) once,
   with the first error as one line, and returns failure; the module is then
   left as the failing pass left it. */
MLIR_CAPI_EXPORTED MlirLogicalResult fffRunPipeline(MlirModule module,
                                                    MlirStringRef pipeline,
                                                    MlirStringCallback onError,
                                                    void *userData);

/* Calls `callback` with the PTX of every kernel in `module`, a module after
   fff-gpu-pipeline; fails (calling `onError`) when it holds none. */
MLIR_CAPI_EXPORTED MlirLogicalResult fffExtractPTX(MlirModule module,
                                                   MlirStringCallback callback,
                                                   MlirStringCallback onError,
                                                   void *userData);

/* Calls `callback` with a JSON description of the public functions of
   `module` (before lowering), for bindings that marshal arguments:
     [{"name": "f", "arguments": [{"element": "bf16", "shape": [-1, 768]}],
       "results": [...]}]
   A dynamic extent is -1; an argument that is not a ranked tensor has
   "element": null. */
MLIR_CAPI_EXPORTED void fffDescribeFunctions(MlirModule module,
                                             MlirStringCallback callback,
                                             void *userData);

#ifdef __cplusplus
}
#endif

#endif /* FFF_C_COMPILER_H */

/*===- FFF.h - the fff dialect, C API -------------------------------*- C -*-===*\
|*                                                                            *|
|* The dialect handle, as every upstream dialect's C API has one:            *|
|*   mlirDialectHandleInsertDialect(mlirGetDialectHandle__fff__(), registry). *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef FFF_C_DIALECT_FFF_H
#define FFF_C_DIALECT_FFF_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(FFF, fff);

#ifdef __cplusplus
}
#endif

#endif /* FFF_C_DIALECT_FFF_H */

/* A C program that uses fff through libFFFCAPI.so alone: it registers the
   fff dialect handle and fff's dialects and passes, parses a module, runs a
   pipeline given on the command line, and prints the result (or the PTX
   with --ptx, the functions' signatures with --describe). */

#include "fff-c/Compiler.h"
#include "fff-c/Dialect/FFF.h"
#include "mlir-c/IR.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print(MlirStringRef text, void *stream) {
  fwrite(text.data, 1, text.length, (FILE *)stream);
}

static char *readFile(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc(size + 1);
  size_t read = fread(text, 1, size, f);
  text[read] = 0;
  fclose(f);
  return text;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: compile FILE.mlir PIPELINE --print|--ptx|--describe\n");
    return 2;
  }
  char *source = readFile(argv[1]);
  if (!source) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }

  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirDialectHandleInsertDialect(mlirGetDialectHandle__fff__(), registry);
  fffRegisterDialects(registry);
  fffRegisterPasses();
  MlirContext context = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);

  MlirModule module = mlirModuleCreateParse(context, mlirStringRefCreateFromCString(source));
  int status = 0;
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "cannot parse %s\n", argv[1]);
    status = 1;
  } else if (!strcmp(argv[3], "--describe")) {
    fffDescribeFunctions(module, print, stdout);
    printf("\n");
  } else if (mlirLogicalResultIsFailure(fffRunPipeline(
                 module, mlirStringRefCreateFromCString(argv[2]), print, stderr))) {
    fprintf(stderr, "\n");
    status = 1;
  } else if (!strcmp(argv[3], "--ptx")) {
    if (mlirLogicalResultIsFailure(fffExtractPTX(module, print, print, stdout)))
      status = 1;
  } else {
    mlirOperationPrint(mlirModuleGetOperation(module), print, stdout);
    printf("\n");
  }
  if (!mlirModuleIsNull(module))
    mlirModuleDestroy(module);
  mlirContextDestroy(context);
  free(source);
  return status;
}

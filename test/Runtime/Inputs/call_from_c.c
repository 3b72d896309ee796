/* Calls a function of an fff AOT library from C, in the memref ABI. Without a
   CUDA driver the call must return normally with the reason recorded. */
#include "fff/Runtime/CudaRuntime.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* memref<?x768xbf16> is (allocated, aligned, offset, size0, size1, stride0,
   stride1); memref<768xbf16> is (allocated, aligned, offset, size, stride). */
void rms_norm_768(void *, void *, int64_t, int64_t, int64_t, int64_t, int64_t,
                  void *, void *, int64_t, int64_t, int64_t,
                  void *, void *, int64_t, int64_t, int64_t, int64_t, int64_t);

int main(void) {
  enum { Rows = 2, Hidden = 768 };
  /* The kernels' 128-bit accesses need 16-byte aligned buffers. */
  _Alignas(16) static uint16_t x[Rows * Hidden], gamma[Hidden], y[Rows * Hidden];
  const char *error = fffGetLastError(); /* from loading the kernels */
  if (!error) {
    printf("CUDA driver present: not calling with host pointers\n");
    return 0;
  }
  printf("load: %s\n", error);
  rms_norm_768(x, x, 0, Rows, Hidden, Hidden, 1, gamma, gamma, 0, Hidden, 1,
               y, y, 0, Rows, Hidden, Hidden, 1);
  error = fffGetLastError();
  printf("call: %s\n", error ? error : "(no error)");
  return error && strstr(error, "kernel") ? 0 : 1;
}

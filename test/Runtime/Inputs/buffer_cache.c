/* The host buffer cache (fff/Runtime/Runtime.h), through its C API: which
   buffers come back, and which never may. Prints one line per check and
   exits nonzero on the first that fails. */
#include "fff/Runtime/Runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void check(int ok, const char *what) {
  printf("%s: %s\n", ok ? "ok" : "FAILED", what);
  failures += !ok;
}

static int aligned(void *p, uintptr_t alignment) {
  return ((uintptr_t)p & (alignment - 1)) == 0;
}

int main(int argc, char **argv) {
  size_t expectedLimit = argc > 1 ? strtoull(argv[1], 0, 10) : (size_t)1 << 30;
  size_t mib = (size_t)1 << 20;

  /* The limit starts at FFF_BUFFER_CACHE_BYTES, or 1 GiB. */
  size_t limit = fffSetHostCacheLimit(expectedLimit);
  check(limit == expectedLimit, "the first limit is the environment's");
  if (expectedLimit == 0) {
    /* Nothing is kept: a freed buffer is released at once (which malloc may
       hand out again, so only correctness can be checked). */
    char *a = fffHostAlloc(3 * mib);
    memset(a, 7, 3 * mib);
    fffHostFree(a);
    char *b = fffHostAlloc(3 * mib);
    memset(b, 9, 3 * mib);
    check(b[3 * mib - 1] == 9, "with no cache, buffers still work");
    fffHostFree(b);
    return failures != 0;
  }

  /* A freed large buffer is the next one of its size, with its contents
     (nothing clears it: malloc's contract). */
  char *first = fffHostAlloc(3 * mib);
  memset(first, 0x5a, 3 * mib);
  fffHostFree(first);
  char *again = fffHostAlloc(3 * mib);
  check(again == first, "a freed 3 MiB buffer is reused for 3 MiB");
  check(again[12345] == 0x5a, "its pages are the ones already written");

  /* Never a buffer in use. */
  char *second = fffHostAlloc(3 * mib);
  check(second != again, "a second live buffer of the size is another one");
  memset(second, 1, 3 * mib);
  check(again[3 * mib - 1] == 0x5a, "writing it leaves the first alone");
  fffHostFree(second);
  fffHostFree(again);

  /* Sizes within an eighth of their power of two share a class. */
  char *near = fffHostAlloc(3 * mib - 100000);
  check(near == again || near == second,
        "3 MiB - 100000 bytes takes a freed 3 MiB buffer");
  char *other = fffHostAlloc(3 * mib + 300000);
  check(other != again && other != second,
        "3 MiB + 300000 bytes is another class");
  memset(other, 2, 3 * mib + 300000);
  fffHostFree(near);
  fffHostFree(other);

  /* Alignment: large buffers start on a page; smaller ones as asked. */
  void *page = fffHostAlignedAlloc(64, 200000);
  check(aligned(page, 4096), "a large aligned buffer starts on a page");
  void *small = fffHostAlignedAlloc(256, 1000);
  check(aligned(small, 256), "a small one has the alignment asked for");
  void *huge = fffHostAlignedAlloc(8192, 300000);
  check(aligned(huge, 8192), "an alignment beyond a page is honoured");
  fffHostFree(page);
  fffHostFree(small);
  fffHostFree(huge);

  /* Small buffers are malloc's; malloc's may be freed here too, and leave
     the cache's own buffers as they were. */
  char *cached = fffHostAlloc(2 * mib);
  fffHostFree(cached);
  char *tiny = fffHostAlloc(100);
  memset(tiny, 3, 100);
  fffHostFree(tiny);
  fffHostFree(malloc(1000));
  fffHostFree(malloc(2 * mib));
  fffHostFree(NULL);
  char *back = fffHostAlloc(2 * mib);
  check(back == cached, "malloc's buffers and NULL are freed");
  fffHostFree(back);

  /* A lower limit releases idle buffers beyond it: what is kept next is
     within it, and a buffer larger than the limit is not kept at all. */
  check(fffSetHostCacheLimit(2 * mib) == expectedLimit,
        "setting the limit returns the previous one");
  char *big = fffHostAlloc(3 * mib);
  fffHostFree(big);
  char *fresh = fffHostAlloc(3 * mib);
  memset(fresh, 4, 3 * mib);
  fffHostFree(fresh);
  char *kept = fffHostAlloc(mib);
  fffHostFree(kept);
  check(fffHostAlloc(mib) == kept, "a buffer within the limit is kept");
  check(fffSetHostCacheLimit(0) == 2 * mib, "the limit can be set to none");
  return failures != 0;
}

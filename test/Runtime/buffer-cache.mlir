// fff's host buffer cache, from C, linked against libFFFCAPI.so: freed
// buffers of 128 KiB or more come back for their size class and live ones
// never do; alignments hold; malloc's buffers may be freed through it; the
// limit comes from FFF_BUFFER_CACHE_BYTES and releases what lies beyond it.
//
// RUN: cc -std=c11 -Wall -Werror -I %fff_src_root/include %S/Inputs/buffer_cache.c -L %fff_obj_root/lib -lFFFCAPI -Wl,-rpath,%fff_obj_root/lib -o %t.cache
// RUN: env -u FFF_BUFFER_CACHE_BYTES %t.cache | FileCheck %s --implicit-check-not=FAILED
// RUN: env FFF_BUFFER_CACHE_BYTES=0 %t.cache 0 | FileCheck %s --check-prefix=NONE --implicit-check-not=FAILED
// RUN: env FFF_BUFFER_CACHE_BYTES=5000000 %t.cache 5000000 | FileCheck %s --implicit-check-not=FAILED
//
// CHECK: ok: the first limit is the environment's
// CHECK: ok: a freed 3 MiB buffer is reused for 3 MiB
// CHECK: ok: its pages are the ones already written
// CHECK: ok: a second live buffer of the size is another one
// CHECK: ok: writing it leaves the first alone
// CHECK: ok: 3 MiB - 100000 bytes takes a freed 3 MiB buffer
// CHECK: ok: 3 MiB + 300000 bytes is another class
// CHECK: ok: a large aligned buffer starts on a page
// CHECK: ok: a small one has the alignment asked for
// CHECK: ok: an alignment beyond a page is honoured
// CHECK: ok: malloc's buffers and NULL are freed
// CHECK: ok: setting the limit returns the previous one
// CHECK: ok: a buffer within the limit is kept
// CHECK: ok: the limit can be set to none
//
// NONE: ok: the first limit is the environment's
// NONE: ok: with no cache, buffers still work

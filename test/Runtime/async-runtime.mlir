// fff's async runtime (lib/Runtime/AsyncRuntime.cpp), from C, through the
// entry points fffAsyncRuntimeSymbols gives under MLIR's names, as compiled
// code calls them: groups of tasks dispatched back to back and to sleeping
// workers, each run once; errors; values; awaiters that run later or at
// once; a caller that runs the tasks no worker is free for; several callers
// at a time; a forked child.
//
// RUN: cc -std=c11 -Wall -Werror -pthread -I %fff_src_root/include %S/Inputs/async_runtime.c -L %fff_obj_root/lib -lFFFCAPI -Wl,-rpath,%fff_obj_root/lib -o %t.async
// RUN: %t.async | FileCheck %s --implicit-check-not=FAILED
//
// CHECK: ok: 23 entry points, MLIR's AsyncRuntime.h
// CHECK: ok: one block per usable core (the caller computes one)
// CHECK: ok: 20000 groups of 1-5 tasks, back to back, each task run once
// CHECK: ok: groups dispatched to sleeping workers
// CHECK: ok: a task's error is its group's
// CHECK: ok: a group without one has none
// CHECK: ok: an empty group is ready at once
// CHECK: ok: a token set to an error has one
// CHECK: ok: a value keeps its storage
// CHECK: ok: an awaiter waits for its token
// CHECK: ok: and runs when another thread emplaces it
// CHECK: ok: an awaiter of a ready token runs at once
// CHECK: ok: a group's awaiter runs with its last token
// CHECK: ok: a caller runs queued tasks no worker takes
// CHECK: ok: three threads dispatching groups at once
// CHECK: ok: a forked child runs its tasks

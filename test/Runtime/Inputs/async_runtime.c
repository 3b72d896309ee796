// fff's async runtime, called as compiled code calls it: through the
// entry points fffAsyncRuntimeSymbols gives, by MLIR's names.
#define _GNU_SOURCE
#include "fff/Runtime/Runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef void (*Resume)(void *);

static void *(*createToken)(void);
static void *(*createValue)(int64_t);
static void *(*createGroup)(int64_t);
static int64_t (*addTokenToGroup)(void *, void *);
static void (*emplaceToken)(void *), (*emplaceValue)(void *);
static void (*setTokenError)(void *);
static bool (*isTokenError)(void *), (*isGroupError)(void *);
static void (*awaitToken)(void *), (*awaitValue)(void *),
    (*awaitAllInGroup)(void *);
static char *(*valueStorage)(void *);
static void (*execute)(void *, Resume);
static void (*awaitTokenAndExecute)(void *, void *, Resume);
static void (*awaitAllInGroupAndExecute)(void *, void *, Resume);
static void (*dropRef)(void *, int64_t), (*addRef)(void *, int64_t);
static int64_t (*workerThreads)(void);

static int failures;
static void check(bool ok, const char *what) {
  printf("%s: %s\n", ok ? "ok" : "FAILED", what);
  failures += !ok;
}

static void *lookup(const char *name) {
  size_t count;
  const FFFRuntimeSymbol *symbols = fffAsyncRuntimeSymbols(&count);
  for (size_t i = 0; i < count; ++i)
    if (strcmp(symbols[i].name, name) == 0)
      return symbols[i].address;
  printf("FAILED: no entry point %s\n", name);
  exit(1);
}

// A task as compiled code makes one: a resume function and its handle, here
// a token the task makes ready after counting itself.
struct Task {
  void *token;
  atomic_int *ran;
  bool fail;
};

static void runTask(void *handle) {
  struct Task *task = handle;
  atomic_fetch_add(task->ran, 1);
  if (task->fail)
    setTokenError(task->token);
  else
    emplaceToken(task->token);
}

// Dispatches `n` tasks in a group, as a parallel loop's blocks are, and
// waits for them; true if each ran once. `failing` (or -1) sets its error.
static bool runGroup(int n, int failing, bool *groupError) {
  struct Task tasks[64];
  atomic_int ran = 0;
  void *group = createGroup(n);
  for (int i = 0; i < n; ++i) {
    tasks[i] = (struct Task){createToken(), &ran, i == failing};
    if (addTokenToGroup(tasks[i].token, group) != i)
      return false;
    execute(&tasks[i], runTask);
  }
  awaitAllInGroup(group);
  bool ok = atomic_load(&ran) == n;
  if (groupError)
    *groupError = isGroupError(group);
  for (int i = 0; i < n; ++i)
    dropRef(tasks[i].token, 1);
  dropRef(group, 1);
  return ok;
}

static atomic_int callbacks;
static void countCallback(void *handle) {
  (void)handle;
  atomic_fetch_add(&callbacks, 1);
}

static void emplaceLater(void *token) {
  usleep(2000);
  emplaceToken(token);
}

static atomic_int blocked, release;
static void blockWorker(void *token) {
  atomic_fetch_add(&blocked, 1);
  while (!atomic_load(&release))
    usleep(100);
  emplaceToken(token);
}

static void *caller(void *rounds) {
  for (intptr_t i = 0; i < (intptr_t)rounds; ++i)
    if (!runGroup(3, -1, NULL))
      return (void *)1;
  return NULL;
}

int main(void) {
  // A runtime that loses a task hangs its caller: fail instead.
  alarm(120);
  size_t count;
  fffAsyncRuntimeSymbols(&count);
  check(count == 23, "23 entry points, MLIR's AsyncRuntime.h");
  createToken = lookup("mlirAsyncRuntimeCreateToken");
  createValue = lookup("mlirAsyncRuntimeCreateValue");
  createGroup = lookup("mlirAsyncRuntimeCreateGroup");
  addTokenToGroup = lookup("mlirAsyncRuntimeAddTokenToGroup");
  emplaceToken = lookup("mlirAsyncRuntimeEmplaceToken");
  emplaceValue = lookup("mlirAsyncRuntimeEmplaceValue");
  setTokenError = lookup("mlirAsyncRuntimeSetTokenError");
  isTokenError = lookup("mlirAsyncRuntimeIsTokenError");
  isGroupError = lookup("mlirAsyncRuntimeIsGroupError");
  awaitToken = lookup("mlirAsyncRuntimeAwaitToken");
  awaitValue = lookup("mlirAsyncRuntimeAwaitValue");
  awaitAllInGroup = lookup("mlirAsyncRuntimeAwaitAllInGroup");
  valueStorage = lookup("mlirAsyncRuntimeGetValueStorage");
  execute = lookup("mlirAsyncRuntimeExecute");
  awaitTokenAndExecute = lookup("mlirAsyncRuntimeAwaitTokenAndExecute");
  awaitAllInGroupAndExecute =
      lookup("mlirAsyncRuntimeAwaitAllInGroupAndExecute");
  dropRef = lookup("mlirAsyncRuntimeDropRef");
  addRef = lookup("mlirAsyncRuntimeAddRef");
  workerThreads = lookup("mlirAsyncRuntimGetNumWorkerThreads");

  cpu_set_t cores;
  sched_getaffinity(0, sizeof(cores), &cores);
  check(workerThreads() == CPU_COUNT(&cores),
        "one block per usable core (the caller computes one)");

  bool ok = true;
  for (int round = 0; round < 20000 && ok; ++round)
    ok = runGroup(1 + round % 5, -1, NULL);
  check(ok, "20000 groups of 1-5 tasks, back to back, each task run once");
  ok = true;
  for (int round = 0; round < 50 && ok; ++round) {
    usleep(300); // the workers are asleep by now
    ok = runGroup(2, -1, NULL);
  }
  check(ok, "groups dispatched to sleeping workers");

  bool error = false;
  check(runGroup(4, 2, &error) && error, "a task's error is its group's");
  check(runGroup(4, -1, &error) && !error, "a group without one has none");
  check(runGroup(0, -1, &error) && !error, "an empty group is ready at once");

  void *token = createToken();
  setTokenError(token);
  check(isTokenError(token), "a token set to an error has one");
  dropRef(token, 1);

  void *value = createValue(sizeof(double));
  addRef(value, 1);
  *(double *)valueStorage(value) = 2.5;
  emplaceValue(value);
  awaitValue(value);
  check(*(double *)valueStorage(value) == 2.5, "a value keeps its storage");
  dropRef(value, 2);

  // An awaiter runs once the token is ready: later, in the thread that
  // makes it so, or at once if it already is.
  token = createToken();
  awaitTokenAndExecute(token, NULL, countCallback);
  check(atomic_load(&callbacks) == 0, "an awaiter waits for its token");
  execute(token, emplaceLater);
  awaitToken(token);
  check(atomic_load(&callbacks) == 1, "and runs when another thread emplaces it");
  awaitTokenAndExecute(token, NULL, countCallback);
  check(atomic_load(&callbacks) == 2, "an awaiter of a ready token runs at once");
  dropRef(token, 1);

  void *group = createGroup(1);
  token = createToken();
  addTokenToGroup(token, group);
  awaitAllInGroupAndExecute(group, NULL, countCallback);
  emplaceToken(token);
  check(atomic_load(&callbacks) == 3, "a group's awaiter runs with its last token");
  dropRef(token, 1);
  dropRef(group, 1);

  // With every worker busy, a caller runs the tasks it waits for itself.
  int64_t workers = workerThreads() - 1 > 0 ? workerThreads() - 1 : 1;
  void *blockers[64];
  for (int64_t i = 0; i < workers; ++i) {
    blockers[i] = createToken();
    execute(blockers[i], blockWorker);
  }
  while (atomic_load(&blocked) < workers)
    usleep(100);
  check(runGroup(3, -1, NULL), "a caller runs queued tasks no worker takes");
  atomic_store(&release, 1);
  for (int64_t i = 0; i < workers; ++i) {
    awaitToken(blockers[i]);
    dropRef(blockers[i], 1);
  }

  pthread_t threads[3];
  for (int i = 0; i < 3; ++i)
    pthread_create(&threads[i], NULL, caller, (void *)(intptr_t)3000);
  ok = true;
  for (int i = 0; i < 3; ++i) {
    void *result;
    pthread_join(threads[i], &result);
    ok = ok && result == NULL;
  }
  check(ok, "three threads dispatching groups at once");

  // A child forked after the workers started has none of them; it makes
  // its own.
  pid_t child = fork();
  if (child == 0)
    _exit(runGroup(2, -1, NULL) ? 0 : 1);
  int status;
  waitpid(child, &status, 0);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "a forked child runs its tasks");
  return failures != 0;
}

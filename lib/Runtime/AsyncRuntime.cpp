//===- AsyncRuntime.cpp - fff's implementation of MLIR's async runtime ----===//
//
// The entry points that code lowered from MLIR's async dialect calls
// (mlir/ExecutionEngine/AsyncRuntime.h): reference-counted tokens, values
// and groups, and a pool of threads that runs tasks (coroutine resumptions).
// The CPU pipeline uses them for one thing: a row or token loop split into
// one block per core, the caller computing the first block and waiting for
// the rest.
//
// MLIR's own library (libmlir_async_runtime.so) runs its tasks on LLVM's
// ThreadPool, whose workers sleep on a condition variable as soon as the
// queue is empty, and which has one worker per core besides the caller. On
// this project's 2-core VM a bf16 RMSNorm of 1024x768 then took 0.13 ms on
// two threads against 0.105 ms on one: each call woke a sleeping worker and
// was woken back, and three threads shared two cores. Here a worker spins a
// while on an empty queue before it sleeps, the caller spins a while before
// it sleeps on what it waits for, and there is one worker fewer than there
// are cores, so that back-to-back calls hand blocks over without the
// kernel (0.056 ms on two threads). While the caller waits it runs any task
// no worker has taken yet, and spinners yield now and then: in a process
// whose other threads hold the cores (torch's OpenMP workers spin after its
// parallel ops), the blocks then still get done.
//
// In a process that already runs an OpenMP runtime (torch's libgomp), the
// blocks run on its threads instead, and the pool has no workers of its
// own: torch's workers spin on the cores for a while after each of its
// parallel ops, so a thread of fff's found no core, and fff's LayerNorm
// backward of 4096x768 took 2 ms inside torch's backward against 1 ms
// alone. The thread that hands out a loop's blocks opens an OpenMP team
// (whose spinning workers start at once), the team runs queued tasks, and
// the team closes once what that thread waits for is ready. The team has
// omp_get_max_threads() threads, so torch.set_num_threads applies to fff's
// code too. FFF_OPENMP=0 keeps fff's own pool.
//
//===----------------------------------------------------------------------===//

#include "fff/Runtime/Runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace {

/// How long a thread with nothing to do polls before it sleeps. Calls made
/// back to back (a model's layers, a benchmark) come sooner than this; a
/// longer spin would take a core from whatever the process runs next.
constexpr std::chrono::microseconds kSpin(100);

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Polls `done` for up to kSpin; true once it holds.
template <typename Done> bool spinUntil(Done done) {
  auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (unsigned polls = 0;; ++polls) {
    if (done())
      return true;
    relax();
    if (polls % 64 != 63)
      continue;
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    // Let any other thread that wants this core have it.
    std::this_thread::yield();
  }
}

/// The cores this process may run on.
int64_t usableCores() {
  cpu_set_t cores;
  if (sched_getaffinity(0, sizeof(cores), &cores) == 0)
    return std::max(1, CPU_COUNT(&cores));
  return std::max(1u, std::thread::hardware_concurrency());
}

/// The OpenMP runtime the process has loaded, if any: GCC's entry points,
/// which LLVM's libomp exports too.
struct OpenMP {
  void (*parallelStart)(void (*body)(void *), void *data, unsigned threads);
  void (*parallelEnd)();
  int (*maxThreads)();
};

const OpenMP *hostOpenMP() {
  static const OpenMP *found = []() -> const OpenMP * {
    if (const char *choice = std::getenv("FFF_OPENMP"))
      if (std::strcmp(choice, "0") == 0)
        return nullptr;
    static OpenMP openMP;
    openMP.parallelStart = reinterpret_cast<decltype(openMP.parallelStart)>(
        dlsym(RTLD_DEFAULT, "GOMP_parallel_start"));
    openMP.parallelEnd = reinterpret_cast<decltype(openMP.parallelEnd)>(
        dlsym(RTLD_DEFAULT, "GOMP_parallel_end"));
    openMP.maxThreads = reinterpret_cast<decltype(openMP.maxThreads)>(
        dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    if (!openMP.parallelStart || !openMP.parallelEnd || !openMP.maxThreads)
      return nullptr;
    return &openMP;
  }();
  return found;
}

using Task = std::function<void()>;

/// Threads that run tasks, one fewer than there are cores: the thread that
/// hands out blocks computes one itself.
class Pool {
public:
  explicit Pool(int64_t workers) : workers(workers) {
    for (int64_t i = 0; i < workers; ++i)
      std::thread([this] { work(); }).detach();
  }

  /// Whether the pool has threads of its own (none under OpenMP).
  bool hasWorkers() const { return workers > 0; }

  void push(Task task) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mutex);
      tasks.push_back(std::move(task));
      queued.fetch_add(1, std::memory_order_release);
      wake = sleepers > 0;
    }
    if (wake)
      ready.notify_one();
  }

  /// Runs a queued task in this thread, if there is one.
  bool runOne() {
    if (queued.load(std::memory_order_acquire) == 0)
      return false;
    std::unique_lock<std::mutex> lock(mutex);
    if (tasks.empty())
      return false;
    runFront(lock);
    return true;
  }

private:
  [[noreturn]] void work() {
    for (;;) {
      bool spun = spinUntil(
          [&] { return queued.load(std::memory_order_acquire) > 0; });
      std::unique_lock<std::mutex> lock(mutex);
      if (tasks.empty()) {
        // Another worker took it: poll again.
        if (spun)
          continue;
        ++sleepers;
        ready.wait(lock, [&] { return !tasks.empty(); });
        --sleepers;
      }
      runFront(lock);
    }
  }

  /// Takes the first queued task (there is one, and `lock` holds the
  /// queue), releases the queue and runs it.
  void runFront(std::unique_lock<std::mutex> &lock) {
    Task task = std::move(tasks.front());
    tasks.pop_front();
    queued.fetch_sub(1, std::memory_order_relaxed);
    lock.unlock();
    task();
  }

  std::mutex mutex;
  std::condition_variable ready;
  std::deque<Task> tasks;
  std::atomic<int64_t> queued{0};
  int64_t sleepers = 0;
  const int64_t workers;
};

/// The pool of this process. It is never destroyed (its threads may still
/// be parked when the process exits), and a child forked from the process
/// makes its own, since it inherits none of the parent's threads.
std::atomic<Pool *> processPool{nullptr};
std::mutex poolCreation;

/// Set in a child forked from the process: GNU OpenMP's teams do not
/// survive a fork, so the child runs blocks on a pool of its own.
std::atomic<bool> forkedChild{false};

/// The OpenMP runtime whose teams run fff's tasks, if any.
const OpenMP *teamRuntime() {
  return forkedChild.load(std::memory_order_relaxed) ? nullptr : hostOpenMP();
}

Pool &pool() {
  if (Pool *existing = processPool.load(std::memory_order_acquire))
    return *existing;
  std::lock_guard<std::mutex> lock(poolCreation);
  if (!processPool.load(std::memory_order_relaxed)) {
    static bool forkHandled = (pthread_atfork(nullptr, nullptr,
                                              [] {
                                                forkedChild.store(true);
                                                processPool.store(nullptr);
                                              }),
                               true);
    (void)forkHandled;
    int64_t workers =
        teamRuntime() ? 0 : std::max<int64_t>(1, usableCores() - 1);
    processPool.store(new Pool(workers), std::memory_order_release);
  }
  return *processPool.load(std::memory_order_relaxed);
}

/// An OpenMP team that runs queued tasks until its leader, the thread that
/// opened it, closes it.
struct Team {
  /// Opens a team led by this thread unless it leads or serves in one.
  static void openHere() {
    const OpenMP *openMP = teamRuntime();
    if (!openMP || led || serving)
      return;
    led = new Team;
    openMP->parallelStart(&Team::serve, led, /*threads=*/0);
  }

  /// Closes the team this thread leads, if any; its members return once
  /// they finish the task they are running.
  static void closeHere() {
    if (!led)
      return;
    led->closing.store(true, std::memory_order_release);
    hostOpenMP()->parallelEnd();
    delete led;
    led = nullptr;
  }

private:
  /// A member's work (the leader's too, were it to call it): queued tasks.
  static void serve(void *opaque) {
    auto *team = static_cast<Team *>(opaque);
    serving = true;
    Pool &tasks = pool();
    for (unsigned polls = 0; !team->closing.load(std::memory_order_acquire);
         ++polls) {
      if (tasks.runOne())
        continue;
      relax();
      if (polls % 64 == 63)
        std::this_thread::yield();
    }
    serving = false;
  }

  std::atomic<bool> closing{false};
  static thread_local Team *led;
  static thread_local bool serving;
};

thread_local Team *Team::led = nullptr;
thread_local bool Team::serving = false;

/// What tokens, values and groups share: a count of references, dropped by
/// the compiled code and by the runtime; the object is deleted at zero.
struct RefCounted {
  explicit RefCounted(int64_t references) : references(references) {}
  virtual ~RefCounted() = default;
  void addRef(int64_t count) { references.fetch_add(count); }
  void dropRef(int64_t count) {
    if (references.fetch_sub(count) == count)
      delete this;
  }
  std::atomic<int64_t> references;
};

/// Something that becomes ready once: a token, a value (whose storage the
/// task fills first) or a group (when its last token does). Waiters block
/// on it; awaiters are callbacks run by whoever makes it ready.
struct Readiness : RefCounted {
  using RefCounted::RefCounted;

  bool isReady() const { return ready.load(std::memory_order_acquire); }

  /// Marks it ready (with an error, if `error`) and runs its awaiters.
  void makeReady(bool error) {
    std::vector<Task> toRun;
    {
      std::lock_guard<std::mutex> lock(mutex);
      failed = failed || error;
      ready.store(true, std::memory_order_release);
      toRun.swap(awaiters);
    }
    woken.notify_all();
    for (Task &awaiter : toRun)
      awaiter();
  }

  /// Blocks until it is ready: a spin, then a sleep. While it spins, it
  /// runs tasks that no worker has taken yet: their worker may be waiting
  /// for a core that other threads hold (torch's OpenMP workers, say, spin
  /// on them after torch's parallel ops). Without workers of the pool's
  /// own it never sleeps: a task it waits for may be queued with no one
  /// else to run it (a team of one thread, under torch.set_num_threads(1)).
  /// Once it is ready, it closes the team this thread opened, if any.
  void wait() {
    Pool &workers = pool();
    auto readyOrRanOne = [&] {
      return isReady() || (workers.runOne(), isReady());
    };
    if (!spinUntil(readyOrRanOne)) {
      if (workers.hasWorkers()) {
        std::unique_lock<std::mutex> lock(mutex);
        woken.wait(lock, [&] { return isReady(); });
      } else {
        while (!readyOrRanOne())
          std::this_thread::yield();
      }
    }
    Team::closeHere();
  }

  /// Runs `awaiter` once it is ready: now, in this thread, if it is already.
  void onReady(Task awaiter) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!isReady()) {
        awaiters.push_back(std::move(awaiter));
        return;
      }
    }
    awaiter();
  }

  bool hasError() {
    std::lock_guard<std::mutex> lock(mutex);
    return failed;
  }

  std::mutex mutex;
  std::condition_variable woken;
  std::atomic<bool> ready{false};
  bool failed = false;
  std::vector<Task> awaiters;
};

// Tokens and values are created with two references: the creator's, and
// one the runtime drops when the task makes them ready, which keeps them
// alive until then.
struct Token : Readiness {
  Token() : Readiness(2) {}
};

struct Value : Readiness {
  explicit Value(int64_t bytes) : Readiness(2), storage(size_t(bytes)) {}
  std::vector<std::byte> storage;
};

/// Ready once `size` tokens added to it are.
struct Group : Readiness {
  explicit Group(int64_t size) : Readiness(1), pending(size) {
    if (size == 0)
      makeReady(false);
  }
  void tokenReady(bool error) {
    if (error)
      errors.store(true);
    if (pending.fetch_sub(1) == 1)
      makeReady(errors);
  }
  std::atomic<int64_t> pending;
  std::atomic<int64_t> rank{0};
  std::atomic<bool> errors{false};
};

using CoroHandle = void *;
using CoroResume = void (*)(void *);

Task resumption(CoroHandle handle, CoroResume resume) {
  return [handle, resume] { resume(handle); };
}

} // namespace

// The entry points, under the names compiled code calls. Hidden: a process
// may also hold MLIR's library; hosts register these addresses with their
// JIT (fffAsyncRuntimeSymbols), and AOT libraries link them privately.
#define FFF_ASYNC_ENTRY extern "C" __attribute__((visibility("hidden")))

FFF_ASYNC_ENTRY void mlirAsyncRuntimeAddRef(void *object, int64_t count) {
  static_cast<RefCounted *>(object)->addRef(count);
}

FFF_ASYNC_ENTRY void mlirAsyncRuntimeDropRef(void *object, int64_t count) {
  static_cast<RefCounted *>(object)->dropRef(count);
}

FFF_ASYNC_ENTRY Token *mlirAsyncRuntimeCreateToken() { return new Token(); }

FFF_ASYNC_ENTRY Value *mlirAsyncRuntimeCreateValue(int64_t bytes) {
  return new Value(bytes);
}

FFF_ASYNC_ENTRY Group *mlirAsyncRuntimeCreateGroup(int64_t size) {
  return new Group(size);
}

FFF_ASYNC_ENTRY int64_t mlirAsyncRuntimeAddTokenToGroup(Token *token,
                                                        Group *group) {
  int64_t rank = group->rank.fetch_add(1);
  // The group lives until the token is ready.
  group->addRef(1);
  token->onReady([token, group] {
    group->tokenReady(token->failed);
    group->dropRef(1);
  });
  return rank;
}

/// Makes `object` ready and drops the reference the runtime held for it.
static void settle(Readiness *object, bool error) {
  object->makeReady(error);
  object->dropRef(1);
}

FFF_ASYNC_ENTRY void mlirAsyncRuntimeEmplaceToken(Token *token) {
  settle(token, false);
}

FFF_ASYNC_ENTRY void mlirAsyncRuntimeEmplaceValue(Value *value) {
  settle(value, false);
}

FFF_ASYNC_ENTRY void mlirAsyncRuntimeSetTokenError(Token *token) {
  settle(token, true);
}

FFF_ASYNC_ENTRY void mlirAsyncRuntimeSetValueError(Value *value) {
  settle(value, true);
}

FFF_ASYNC_ENTRY bool mlirAsyncRuntimeIsTokenError(Token *token) {
  return token->hasError();
}

FFF_ASYNC_ENTRY bool mlirAsyncRuntimeIsValueError(Value *value) {
  return value->hasError();
}

FFF_ASYNC_ENTRY bool mlirAsyncRuntimeIsGroupError(Group *group) {
  return group->hasError();
}

FFF_ASYNC_ENTRY void mlirAsyncRuntimeAwaitToken(Token *token) {
  token->wait();
}

FFF_ASYNC_ENTRY void mlirAsyncRuntimeAwaitValue(Value *value) {
  value->wait();
}

FFF_ASYNC_ENTRY void mlirAsyncRuntimeAwaitAllInGroup(Group *group) {
  group->wait();
}

FFF_ASYNC_ENTRY std::byte *mlirAsyncRuntimeGetValueStorage(Value *value) {
  return value->storage.data();
}

FFF_ASYNC_ENTRY void mlirAsyncRuntimeExecute(CoroHandle handle,
                                             CoroResume resume) {
  pool().push(resumption(handle, resume));
  Team::openHere();
}

FFF_ASYNC_ENTRY void mlirAsyncRuntimeAwaitTokenAndExecute(Token *token,
                                                          CoroHandle handle,
                                                          CoroResume resume) {
  token->onReady(resumption(handle, resume));
}

FFF_ASYNC_ENTRY void mlirAsyncRuntimeAwaitValueAndExecute(Value *value,
                                                          CoroHandle handle,
                                                          CoroResume resume) {
  value->onReady(resumption(handle, resume));
}

FFF_ASYNC_ENTRY void
mlirAsyncRuntimeAwaitAllInGroupAndExecute(Group *group, CoroHandle handle,
                                          CoroResume resume) {
  group->onReady(resumption(handle, resume));
}

// (MLIR's spelling.) Every core computes a block: the workers and the
// thread that hands the blocks out; under OpenMP, each thread of the team
// this thread would open.
FFF_ASYNC_ENTRY int64_t mlirAsyncRuntimGetNumWorkerThreads() {
  if (const OpenMP *openMP = teamRuntime())
    return std::max(1, openMP->maxThreads());
  static const int64_t cores = usableCores();
  return cores;
}

const char *fffParallelRuntime(int *threads) {
  *threads = static_cast<int>(mlirAsyncRuntimGetNumWorkerThreads());
  return teamRuntime() ? "openmp" : "fff";
}

FFF_ASYNC_ENTRY void mlirAsyncRuntimePrintCurrentThreadId() {
  std::printf("Current thread id: %zu\n",
              std::hash<std::thread::id>()(std::this_thread::get_id()));
}

const FFFRuntimeSymbol *fffAsyncRuntimeSymbols(size_t *count) {
#define FFF_SYMBOL(name) {#name, reinterpret_cast<void *>(&name)}
  static const FFFRuntimeSymbol symbols[] = {
      FFF_SYMBOL(mlirAsyncRuntimeAddRef),
      FFF_SYMBOL(mlirAsyncRuntimeDropRef),
      FFF_SYMBOL(mlirAsyncRuntimeCreateToken),
      FFF_SYMBOL(mlirAsyncRuntimeCreateValue),
      FFF_SYMBOL(mlirAsyncRuntimeCreateGroup),
      FFF_SYMBOL(mlirAsyncRuntimeAddTokenToGroup),
      FFF_SYMBOL(mlirAsyncRuntimeEmplaceToken),
      FFF_SYMBOL(mlirAsyncRuntimeEmplaceValue),
      FFF_SYMBOL(mlirAsyncRuntimeSetTokenError),
      FFF_SYMBOL(mlirAsyncRuntimeSetValueError),
      FFF_SYMBOL(mlirAsyncRuntimeIsTokenError),
      FFF_SYMBOL(mlirAsyncRuntimeIsValueError),
      FFF_SYMBOL(mlirAsyncRuntimeIsGroupError),
      FFF_SYMBOL(mlirAsyncRuntimeAwaitToken),
      FFF_SYMBOL(mlirAsyncRuntimeAwaitValue),
      FFF_SYMBOL(mlirAsyncRuntimeAwaitAllInGroup),
      FFF_SYMBOL(mlirAsyncRuntimeGetValueStorage),
      FFF_SYMBOL(mlirAsyncRuntimeExecute),
      FFF_SYMBOL(mlirAsyncRuntimeAwaitTokenAndExecute),
      FFF_SYMBOL(mlirAsyncRuntimeAwaitValueAndExecute),
      FFF_SYMBOL(mlirAsyncRuntimeAwaitAllInGroupAndExecute),
      FFF_SYMBOL(mlirAsyncRuntimGetNumWorkerThreads),
      FFF_SYMBOL(mlirAsyncRuntimePrintCurrentThreadId),
  };
#undef FFF_SYMBOL
  *count = sizeof(symbols) / sizeof(symbols[0]);
  return symbols;
}

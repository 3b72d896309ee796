//===- HostBuffers.cpp - the host buffer cache ------------------*- C++ -*-===//
//
// Keeps large freed buffers for the next allocation of their size, so that
// a model called again and again (a layer in a serving loop, a benchmark's
// repetitions) finds its results' and scratch buffers' pages already
// mapped. glibc's malloc hands buffers from 32 MiB up (and often smaller
// ones) back to the kernel when they are freed, and a fresh mapping costs a
// page fault and a zeroed page per 4 KiB touched: more, for a LayerNorm of
// 4096x4096 f32, than the norm's own arithmetic.
//
//===----------------------------------------------------------------------===//

#include "fff/Runtime/Runtime.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

/// Below this, malloc's own free lists serve well and the cache's lock and
/// map would cost more than they save.
constexpr size_t kMinCachedBytes = size_t(128) << 10;
/// Cached buffers start on a page, which serves every alignment up to it.
constexpr size_t kPageBytes = 4096;
constexpr size_t kDefaultLimitBytes = size_t(1) << 30;
/// At most this many idle buffers, so that a lookup's linear scan stays
/// short; a model's distinct buffer sizes are few.
constexpr size_t kMaxIdleBuffers = 64;

size_t roundUp(size_t value, size_t step) {
  return (value + step - 1) / step * step;
}

/// `bytes` rounded up to an eighth of its largest power of two (and whole
/// pages): batches of nearby sizes share buffers, wasting at most 1/8.
size_t sizeClass(size_t bytes) {
  size_t octave = size_t(1) << (63 - __builtin_clzll(bytes));
  return roundUp(bytes, std::max(kPageBytes, octave / 8));
}

size_t initialLimit() {
  const char *text = std::getenv("FFF_BUFFER_CACHE_BYTES");
  if (!text || !*text)
    return kDefaultLimitBytes;
  char *end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  return *end ? kDefaultLimitBytes : size_t(value);
}

struct Buffer {
  void *address;
  size_t bytes;
};

class Cache {
public:
  void *allocate(size_t bytes) {
    size_t size = sizeClass(bytes);
    {
      std::lock_guard<std::mutex> lock(mutex);
      // The most recently freed first: its pages are the likeliest to be
      // in cache still.
      for (auto it = idle.rbegin(); it != idle.rend(); ++it) {
        if (it->bytes != size)
          continue;
        void *address = it->address;
        idle.erase(std::next(it).base());
        idleBytes -= size;
        live.emplace(address, size);
        return address;
      }
    }
    void *address = std::aligned_alloc(kPageBytes, size);
    if (address) {
      std::lock_guard<std::mutex> lock(mutex);
      live.emplace(address, size);
    }
    return address;
  }

  void release(void *address) {
    std::vector<void *> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto found = live.find(address);
      if (found == live.end()) {
        evicted.push_back(address); // malloc's, not the cache's
      } else {
        idle.push_back({address, found->second});
        idleBytes += found->second;
        live.erase(found);
        evictBeyondLimit(evicted);
      }
    }
    for (void *buffer : evicted)
      std::free(buffer);
  }

  size_t setLimit(size_t bytes) {
    std::vector<void *> evicted;
    size_t previous;
    {
      std::lock_guard<std::mutex> lock(mutex);
      previous = limit;
      limit = bytes;
      evictBeyondLimit(evicted);
    }
    for (void *buffer : evicted)
      std::free(buffer);
    return previous;
  }

private:
  /// Takes the oldest idle buffers off until the rest fit the limits; the
  /// caller frees them once the lock is released.
  void evictBeyondLimit(std::vector<void *> &evicted) {
    size_t drop = 0;
    while (drop < idle.size() &&
           (idleBytes > limit || idle.size() - drop > kMaxIdleBuffers)) {
      evicted.push_back(idle[drop].address);
      idleBytes -= idle[drop].bytes;
      ++drop;
    }
    idle.erase(idle.begin(), idle.begin() + drop);
  }

  std::mutex mutex;
  size_t limit = initialLimit();
  size_t idleBytes = 0;
  /// The cache's buffers in use, with their size class; a pointer not here
  /// is malloc's.
  std::unordered_map<void *, size_t> live;
  /// Freed buffers, oldest first.
  std::vector<Buffer> idle;
};

/// Constructed on first use and never destroyed: compiled code and other
/// libraries' static destructors may still free results while the process
/// exits.
Cache &cache() {
  static Cache *instance = new Cache();
  return *instance;
}

} // namespace

extern "C" {

void *fffHostAlloc(size_t bytes) {
  return bytes < kMinCachedBytes ? std::malloc(bytes) : cache().allocate(bytes);
}

void *fffHostAlignedAlloc(size_t alignment, size_t bytes) {
  if (bytes >= kMinCachedBytes && alignment <= kPageBytes)
    return cache().allocate(bytes);
  // aligned_alloc takes a multiple of the alignment, a power of two.
  return std::aligned_alloc(alignment,
                            roundUp(std::max<size_t>(bytes, 1), alignment));
}

void fffHostFree(void *buffer) {
  if (buffer)
    cache().release(buffer);
}

size_t fffSetHostCacheLimit(size_t bytes) { return cache().setLimit(bytes); }

} // extern "C"

//===- Memory.h - Device memory: allocations and bounds ---------*- C++ -*-===//
//
// Device memory is host memory the emulator allocates, and a device pointer
// is its host address, so a kernel's loads and stores are plain copies once
// checked. The allocation table is what the checks consult: an access must
// lie within one live allocation.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_MEMORY_H
#define FFF_EMULATOR_MEMORY_H

#include <cstdint>
#include <map>

namespace fff::emulator {

struct Allocation {
  uint64_t base = 0;
  uint64_t bytes = 0;
  const void *owner = nullptr; // the context or module it belongs to
  uint64_t end() const { return base + bytes; }
};

/// The allocation a kernel's accesses hit last. Accesses of a warp, and of
/// its next instructions, mostly fall in the same buffer, so this turns most
/// bounds checks into two comparisons.
struct LastAllocation {
  uint64_t base = 0;
  uint64_t end = 0;
};

class DeviceMemory {
public:
  /// Aligned to 256 bytes as cuMemAlloc's are. Fresh memory holds 0xff
  /// bytes (NaN as floats), so a kernel reading what nobody wrote shows it.
  /// Returns 0 when out of memory.
  uint64_t allocate(uint64_t bytes, const void *owner);
  /// False when `base` starts no allocation.
  bool release(uint64_t base);
  void releaseAll(const void *owner);

  /// The allocation that holds all of [address, address + bytes), or null.
  const Allocation *find(uint64_t address, uint64_t bytes) const;
  /// The allocation starting at or below `address` nearest to it, or null:
  /// what an access outside every allocation most likely overran.
  const Allocation *nearestBelow(uint64_t address) const;

  /// Whether [address, address + bytes) lies within one allocation, using
  /// and updating `last`.
  bool contains(uint64_t address, unsigned bytes, LastAllocation &last) const {
    if (address >= last.base && address + bytes <= last.end)
      return true;
    const Allocation *allocation = find(address, bytes);
    if (!allocation)
      return false;
    last = {allocation->base, allocation->end()};
    return true;
  }

  static void *hostAddress(uint64_t address) {
    return reinterpret_cast<void *>(static_cast<uintptr_t>(address));
  }

private:
  std::map<uint64_t, Allocation> allocations; // by base address
};

} // namespace fff::emulator

#endif // FFF_EMULATOR_MEMORY_H

//===- Memory.cpp - Device memory: allocations and bounds -------*- C++ -*-===//

#include "Memory.h"

#include <cstdlib>
#include <cstring>
#include <iterator>

namespace fff::emulator {

uint64_t DeviceMemory::allocate(uint64_t bytes, const void *owner) {
  constexpr uint64_t alignment = 256;
  uint64_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void *memory = std::aligned_alloc(alignment, rounded);
  if (!memory)
    return 0;
  std::memset(memory, 0xff, rounded);
  uint64_t base = reinterpret_cast<uintptr_t>(memory);
  allocations[base] = {base, bytes, owner};
  return base;
}

bool DeviceMemory::release(uint64_t base) {
  auto it = allocations.find(base);
  if (it == allocations.end())
    return false;
  std::free(hostAddress(base));
  allocations.erase(it);
  return true;
}

void DeviceMemory::releaseAll(const void *owner) {
  for (auto it = allocations.begin(); it != allocations.end();) {
    if (it->second.owner != owner) {
      ++it;
      continue;
    }
    std::free(hostAddress(it->first));
    it = allocations.erase(it);
  }
}

const Allocation *DeviceMemory::find(uint64_t address, uint64_t bytes) const {
  const Allocation *allocation = nearestBelow(address);
  if (!allocation || address + bytes > allocation->end() ||
      address + bytes < address)
    return nullptr;
  return allocation;
}

const Allocation *DeviceMemory::nearestBelow(uint64_t address) const {
  auto it = allocations.upper_bound(address);
  if (it == allocations.begin())
    return nullptr;
  return &std::prev(it)->second;
}

} // namespace fff::emulator

//===- DataMovement.cpp - Loads, stores and shuffles ------------*- C++ -*-===//
//
// The instructions that move data between a warp's registers and memory or
// other lanes, each checked as compute-sanitizer checks it: every lane's
// address before any lane's access, so a faulting instruction has no
// effect; shared accesses against the shadow state for races and
// uninitialized bytes; shuffles against the lanes actually converged.
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "Execution.h"
#include "Semantics.h"
#include "Stats.h"

#include <cstring>

namespace fff::emulator {
namespace {

/// A register's value from `bytes` bytes of memory (little-endian, as the
/// GPU's), extended as the instruction's type says.
uint64_t readElement(const uint8_t *source, unsigned bytes, bool signExtend) {
  switch (bytes) {
  case 1: {
    uint8_t value;
    std::memcpy(&value, source, 1);
    return signExtend ? uint64_t(int64_t(int8_t(value))) : value;
  }
  case 2: {
    uint16_t value;
    std::memcpy(&value, source, 2);
    return signExtend ? uint64_t(int64_t(int16_t(value))) : value;
  }
  case 4: {
    uint32_t value;
    std::memcpy(&value, source, 4);
    return signExtend ? uint64_t(int64_t(int32_t(value))) : value;
  }
  default: {
    uint64_t value;
    std::memcpy(&value, source, 8);
    return value;
  }
  }
}

void writeElement(uint8_t *destination, uint64_t value, unsigned bytes) {
  std::memcpy(destination, &value, bytes); // the low bytes: little-endian
}

/// The PTX operation for messages: "ld.global.v4.b32 of 16 bytes".
std::string describeAccess(const ExecContext &context,
                           const Instruction &instruction) {
  return context.mnemonic(instruction) + " of " +
         std::to_string(instruction.memory.bytes()) + " bytes";
}

/// Checks every lane's global address; on a problem raises the fault and
/// returns false.
bool checkGlobal(ExecContext &context, const Instruction &instruction,
                 const uint64_t *addresses, LaneMask lanes) {
  unsigned bytes = instruction.memory.bytes();
  bool valid = true;
  forEachLane(lanes, [&](unsigned lane) {
    if (!valid)
      return;
    uint64_t address = addresses[lane];
    if (address % bytes) {
      context.raise(CUDA_ERROR_MISALIGNED_ADDRESS, instruction, lane,
                    describeAccess(context, instruction) + " at " +
                        formatHex(address) + " is not " +
                        std::to_string(bytes) + "-byte aligned");
      valid = false;
    } else if (!context.memory.contains(address, bytes,
                                        context.lastAllocation)) {
      std::string where = " is outside every allocation";
      const Allocation *nearest = context.memory.nearestBelow(address);
      if (nearest && address < nearest->end() + (uint64_t(1) << 20))
        where += " (" + std::to_string(address + bytes - nearest->end()) +
                 " bytes past the end of the " +
                 std::to_string(nearest->bytes) + "-byte allocation at " +
                 formatHex(nearest->base) + ")";
      context.raise(CUDA_ERROR_ILLEGAL_ADDRESS, instruction, lane,
                    describeAccess(context, instruction) + " at " +
                        formatHex(address) + where);
      valid = false;
    }
  });
  return valid;
}

void computeAddresses(ExecContext &context, const Instruction &instruction,
                      LaneMask lanes, uint64_t *addresses) {
  const uint64_t *base = context.warp->lane(instruction.memory.base);
  int64_t offset = instruction.memory.offset;
  forEachLane(lanes, [&](unsigned lane) {
    addresses[lane] = base[lane] + uint64_t(offset);
  });
}

void loadGlobal(ExecContext &context, const Instruction &instruction,
                LaneMask lanes) {
  uint64_t addresses[WarpSize];
  computeAddresses(context, instruction, lanes, addresses);
  if (!checkGlobal(context, instruction, addresses, lanes))
    return;
  const MemoryOperand &memory = instruction.memory;
  for (unsigned element = 0; element < memory.elementCount; ++element) {
    if (instruction.destinations[element] == NoRegister) // the sink `_`
      continue;
    uint64_t *destination =
        context.warp->lane(instruction.destinations[element]);
    unsigned offset = element * memory.elementBytes;
    forEachLane(lanes, [&](unsigned lane) {
      const uint8_t *source = static_cast<const uint8_t *>(
          DeviceMemory::hostAddress(addresses[lane] + offset));
      destination[lane] =
          readElement(source, memory.elementBytes, memory.signExtend);
    });
  }
  if (context.stats)
    context.stats->recordGlobal(false, addresses, lanes, memory.bytes());
}

void storeGlobal(ExecContext &context, const Instruction &instruction,
                 LaneMask lanes) {
  uint64_t addresses[WarpSize];
  computeAddresses(context, instruction, lanes, addresses);
  if (!checkGlobal(context, instruction, addresses, lanes))
    return;
  const MemoryOperand &memory = instruction.memory;
  for (unsigned element = 0; element < memory.elementCount; ++element) {
    const uint64_t *value = context.warp->lane(instruction.sources[element]);
    unsigned offset = element * memory.elementBytes;
    forEachLane(lanes, [&](unsigned lane) {
      writeElement(static_cast<uint8_t *>(
                       DeviceMemory::hostAddress(addresses[lane] + offset)),
                   value[lane], memory.elementBytes);
    });
  }
  if (context.stats)
    context.stats->recordGlobal(true, addresses, lanes, memory.bytes());
}

/// Checks every lane's shared-memory offset for alignment and range, then
/// records the accesses in the shadow state, raising the first problem.
bool checkShared(ExecContext &context, const Instruction &instruction,
                 const uint64_t *addresses, LaneMask lanes, bool isStore) {
  unsigned bytes = instruction.memory.bytes();
  unsigned size = context.shared.size();
  bool valid = true;
  forEachLane(lanes, [&](unsigned lane) {
    if (!valid)
      return;
    uint64_t address = addresses[lane];
    if (address % bytes) {
      context.raise(CUDA_ERROR_MISALIGNED_ADDRESS, instruction, lane,
                    describeAccess(context, instruction) +
                        " at shared offset " + std::to_string(address) +
                        " is not " + std::to_string(bytes) + "-byte aligned");
      valid = false;
    } else if (address >= size || size - address < bytes) {
      context.raise(
          CUDA_ERROR_ILLEGAL_ADDRESS, instruction, lane,
          describeAccess(context, instruction) + " at shared offset " +
              std::to_string(int64_t(address)) + " is outside the block's " +
              std::to_string(size) + " bytes of shared memory");
      valid = false;
    }
  });
  if (!valid)
    return false;

  unsigned warpBase = context.warp->index * WarpSize;
  forEachLane(lanes, [&](unsigned lane) {
    if (!valid)
      return;
    uint16_t thread = uint16_t(warpBase + lane);
    SharedAccessProblem problem =
        isStore ? context.shared.recordWrite(uint32_t(addresses[lane]), bytes,
                                             thread)
                : context.shared.recordRead(uint32_t(addresses[lane]), bytes,
                                            thread);
    if (problem.kind == SharedAccessProblem::None)
      return;
    std::string access = describeAccess(context, instruction) +
                         " at shared offset " + std::to_string(addresses[lane]);
    Dim3 other = context.threadIndex(problem.otherThread / WarpSize,
                                     problem.otherThread % WarpSize);
    std::string byte = "byte " + std::to_string(problem.offset);
    switch (problem.kind) {
    case SharedAccessProblem::Uninitialized:
      context.raise(CUDA_ERROR_LAUNCH_FAILED, instruction, lane,
                    access + " reads uninitialized shared memory (" + byte +
                        " was not written by this block)");
      break;
    case SharedAccessProblem::RaceAfterWrite:
      context.raise(CUDA_ERROR_LAUNCH_FAILED, instruction, lane,
                    "shared-memory race: " + access + " conflicts with a " +
                        "write of " + byte + " by thread " + format(other) +
                        " (another warp) since the last barrier");
      break;
    case SharedAccessProblem::RaceAfterRead:
      context.raise(CUDA_ERROR_LAUNCH_FAILED, instruction, lane,
                    "shared-memory race: " + access + " conflicts with a " +
                        "read of " + byte + " by thread " + format(other) +
                        " (another warp) since the last barrier");
      break;
    case SharedAccessProblem::None:
      break;
    }
    valid = false;
  });
  return valid;
}

void recordSharedStats(ExecContext &context, const Instruction &instruction,
                       const uint64_t *addresses, LaneMask lanes,
                       bool isStore) {
  uint32_t offsets[WarpSize];
  forEachLane(
      lanes, [&](unsigned lane) { offsets[lane] = uint32_t(addresses[lane]); });
  context.stats->recordShared(isStore, offsets, lanes,
                              instruction.memory.bytes());
}

void loadShared(ExecContext &context, const Instruction &instruction,
                LaneMask lanes) {
  uint64_t addresses[WarpSize];
  computeAddresses(context, instruction, lanes, addresses);
  if (!checkShared(context, instruction, addresses, lanes, false))
    return;
  const MemoryOperand &memory = instruction.memory;
  const uint8_t *shared = context.shared.bytes();
  for (unsigned element = 0; element < memory.elementCount; ++element) {
    if (instruction.destinations[element] == NoRegister) // the sink `_`
      continue;
    uint64_t *destination =
        context.warp->lane(instruction.destinations[element]);
    unsigned offset = element * memory.elementBytes;
    forEachLane(lanes, [&](unsigned lane) {
      destination[lane] = readElement(shared + addresses[lane] + offset,
                                      memory.elementBytes, memory.signExtend);
    });
  }
  if (context.stats)
    recordSharedStats(context, instruction, addresses, lanes, false);
}

void storeShared(ExecContext &context, const Instruction &instruction,
                 LaneMask lanes) {
  uint64_t addresses[WarpSize];
  computeAddresses(context, instruction, lanes, addresses);
  if (!checkShared(context, instruction, addresses, lanes, true))
    return;
  const MemoryOperand &memory = instruction.memory;
  uint8_t *shared = context.shared.bytes();
  for (unsigned element = 0; element < memory.elementCount; ++element) {
    const uint64_t *value = context.warp->lane(instruction.sources[element]);
    unsigned offset = element * memory.elementBytes;
    forEachLane(lanes, [&](unsigned lane) {
      writeElement(shared + addresses[lane] + offset, value[lane],
                   memory.elementBytes);
    });
  }
  if (context.stats)
    recordSharedStats(context, instruction, addresses, lanes, true);
}

/// ld.param: kernel parameters, at offsets the decoder checked.
void loadParam(ExecContext &context, const Instruction &instruction,
               LaneMask lanes) {
  const MemoryOperand &memory = instruction.memory;
  for (unsigned element = 0; element < memory.elementCount; ++element) {
    if (instruction.destinations[element] == NoRegister) // the sink `_`
      continue;
    uint64_t value = readElement(context.parameters + memory.offset +
                                     element * memory.elementBytes,
                                 memory.elementBytes, memory.signExtend);
    uint64_t *destination =
        context.warp->lane(instruction.destinations[element]);
    forEachLane(lanes, [&](unsigned lane) { destination[lane] = value; });
  }
}

/// The lane `lane` reads from, per the PTX ISA's shfl.sync semantics, and
/// whether that lane is in range (the optional predicate result).
std::pair<unsigned, bool> shuffleSource(ShuffleMode mode, unsigned lane,
                                        uint32_t b, uint32_t c) {
  uint32_t offset = b & 31, clamp = c & 31, segmentMask = (c >> 8) & 31;
  int maxLane = int((lane & segmentMask) | (clamp & ~segmentMask));
  int minLane = int(lane & segmentMask);
  int source = int(lane);
  bool inRange = false;
  switch (mode) {
  case ShuffleMode::Up:
    source = int(lane) - int(offset);
    inRange = source >= maxLane;
    break;
  case ShuffleMode::Down:
    source = int(lane) + int(offset);
    inRange = source <= maxLane;
    break;
  case ShuffleMode::Butterfly:
    source = int(lane ^ offset);
    inRange = source <= maxLane;
    break;
  case ShuffleMode::Index:
    source = minLane | int(offset & ~segmentMask);
    inRange = source <= maxLane;
    break;
  }
  return {inRange ? unsigned(source) : lane, inRange};
}

/// shfl.sync.mode.b32 d[|p], a, b, c, membermask. Every live lane the
/// membermask names must execute this shfl with the caller (exited lanes
/// may be named), and a lane may read only from lanes that execute it.
void shuffle(ExecContext &context, const Instruction &instruction,
             LaneMask lanes) {
  WarpState &warp = *context.warp;
  const uint64_t *a = warp.lane(instruction.sources[0]);
  const uint64_t *b = warp.lane(instruction.sources[1]);
  const uint64_t *c = warp.lane(instruction.sources[2]);
  const uint64_t *memberMasks = warp.lane(instruction.sources[3]);

  uint32_t results[WarpSize];
  bool inRange[WarpSize];
  bool valid = true;
  forEachLane(lanes, [&](unsigned lane) {
    if (!valid)
      return;
    LaneMask members = LaneMask(memberMasks[lane]);
    auto shfl = [&] {
      return context.mnemonic(instruction) + " with membermask " +
             formatHex(members);
    };
    if (!(members & (LaneMask(1) << lane))) {
      context.raise(CUDA_ERROR_LAUNCH_FAILED, instruction, lane,
                    shfl() + " does not name the executing lane " +
                        std::to_string(lane));
      valid = false;
      return;
    }
    if (LaneMask absent = members & warp.live() & ~lanes) {
      context.raise(CUDA_ERROR_LAUNCH_FAILED, instruction, lane,
                    shfl() + " names lane " +
                        std::to_string(__builtin_ctz(absent)) +
                        ", which is not converged here (diverged or "
                        "predicated off)");
      valid = false;
      return;
    }
    auto [source, sourceInRange] = shuffleSource(
        instruction.shuffleMode, lane, uint32_t(b[lane]), uint32_t(c[lane]));
    if (!(lanes & members & (LaneMask(1) << source))) {
      context.raise(CUDA_ERROR_LAUNCH_FAILED, instruction, lane,
                    shfl() + " reads lane " + std::to_string(source) +
                        ", which is inactive (exited, absent, diverged or "
                        "outside the membermask)");
      valid = false;
      return;
    }
    results[lane] = uint32_t(a[source]);
    inRange[lane] = sourceInRange;
  });
  if (!valid)
    return;
  uint64_t *destination = warp.lane(instruction.destinations[0]);
  forEachLane(lanes, [&](unsigned lane) { destination[lane] = results[lane]; });
  if (instruction.destinations[1] != NoRegister) {
    uint64_t *predicate = warp.lane(instruction.destinations[1]);
    forEachLane(lanes, [&](unsigned lane) { predicate[lane] = inRange[lane]; });
  }
}

/// bar.warp.sync membermask: every live lane the membermask names must reach
/// it with the caller, so that what they stored before is visible to each
/// other after (exited lanes may be named).
void warpSync(ExecContext &context, const Instruction &instruction,
              LaneMask lanes) {
  WarpState &warp = *context.warp;
  const uint64_t *memberMasks = warp.lane(instruction.sources[0]);
  forEachLane(lanes, [&](unsigned lane) {
    if (context.faulted)
      return;
    LaneMask members = LaneMask(memberMasks[lane]);
    auto sync = [&] {
      return "bar.warp.sync with membermask " + formatHex(members);
    };
    if (!(members & (LaneMask(1) << lane)))
      context.raise(CUDA_ERROR_LAUNCH_FAILED, instruction, lane,
                    sync() + " does not name the executing lane " +
                        std::to_string(lane));
    else if (LaneMask absent = members & warp.live() & ~lanes)
      context.raise(CUDA_ERROR_LAUNCH_FAILED, instruction, lane,
                    sync() + " names lane " +
                        std::to_string(__builtin_ctz(absent)) +
                        ", which is not converged here (diverged or "
                        "predicated off)");
  });
}

} // namespace

ExecuteFn selectLoad(StateSpace space) {
  switch (space) {
  case StateSpace::Global:
    return loadGlobal;
  case StateSpace::Shared:
    return loadShared;
  case StateSpace::Param:
    return loadParam;
  }
  return nullptr;
}

ExecuteFn selectStore(StateSpace space) {
  switch (space) {
  case StateSpace::Global:
    return storeGlobal;
  case StateSpace::Shared:
    return storeShared;
  case StateSpace::Param:
    return nullptr; // kernel parameters are read-only
  }
  return nullptr;
}

ExecuteFn selectShuffle() { return shuffle; }

ExecuteFn selectWarpSync() { return warpSync; }

} // namespace fff::emulator

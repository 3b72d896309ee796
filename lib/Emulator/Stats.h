//===- Stats.h - Per-launch statistics, written as JSON ---------*- C++ -*-===//
//
// With FFF_EMU_STATS=path set, each launch appends one JSON object, on one
// line, to that file (JSON Lines): what the kernel executed and the memory
// traffic it asked for, the numbers a performance model needs. They count
// requests as the hardware would receive them (per warp instruction), not
// timing: caches and the memory system are not modeled.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_STATS_H
#define FFF_EMULATOR_STATS_H

#include "Memory.h"
#include "Program.h"

#include <map>
#include <string>
#include <vector>

namespace fff::emulator {

class LaunchStats {
public:
  LaunchStats(size_t numOpcodes, const DeviceMemory &memory)
      : opcodeCounts(numOpcodes), memory(memory) {}

  /// A warp instruction; `lanes` are the threads that execute it (active,
  /// guard true).
  void countInstruction(uint16_t opcodeId, LaneMask lanes) {
    ++warpInstructions;
    ++opcodeCounts[opcodeId];
    threadInstructions += __builtin_popcount(lanes);
  }

  void countBranch(bool divergent) {
    ++branches;
    divergentBranches += divergent;
  }

  /// A warp's global access of `bytes` a lane at `addresses[lane]`, all of
  /// which are valid.
  void recordGlobal(bool isStore, const uint64_t *addresses, LaneMask lanes,
                    unsigned bytes);
  /// A warp's shared-memory access of `bytes` a lane at `offsets[lane]`.
  void recordShared(bool isStore, const uint32_t *offsets, LaneMask lanes,
                    unsigned bytes);

  std::string toJson(const std::string &kernelName, Dim3 grid, Dim3 block,
                     const std::vector<std::string> &opcodeNames) const;

private:
  struct GlobalTraffic {
    uint64_t requests = 0;
    uint64_t bytes = 0;   // requested by the lanes
    uint64_t sectors = 0; // distinct 32-byte sectors, per request
  };

  void markTouched(uint64_t address, unsigned bytes);
  uint64_t uniqueBytes() const;

  uint64_t warpInstructions = 0;
  uint64_t threadInstructions = 0;
  uint64_t branches = 0;
  uint64_t divergentBranches = 0;
  std::vector<uint64_t> opcodeCounts;
  GlobalTraffic globalLoads, globalStores;
  uint64_t sharedLoads = 0, sharedStores = 0;
  uint64_t sharedWavefronts = 0;
  uint64_t sharedBankConflicts = 0;

  const DeviceMemory &memory;
  LastAllocation lastAllocation;
  /// One bit per byte of each allocation the launch touched, by base.
  std::map<uint64_t, std::vector<uint64_t>> touched;
};

/// Appends `json` and a newline to the file at `path`; false on failure.
bool appendStatsLine(const std::string &path, const std::string &json);

} // namespace fff::emulator

#endif // FFF_EMULATOR_STATS_H

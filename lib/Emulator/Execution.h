//===- Execution.h - The state instructions run against ---------*- C++ -*-===//
//
// A warp's registers and scheduling state, and the launch-wide context an
// instruction's semantics may need: memories, parameters, statistics, and
// where to report a fault.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_EXECUTION_H
#define FFF_EMULATOR_EXECUTION_H

#include "CudaTypes.h"
#include "Memory.h"
#include "Program.h"
#include "SharedMemory.h"

#include <string>
#include <vector>

namespace fff::emulator {

class LaunchStats;

/// Lanes of a warp that run together from `pc` until they reach
/// `reconvergencePc`, where the entry below them, which holds them too,
/// takes over.
struct SimtEntry {
  uint32_t pc;
  uint32_t reconvergencePc;
  LaneMask lanes;
};

/// A warp. Its lanes run in lockstep; when a branch splits them, each path
/// runs in turn until the paths meet at the branch's reconvergence point
/// (the classic SIMT stack, whose top runs).
struct WarpState {
  uint64_t *registers = nullptr; // [register][lane]
  unsigned index = 0;            // within the block
  LaneMask existing = 0;         // a block's last warp may be partial
  LaneMask exited = 0;
  std::vector<SimtEntry> stack;
  /// Waiting at bar.sync `barrier`, to resume at the top entry's pc.
  bool atBarrier = false;
  uint8_t barrier = 0;
  uint32_t exitPc[WarpSize] = {}; // where each exited lane left

  uint64_t *lane(RegisterIndex index) {
    return registers + size_t(index) * WarpSize;
  }
  LaneMask live() const { return existing & ~exited; }
  bool runnable() const { return !stack.empty() && !atBarrier; }
};

struct Fault {
  CUresult code = CUDA_SUCCESS;
  std::string message;
};

struct ExecContext {
  const Kernel &kernel;
  const std::vector<std::string> &opcodeNames; // the module's
  Dim3 grid, block, blockIndex;
  WarpState *warp = nullptr;
  DeviceMemory &memory;
  LastAllocation lastAllocation;
  SharedMemory &shared;
  const uint8_t *parameters = nullptr;
  LaunchStats *stats = nullptr; // null unless statistics are wanted
  bool faulted = false;
  Fault fault;

  ExecContext(const Kernel &kernel, const std::vector<std::string> &opcodeNames,
              DeviceMemory &memory, SharedMemory &shared)
      : kernel(kernel), opcodeNames(opcodeNames), memory(memory),
        shared(shared) {}

  const std::string &mnemonic(const Instruction &instruction) const {
    return opcodeNames[instruction.opcodeId];
  }

  /// The thread index (%tid) of `lane` of warp `warpIndex`.
  Dim3 threadIndex(unsigned warpIndex, unsigned lane) const;

  /// Stops the launch with `code`, naming the kernel, the faulting thread,
  /// its block and the instruction's line before `what`. The first fault
  /// wins.
  void raise(CUresult code, const Instruction &instruction, unsigned lane,
             const std::string &what);
  /// The same, for a fault not tied to one instruction.
  void raise(CUresult code, const std::string &message);
};

/// "(x,y,z)".
std::string format(Dim3 dims);

/// Calls `body(lane)` for each lane in `lanes`, lowest first.
template <typename Body> inline void forEachLane(LaneMask lanes, Body body) {
  while (lanes) {
    unsigned lane = __builtin_ctz(lanes);
    lanes &= lanes - 1;
    body(lane);
  }
}

} // namespace fff::emulator

#endif // FFF_EMULATOR_EXECUTION_H

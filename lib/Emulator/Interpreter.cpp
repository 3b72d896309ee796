//===- Interpreter.cpp - Runs a kernel over a grid --------------*- C++ -*-===//
//
// Divergence: a warp keeps a stack of lane groups. A branch that splits the
// running group replaces it by its reconvergence point, for all its lanes,
// and pushes one group for each path; each path runs until it reaches the
// reconvergence point (or its lanes exit), then the next, and the lanes
// continue together. Loops work the same way: lanes that leave wait at the
// exit while the others iterate.
//
//===----------------------------------------------------------------------===//

#include "Interpreter.h"

#include "Stats.h"

#include <algorithm>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace fff::emulator {

std::string format(Dim3 dims) {
  return "(" + std::to_string(dims.x) + "," + std::to_string(dims.y) + "," +
         std::to_string(dims.z) + ")";
}

Dim3 ExecContext::threadIndex(unsigned warpIndex, unsigned lane) const {
  unsigned linear = warpIndex * WarpSize + lane;
  return {linear % block.x, linear / block.x % block.y,
          linear / (block.x * block.y)};
}

void ExecContext::raise(CUresult code, const Instruction &instruction,
                        unsigned lane, const std::string &what) {
  raise(code, "kernel '" + kernel.name + "', thread " +
                  format(threadIndex(warp->index, lane)) + " of block " +
                  format(blockIndex) + ", line " +
                  std::to_string(instruction.line) + ": " + what);
}

void ExecContext::raise(CUresult code, const std::string &message) {
  if (faulted)
    return;
  faulted = true;
  fault = {code, message};
}

std::string checkLaunch(const Kernel &kernel, const LaunchConfig &config) {
  const Dim3 &block = config.block, &grid = config.grid;
  std::string name = "kernel '" + kernel.name + "': ";
  if (!block.count() || !grid.count())
    return name + "empty grid " + format(grid) + " or block " + format(block);
  if (block.x > MaxBlockDims.x || block.y > MaxBlockDims.y ||
      block.z > MaxBlockDims.z)
    return name + "block " + format(block) + " exceeds the device's " +
           format(MaxBlockDims);
  if (block.count() > MaxThreadsPerBlock)
    return name + "block " + format(block) + " has " +
           std::to_string(block.count()) + " threads, above the device's " +
           std::to_string(MaxThreadsPerBlock);
  if (grid.x > MaxGridDims.x || grid.y > MaxGridDims.y ||
      grid.z > MaxGridDims.z)
    return name + "grid " + format(grid) + " exceeds the device's " +
           format(MaxGridDims);
  if (kernel.hasMaxThreads && block.count() > kernel.maxThreads.count())
    return name + "block " + format(block) + " has " +
           std::to_string(block.count()) + " threads, above its .maxntid " +
           format(kernel.maxThreads);
  if (kernel.hasRequiredThreads && (block.x != kernel.requiredThreads.x ||
                                    block.y != kernel.requiredThreads.y ||
                                    block.z != kernel.requiredThreads.z))
    return name + "block " + format(block) + " differs from its .reqntid " +
           format(kernel.requiredThreads);
  uint64_t shared =
      uint64_t(kernel.staticSharedBytes) + config.dynamicSharedBytes;
  if (shared > MaxSharedBytesPerBlock)
    return name + std::to_string(kernel.staticSharedBytes) +
           " bytes of static and " + std::to_string(config.dynamicSharedBytes) +
           " of dynamic shared memory exceed the " +
           std::to_string(MaxSharedBytesPerBlock) + " a block may use";
  return "";
}

namespace {

constexpr unsigned NumBarriers = 16;

/// Sets the SSE unit to the IEEE defaults the GPU's arithmetic matches
/// (round to nearest even, subnormals kept) for the lifetime of the object.
class DefaultFloatEnvironment {
public:
#if defined(__SSE__)
  DefaultFloatEnvironment() : saved(_mm_getcsr()) { _mm_setcsr(0x1f80); }
  ~DefaultFloatEnvironment() { _mm_setcsr(saved); }

private:
  unsigned saved;
#endif
};

LaneMask predicateMask(const uint64_t *predicate, bool negated) {
  LaneMask mask = 0;
  for (unsigned lane = 0; lane < WarpSize; ++lane)
    mask |= LaneMask(predicate[lane] != 0) << lane;
  return negated ? ~mask : mask;
}

class Launch {
public:
  Launch(const Kernel &kernel, const std::vector<std::string> &opcodeNames,
         const LaunchConfig &config, DeviceMemory &memory, LaunchStats *stats);

  Fault run();

private:
  void prepareWarps();
  void runBlock(Dim3 blockIndex);
  void runWarp(WarpState &warp);

  // Scheduling within a warp.
  void moveTo(WarpState &warp, uint32_t pc);
  void popFinished(WarpState &warp);
  void branch(WarpState &warp, const Instruction &instruction, LaneMask taken);
  void leave(WarpState &warp, LaneMask lanes);
  void arrive(WarpState &warp, const Instruction &instruction, LaneMask lanes);

  // Barriers across the block.
  bool openCompleteBarrier();
  void reportStuckBarrier();

  const Kernel &kernel;
  const LaunchConfig &config;
  LaunchStats *stats;
  SharedMemory shared;
  ExecContext context;
  unsigned threadsPerBlock;
  std::vector<WarpState> warps;
  std::vector<uint64_t> registerFiles;
  unsigned arrivals[NumBarriers] = {};
};

Launch::Launch(const Kernel &kernel,
               const std::vector<std::string> &opcodeNames,
               const LaunchConfig &config, DeviceMemory &memory,
               LaunchStats *stats)
    : kernel(kernel), config(config), stats(stats),
      context(kernel, opcodeNames, memory, shared),
      threadsPerBlock(unsigned(config.block.count())) {
  context.grid = config.grid;
  context.block = config.block;
  context.parameters = config.parameters.data();
  context.stats = stats;
  shared.reset(kernel.staticSharedBytes + config.dynamicSharedBytes);
}

/// Warps, and their registers, serve every block in turn; constants and
/// the special registers that do not depend on the block are set once.
void Launch::prepareWarps() {
  unsigned numWarps = (threadsPerBlock + WarpSize - 1) / WarpSize;
  size_t warpRegisters = size_t(kernel.numRegisters) * WarpSize;
  registerFiles.assign(numWarps * warpRegisters, 0);
  warps.resize(numWarps);
  for (unsigned index = 0; index < numWarps; ++index) {
    WarpState &warp = warps[index];
    warp.index = index;
    warp.registers = registerFiles.data() + index * warpRegisters;
    unsigned lanes = std::min(WarpSize, threadsPerBlock - index * WarpSize);
    warp.existing = lanes == WarpSize ? AllLanes : (LaneMask(1) << lanes) - 1;
    for (const ConstantRegister &constant : kernel.constants)
      std::fill_n(warp.lane(constant.index), WarpSize, constant.value);
    for (const SpecialRegisterUse &use : kernel.specialRegisters) {
      uint64_t *values = warp.lane(use.index);
      for (unsigned lane = 0; lane < WarpSize; ++lane) {
        Dim3 thread = context.threadIndex(index, lane);
        switch (use.which) {
        case SpecialRegister::TidX:
          values[lane] = thread.x;
          break;
        case SpecialRegister::TidY:
          values[lane] = thread.y;
          break;
        case SpecialRegister::TidZ:
          values[lane] = thread.z;
          break;
        case SpecialRegister::NtidX:
          values[lane] = config.block.x;
          break;
        case SpecialRegister::NtidY:
          values[lane] = config.block.y;
          break;
        case SpecialRegister::NtidZ:
          values[lane] = config.block.z;
          break;
        case SpecialRegister::NctaidX:
          values[lane] = config.grid.x;
          break;
        case SpecialRegister::NctaidY:
          values[lane] = config.grid.y;
          break;
        case SpecialRegister::NctaidZ:
          values[lane] = config.grid.z;
          break;
        case SpecialRegister::LaneId:
          values[lane] = lane;
          break;
        case SpecialRegister::WarpId:
          values[lane] = index;
          break;
        case SpecialRegister::CtaidX:
        case SpecialRegister::CtaidY:
        case SpecialRegister::CtaidZ:
          break; // set for each block
        }
      }
    }
  }
}

Fault Launch::run() {
  DefaultFloatEnvironment floatEnvironment;
  prepareWarps();
  Dim3 grid = config.grid;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        runBlock({x, y, z});
        if (context.faulted)
          return context.fault;
      }
  return {};
}

void Launch::runBlock(Dim3 blockIndex) {
  context.blockIndex = blockIndex;
  shared.beginBlock();
  std::fill_n(arrivals, NumBarriers, 0);
  for (WarpState &warp : warps) {
    warp.exited = 0;
    warp.atBarrier = false;
    warp.stack.assign(1, {0, NoReconvergence, warp.existing});
    for (const SpecialRegisterUse &use : kernel.specialRegisters) {
      uint64_t value;
      if (use.which == SpecialRegister::CtaidX)
        value = blockIndex.x;
      else if (use.which == SpecialRegister::CtaidY)
        value = blockIndex.y;
      else if (use.which == SpecialRegister::CtaidZ)
        value = blockIndex.z;
      else
        continue;
      std::fill_n(warp.lane(use.index), WarpSize, value);
    }
  }

  while (true) {
    for (WarpState &warp : warps) {
      if (!warp.runnable())
        continue;
      runWarp(warp);
      if (context.faulted)
        return;
    }
    bool finished =
        std::all_of(warps.begin(), warps.end(),
                    [](const WarpState &warp) { return warp.stack.empty(); });
    if (finished)
      return;
    // Every warp that has not finished waits at a barrier.
    if (!openCompleteBarrier()) {
      reportStuckBarrier();
      return;
    }
  }
}

void Launch::runWarp(WarpState &warp) {
  context.warp = &warp;
  const Instruction *code = kernel.code.data();
  while (!context.faulted && warp.runnable()) {
    const SimtEntry &top = warp.stack.back();
    const Instruction &instruction = code[top.pc];
    LaneMask lanes = top.lanes;
    if (instruction.guard != NoRegister)
      lanes &=
          predicateMask(warp.lane(instruction.guard), instruction.guardNegated);
    if (stats)
      stats->countInstruction(instruction.opcodeId, lanes);
    if (instruction.execute && lanes)
      instruction.execute(context, instruction, lanes);
    switch (instruction.flow) {
    case ControlFlow::Next:
      moveTo(warp, top.pc + 1);
      break;
    case ControlFlow::Branch:
      branch(warp, instruction, lanes);
      break;
    case ControlFlow::Exit:
      leave(warp, lanes);
      break;
    case ControlFlow::Barrier:
      arrive(warp, instruction, lanes);
      break;
    }
  }
}

/// The running lanes continue at `pc`.
void Launch::moveTo(WarpState &warp, uint32_t pc) {
  warp.stack.back().pc = pc;
  popFinished(warp);
}

/// Pops groups that reached their reconvergence point or whose lanes all
/// exited: the group below holds their lanes.
void Launch::popFinished(WarpState &warp) {
  while (!warp.stack.empty()) {
    const SimtEntry &top = warp.stack.back();
    if (top.lanes && top.pc != top.reconvergencePc)
      return;
    warp.stack.pop_back();
  }
}

void Launch::branch(WarpState &warp, const Instruction &instruction,
                    LaneMask taken) {
  SimtEntry &top = warp.stack.back();
  LaneMask fallThrough = top.lanes & ~taken;
  if (stats)
    stats->countBranch(taken && fallThrough);
  if (!fallThrough) {
    moveTo(warp, instruction.target);
    return;
  }
  if (!taken) {
    moveTo(warp, top.pc + 1);
    return;
  }
  // The group waits at the reconvergence point while each path runs; a
  // path that starts there has nothing to run.
  uint32_t join = instruction.reconvergence;
  uint32_t next = top.pc + 1;
  top.pc = join;
  if (instruction.target != join)
    warp.stack.push_back({instruction.target, join, taken});
  if (next != join)
    warp.stack.push_back({next, join, fallThrough});
}

/// ret and exit: `lanes` finish; the other running lanes continue.
void Launch::leave(WarpState &warp, LaneMask lanes) {
  uint32_t pc = warp.stack.back().pc;
  warp.exited |= lanes;
  forEachLane(lanes, [&](unsigned lane) { warp.exitPc[lane] = pc; });
  for (SimtEntry &entry : warp.stack)
    entry.lanes &= ~lanes;
  if (warp.stack.back().lanes)
    moveTo(warp, pc + 1);
  else
    popFinished(warp);
}

/// bar.sync: the running lanes wait at the barrier. It is .aligned: a warp
/// reaches it whole (diverged lanes of the warp are caught as missing when
/// the block cannot go on), never with some lanes predicated off.
void Launch::arrive(WarpState &warp, const Instruction &instruction,
                    LaneMask lanes) {
  SimtEntry &top = warp.stack.back();
  if (LaneMask skipping = top.lanes & ~lanes) {
    context.raise(CUDA_ERROR_LAUNCH_FAILED, instruction,
                  __builtin_ctz(lanes ? lanes : top.lanes),
                  "bar.sync " + std::to_string(instruction.target) +
                      " is predicated off for lane " +
                      std::to_string(__builtin_ctz(skipping)) +
                      " of the warp: a barrier must be reached by whole "
                      "warps");
    return;
  }
  warp.atBarrier = true;
  warp.barrier = uint8_t(instruction.target);
  top.pc += 1;
  arrivals[instruction.target] += __builtin_popcount(lanes);
}

/// Opens the barrier every thread of the block waits at, if there is one.
bool Launch::openCompleteBarrier() {
  for (unsigned barrier = 0; barrier < NumBarriers; ++barrier) {
    if (arrivals[barrier] != threadsPerBlock)
      continue;
    arrivals[barrier] = 0;
    shared.completeBarrier();
    for (WarpState &warp : warps) {
      if (!warp.atBarrier || warp.barrier != barrier)
        continue;
      warp.atBarrier = false;
      popFinished(warp);
    }
    return true;
  }
  return false;
}

/// No warp can run and no barrier can open: some threads wait at a barrier
/// that others will never reach. Names the first thread missing from it.
void Launch::reportStuckBarrier() {
  unsigned barrier = 0;
  while (barrier < NumBarriers && !arrivals[barrier])
    ++barrier;
  uint32_t barrierLine = 0;
  std::string missing;
  for (WarpState &warp : warps) {
    bool here = warp.atBarrier && warp.barrier == barrier;
    if (here && !barrierLine)
      barrierLine = kernel.code[warp.stack.back().pc - 1].line;
    LaneMask waiting = here ? warp.stack.back().lanes : 0;
    LaneMask absent = warp.existing & ~waiting;
    if (!absent || !missing.empty())
      continue;
    unsigned lane = __builtin_ctz(absent);
    LaneMask bit = LaneMask(1) << lane;
    std::string thread =
        "thread " + format(context.threadIndex(warp.index, lane));
    if (warp.exited & bit) {
      missing = thread + " exited at line " +
                std::to_string(kernel.code[warp.exitPc[lane]].line);
    } else if (!here) {
      missing = thread + " waits at bar.sync " + std::to_string(warp.barrier) +
                " at line " +
                std::to_string(kernel.code[warp.stack.back().pc - 1].line);
    } else {
      // Diverged from the lanes at the barrier: where its path stopped.
      auto entry = std::find_if(
          warp.stack.rbegin(), warp.stack.rend(),
          [&](const SimtEntry &entry) { return entry.lanes & bit; });
      missing = thread + " is diverged from its warp, at line " +
                std::to_string(kernel.code[entry->pc].line) +
                " (bar.sync in divergent code)";
    }
  }
  context.raise(CUDA_ERROR_LAUNCH_FAILED,
                "kernel '" + kernel.name + "', block " +
                    format(context.blockIndex) + ", line " +
                    std::to_string(barrierLine) + ": bar.sync " +
                    std::to_string(barrier) + " is reached by only " +
                    std::to_string(arrivals[barrier]) + " of the block's " +
                    std::to_string(threadsPerBlock) + " threads; " + missing);
}

} // namespace

Fault runKernel(const Kernel &kernel,
                const std::vector<std::string> &opcodeNames,
                const LaunchConfig &config, DeviceMemory &memory,
                LaunchStats *stats) {
  Launch launch(kernel, opcodeNames, config, memory, stats);
  return launch.run();
}

} // namespace fff::emulator

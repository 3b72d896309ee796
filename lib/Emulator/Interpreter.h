//===- Interpreter.h - Runs a kernel over a grid ----------------*- C++ -*-===//
//
// Blocks run one after another, and within a block each warp runs until it
// waits at a barrier or finishes; a barrier opens when every thread of the
// block has reached it. That is one valid schedule of the CUDA model, in
// which only barriers order the warps of a block; the shared-memory checks
// flag programs whose results would depend on the schedule.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_INTERPRETER_H
#define FFF_EMULATOR_INTERPRETER_H

#include "Execution.h"

#include <string>
#include <vector>

namespace fff::emulator {

class LaunchStats;

/// The device limits launches are checked against, those of an H200.
constexpr unsigned MaxThreadsPerBlock = 1024;
constexpr Dim3 MaxBlockDims{1024, 1024, 64};
constexpr Dim3 MaxGridDims{2147483647u, 65535, 65535};
constexpr unsigned MaxSharedBytesPerBlock = 48 * 1024;

struct LaunchConfig {
  Dim3 grid, block;
  unsigned dynamicSharedBytes = 0;
  std::vector<uint8_t> parameters; // laid out as Kernel::parameters says
};

/// Why `kernel` cannot be launched with `config` (more threads or shared
/// memory than the device or the kernel's .maxntid/.reqntid allow), or the
/// empty string.
std::string checkLaunch(const Kernel &kernel, const LaunchConfig &config);

/// Runs `kernel` over its grid and returns the first fault, if any (code
/// CUDA_SUCCESS otherwise). `stats`, when not null, counts what ran.
Fault runKernel(const Kernel &kernel,
                const std::vector<std::string> &opcodeNames,
                const LaunchConfig &config, DeviceMemory &memory,
                LaunchStats *stats);

} // namespace fff::emulator

#endif // FFF_EMULATOR_INTERPRETER_H

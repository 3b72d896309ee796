//===- Reconvergence.h - Where diverged lanes meet again --------*- C++ -*-===//
//
// A warp whose lanes branch apart runs one path, then the other, and joins
// them where every path from the branch must pass: the immediate
// post-dominator of the branch's block, as ptxas places its reconvergence
// barriers. Computed once per kernel at load time.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_RECONVERGENCE_H
#define FFF_EMULATOR_RECONVERGENCE_H

#include "Program.h"

namespace fff::emulator {

/// Sets Instruction::reconvergence of every conditional branch of `kernel`,
/// whose code must end in an unconditional exit.
void computeReconvergencePoints(Kernel &kernel);

} // namespace fff::emulator

#endif // FFF_EMULATOR_RECONVERGENCE_H

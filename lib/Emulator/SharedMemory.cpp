//===- SharedMemory.cpp - A block's shared memory and shadow ----*- C++ -*-===//

#include "SharedMemory.h"

#include "Program.h"

namespace fff::emulator {
namespace {

bool sameWarp(uint16_t thread, uint16_t other) {
  return thread / WarpSize == other / WarpSize;
}

} // namespace

void SharedMemory::reset(unsigned bytes) {
  data.assign(bytes, 0);
  shadow.assign(bytes, ByteShadow());
  interval = 0;
  blockStart = 0;
}

SharedAccessProblem SharedMemory::recordRead(uint32_t offset, unsigned bytes,
                                             uint16_t thread) {
  SharedAccessProblem problem;
  for (uint32_t byte = offset; byte < offset + bytes; ++byte) {
    ByteShadow &state = shadow[byte];
    if (problem.kind == SharedAccessProblem::None) {
      if (state.writeInterval < blockStart)
        problem = {SharedAccessProblem::Uninitialized, byte, 0};
      else if (state.writeInterval == interval &&
               !sameWarp(thread, state.writer))
        problem = {SharedAccessProblem::RaceAfterWrite, byte, state.writer};
    }
    if (state.readInterval != interval) {
      state.readInterval = interval;
      state.reader = thread;
      state.otherWarpReader = NoThread;
    } else if (!sameWarp(thread, state.reader)) {
      state.otherWarpReader = thread;
    }
  }
  return problem;
}

SharedAccessProblem SharedMemory::recordWrite(uint32_t offset, unsigned bytes,
                                              uint16_t thread) {
  SharedAccessProblem problem;
  for (uint32_t byte = offset; byte < offset + bytes; ++byte) {
    ByteShadow &state = shadow[byte];
    if (problem.kind == SharedAccessProblem::None) {
      if (state.writeInterval == interval && !sameWarp(thread, state.writer))
        problem = {SharedAccessProblem::RaceAfterWrite, byte, state.writer};
      else if (state.readInterval == interval) {
        if (!sameWarp(thread, state.reader))
          problem = {SharedAccessProblem::RaceAfterRead, byte, state.reader};
        else if (state.otherWarpReader != NoThread)
          problem = {SharedAccessProblem::RaceAfterRead, byte,
                     state.otherWarpReader};
      }
    }
    state.writeInterval = interval;
    state.writer = thread;
  }
  return problem;
}

} // namespace fff::emulator

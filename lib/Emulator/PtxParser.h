//===- PtxParser.h - PTX text to a decoded module ---------------*- C++ -*-===//
//
// Parses a PTX module (directives, kernels, their parameters, registers,
// shared variables and statements) and decodes every statement, so that a
// module either loads completely or fails naming the first thing the
// emulator does not implement, with its line.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_PTXPARSER_H
#define FFF_EMULATOR_PTXPARSER_H

#include "CudaTypes.h"
#include "Memory.h"
#include "Program.h"

#include <memory>
#include <string>
#include <string_view>

namespace fff::emulator {

struct ParseError {
  CUresult code = CUDA_SUCCESS; // CUDA_ERROR_INVALID_PTX, mostly
  std::string message;          // "line N: what"
};

/// Parses and decodes `text`. Module-scope .global variables are allocated
/// in `memory`, owned by the returned module (release them with
/// memory.releaseAll(module)). On failure returns null and fills `error`.
std::unique_ptr<Module> parsePtx(std::string_view text, DeviceMemory &memory,
                                 ParseError &error);

} // namespace fff::emulator

#endif // FFF_EMULATOR_PTXPARSER_H

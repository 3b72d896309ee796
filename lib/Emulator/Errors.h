//===- Errors.h - Error codes and their messages ----------------*- C++ -*-===//
//
// The driver API reports a code; users read what went wrong through
// cuGetErrorString, which fff's runtime prints. So each error the emulator
// finds itself is recorded as the detailed message of the most recent
// occurrence of its code ("CUDA_ERROR_INVALID_PTX: line 212: unknown opcode
// 'tanh.approx.f32'") and printed to stderr with an "fff-emulator: " prefix.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_ERRORS_H
#define FFF_EMULATOR_ERRORS_H

#include "CudaTypes.h"

#include <cstdint>
#include <string>

namespace fff::emulator {

/// "CUDA_ERROR_INVALID_PTX" for CUDA_ERROR_INVALID_PTX; null for a code the
/// driver API does not define.
const char *errorName(CUresult code);

/// The most recent detailed message for `code`, else the driver's standard
/// description; null for an undefined code. The text stays valid until the
/// next error with the same code.
const char *errorString(CUresult code);

/// Records and prints `detail` as the latest message of `code`; returns
/// `code`.
CUresult reportError(CUresult code, const std::string &detail);

/// "0x7f3a2c000100": addresses and lane masks in messages.
std::string formatHex(uint64_t address);

} // namespace fff::emulator

#endif // FFF_EMULATOR_ERRORS_H

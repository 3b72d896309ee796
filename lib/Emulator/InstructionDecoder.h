//===- InstructionDecoder.h - PTX statements to instructions ----*- C++ -*-===//
//
// Decodes one statement: checks its opcode, modifiers, types and operands
// against what the emulator implements, and picks its semantics. Anything
// it does not know is an error that names it; nothing is skipped.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_INSTRUCTIONDECODER_H
#define FFF_EMULATOR_INSTRUCTIONDECODER_H

#include "KernelBuilder.h"

#include <optional>
#include <string>
#include <string_view>

namespace fff::emulator {

/// Decodes `parsed` into `instruction`; returns the error's text (without
/// its line), or the empty string.
std::string decodeInstruction(const ParsedInstruction &parsed,
                              KernelBuilder &builder, Instruction &instruction);

/// "b32" to ScalarType::B32; none for a name that is not a PTX type the
/// emulator knows.
std::optional<ScalarType> parseScalarType(std::string_view name);

} // namespace fff::emulator

#endif // FFF_EMULATOR_INSTRUCTIONDECODER_H

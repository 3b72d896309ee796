//===- KernelBuilder.h - A kernel's names while it is decoded ---*- C++ -*-===//
//
// The parser turns each PTX statement into a ParsedInstruction; the decoder
// turns that into an Instruction, resolving names through the builder:
// registers to register indices, immediates and symbol addresses to
// constant registers, labels to instruction indices (patched once the
// kernel's last label is known).
//
// Methods that can fail return the error's text, empty on success.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_KERNELBUILDER_H
#define FFF_EMULATOR_KERNELBUILDER_H

#include "Program.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fff::emulator {

/// An operand as written.
struct Operand {
  enum class Kind : uint8_t {
    Register,  // %r1, %tid.x
    Integer,   // 42, -1, 0x1f
    FloatBits, // 0f3F800000 (floatWidth 32), 0d... (64)
    Symbol,    // a variable, parameter or label name
    Vector,    // {%r1, %r2}
    Address,   // [base+offset]
    Sink,      // _
  };
  Kind kind = Kind::Register;
  std::string_view name;   // Register, Symbol; Address: its base, if any
  uint64_t value = 0;      // Integer, FloatBits
  unsigned floatWidth = 0; // FloatBits
  int64_t offset = 0;      // Address
  bool baseIsRegister = false;
  std::vector<Operand> elements; // Vector
  std::string_view predicate;    // the p of a "d|p" destination
};

struct ParsedInstruction {
  std::string_view mnemonic;
  std::vector<Operand> operands;
  std::string_view guard; // empty: unconditional
  bool guardNegated = false;
  unsigned line = 0;
};

struct RegisterInfo {
  RegisterIndex index;
  ScalarType type;
};

/// Where a symbol lives: a device address (Global), an offset in the
/// block's shared memory (Shared) or in the parameter buffer (Param).
struct SymbolAddress {
  StateSpace space;
  uint64_t value;
  uint64_t bytes;
};

using SymbolTable = std::map<std::string, SymbolAddress, std::less<>>;

class KernelBuilder {
public:
  /// `moduleSymbols` holds the module-scope variables declared so far; the
  /// kernel's own shared variables follow the module's in shared memory.
  KernelBuilder(Kernel &kernel, Module &module,
                const SymbolTable &moduleSymbols, unsigned moduleSharedBytes);

  /// .reg .type %name<count>: %name0 ... %name<count-1>.
  std::string declareRegisters(std::string_view prefix, unsigned count,
                               ScalarType type);
  /// .reg .type %name.
  std::string declareRegister(std::string_view name, ScalarType type);
  std::string declareShared(std::string_view name, uint64_t bytes,
                            unsigned alignment);
  std::string declareParameter(std::string_view name, unsigned bytes,
                               unsigned alignment);

  const RegisterInfo *findRegister(std::string_view name) const;
  const SymbolAddress *findSymbol(std::string_view name) const;
  const KernelParameter *findParameter(std::string_view name) const;
  /// The register holding `which` in each lane; allocates it on first use.
  RegisterIndex specialRegister(SpecialRegister which);
  /// A register holding `value` in every lane, shared by equal values.
  RegisterIndex constant(uint64_t value);
  /// Errors as allocation runs out of register indices.
  const std::string &registerError() const { return tooManyRegisters; }

  void defineLabel(std::string_view name, unsigned line);
  /// The instruction being decoded (the next in the kernel) branches to
  /// `label`, which may come later.
  void useLabel(std::string_view label, unsigned line);
  uint16_t opcodeId(std::string_view mnemonic);

  /// Resolves branch targets and sizes the register file; "line N: ..." on
  /// error.
  std::string finish();

private:
  RegisterIndex allocateRegister();

  struct LabelUse {
    std::string label;
    uint32_t index;
    unsigned line;
  };

  Kernel &kernel;
  Module &module;
  const SymbolTable &moduleSymbols;
  SymbolTable kernelSymbols;
  std::unordered_map<std::string, RegisterInfo> registers;
  std::map<uint64_t, RegisterIndex> constants;
  std::map<SpecialRegister, RegisterIndex> specials;
  std::unordered_map<std::string, uint32_t> labels;
  std::string duplicateLabel;
  std::vector<LabelUse> labelUses;
  unsigned nextRegister = 0;
  std::string tooManyRegisters;
};

} // namespace fff::emulator

#endif // FFF_EMULATOR_KERNELBUILDER_H

//===- Program.h - Decoded PTX: kernels as instruction arrays ---*- C++ -*-===//
//
// PTX is decoded once, when a module loads, into a form the interpreter runs
// without looking at text again. Each instruction carries its semantics as a
// function chosen for its exact opcode, types and modifiers, and its
// operands as register indices.
//
// Every operand is a register: immediates, special registers (%tid.x, ...)
// and symbol addresses get registers of their own, filled before the kernel
// runs, so reading an operand never depends on what kind of operand it is.
//
// A register holds 64 bits for each lane of a warp. An instruction reads the
// low bits its type names and writes its result extended to 64 bits (signed
// types sign-extended); bits above a type's width are never read.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_PROGRAM_H
#define FFF_EMULATOR_PROGRAM_H

#include "Float16.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fff::emulator {

constexpr unsigned WarpSize = 32;

/// One bit per lane of a warp.
using LaneMask = uint32_t;
constexpr LaneMask AllLanes = ~LaneMask(0);

using RegisterIndex = uint16_t;
constexpr RegisterIndex NoRegister = UINT16_MAX;

/// The reconvergence point of a branch whose paths meet only by exiting.
constexpr uint32_t NoReconvergence = UINT32_MAX;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t(x) * y * z; }
};

/// The scalar types of PTX instructions; the x2 types are two 16-bit values
/// packed in 32 bits.
enum class ScalarType : uint8_t {
  Pred,
  B8,
  B16,
  B32,
  B64,
  U8,
  U16,
  U32,
  U64,
  S8,
  S16,
  S32,
  S64,
  F16,
  BF16,
  F32,
  F64,
  F16x2,
  BF16x2,
};

unsigned bitWidth(ScalarType type);
inline unsigned byteWidth(ScalarType type) { return bitWidth(type) / 8; }
bool isSignedInteger(ScalarType type);
bool isBitType(ScalarType type);
bool isFloat(ScalarType type); // f32, f64 and the 16-bit formats
/// "f32" for ScalarType::F32.
const char *spelling(ScalarType type);

enum class StateSpace : uint8_t { Global, Shared, Param };

/// What an instruction does to the warp's control flow after its data
/// semantics (if any) have run.
enum class ControlFlow : uint8_t {
  Next,    // continue with the following instruction
  Branch,  // lanes whose guard holds jump to `target`
  Exit,    // lanes whose guard holds finish (ret, exit)
  Barrier, // lanes whose guard holds wait at barrier `target` (bar.sync)
};

enum class SpecialRegister : uint8_t {
  TidX,
  TidY,
  TidZ,
  NtidX,
  NtidY,
  NtidZ,
  CtaidX,
  CtaidY,
  CtaidZ,
  NctaidX,
  NctaidY,
  NctaidZ,
  LaneId,
  WarpId,
};

enum class ShuffleMode : uint8_t { Up, Down, Butterfly, Index };

/// How a float instruction rounds, and its .ftz and .sat modifiers.
struct FloatModes {
  Rounding rounding = Rounding::NearestEven;
  bool flushSubnormals = false; // .ftz
  bool saturate = false;        // .sat: clamp to [0, 1], NaN to 0
};

/// The address of an ld or st: the value of register `base` plus `offset`.
/// Absolute addresses ([symbol], [constant]) use a constant base register.
struct MemoryOperand {
  RegisterIndex base = NoRegister;
  int64_t offset = 0;
  StateSpace space = StateSpace::Global;
  uint8_t elementBytes = 0; // of each element of a vector access
  uint8_t elementCount = 1; // 1, 2 or 4 (.v2, .v4)
  bool signExtend = false;  // .s8/.s16/.s32 loads into wider registers
  unsigned bytes() const { return unsigned(elementBytes) * elementCount; }
};

struct ExecContext;
struct Instruction;

/// An instruction's data semantics, run for the lanes in `lanes` (the
/// active lanes whose guard predicate holds).
using ExecuteFn = void (*)(ExecContext &context, const Instruction &instruction,
                           LaneMask lanes);

struct Instruction {
  ExecuteFn execute = nullptr; // null for pure control flow
  ControlFlow flow = ControlFlow::Next;
  bool guardNegated = false;        // @!%p
  RegisterIndex guard = NoRegister; // NoRegister: unconditional
  RegisterIndex destinations[4] = {NoRegister, NoRegister, NoRegister,
                                   NoRegister};
  RegisterIndex sources[4] = {NoRegister, NoRegister, NoRegister, NoRegister};
  /// The instruction's type (cvt's destination type).
  ScalarType type = ScalarType::B32;
  FloatModes floatModes;
  ShuffleMode shuffleMode = ShuffleMode::Butterfly;
  MemoryOperand memory;
  uint32_t target = 0; // Branch: instruction index; Barrier: barrier id
  /// For a conditional branch, where lanes that diverge there meet again:
  /// the first instruction of the immediate post-dominator of its block.
  uint32_t reconvergence = NoReconvergence;
  uint16_t opcodeId = 0; // the mnemonic, in Module::opcodeNames
  uint32_t line = 0;     // in the PTX text
};

struct KernelParameter {
  std::string name;
  unsigned offset = 0; // in the parameter buffer
  unsigned bytes = 0;
};

/// A register filled with the same value in every lane before a launch.
struct ConstantRegister {
  RegisterIndex index;
  uint64_t value;
};

struct SpecialRegisterUse {
  RegisterIndex index;
  SpecialRegister which;
};

struct Kernel {
  std::string name;
  std::vector<Instruction> code;
  std::vector<KernelParameter> parameters;
  unsigned parameterBytes = 0;
  unsigned numRegisters = 0;
  std::vector<ConstantRegister> constants;
  std::vector<SpecialRegisterUse> specialRegisters;
  unsigned staticSharedBytes = 0;
  /// .maxntid and .reqntid, when present.
  bool hasMaxThreads = false, hasRequiredThreads = false;
  Dim3 maxThreads, requiredThreads;
};

struct Module {
  std::map<std::string, std::unique_ptr<Kernel>, std::less<>> kernels;
  /// Mnemonics as written ("ld.global.v4.b32"), indexed by opcodeId, for
  /// statistics.
  std::vector<std::string> opcodeNames;
};

} // namespace fff::emulator

#endif // FFF_EMULATOR_PROGRAM_H

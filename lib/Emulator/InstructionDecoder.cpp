//===- InstructionDecoder.cpp - PTX statements to instructions --*- C++ -*-===//

#include "InstructionDecoder.h"

#include "Semantics.h"

#include <initializer_list>
#include <vector>

namespace fff::emulator {

std::optional<ScalarType> parseScalarType(std::string_view name) {
  static constexpr std::pair<std::string_view, ScalarType> types[] = {
      {"pred", ScalarType::Pred},     {"b8", ScalarType::B8},
      {"b16", ScalarType::B16},       {"b32", ScalarType::B32},
      {"b64", ScalarType::B64},       {"u8", ScalarType::U8},
      {"u16", ScalarType::U16},       {"u32", ScalarType::U32},
      {"u64", ScalarType::U64},       {"s8", ScalarType::S8},
      {"s16", ScalarType::S16},       {"s32", ScalarType::S32},
      {"s64", ScalarType::S64},       {"f16", ScalarType::F16},
      {"bf16", ScalarType::BF16},     {"f32", ScalarType::F32},
      {"f64", ScalarType::F64},       {"f16x2", ScalarType::F16x2},
      {"bf16x2", ScalarType::BF16x2},
  };
  for (const auto &[spelling, type] : types)
    if (name == spelling)
      return type;
  return std::nullopt;
}

namespace {

std::optional<SpecialRegister> parseSpecialRegister(std::string_view name) {
  static constexpr std::pair<std::string_view, SpecialRegister> specials[] = {
      {"%tid.x", SpecialRegister::TidX},
      {"%tid.y", SpecialRegister::TidY},
      {"%tid.z", SpecialRegister::TidZ},
      {"%ntid.x", SpecialRegister::NtidX},
      {"%ntid.y", SpecialRegister::NtidY},
      {"%ntid.z", SpecialRegister::NtidZ},
      {"%ctaid.x", SpecialRegister::CtaidX},
      {"%ctaid.y", SpecialRegister::CtaidY},
      {"%ctaid.z", SpecialRegister::CtaidZ},
      {"%nctaid.x", SpecialRegister::NctaidX},
      {"%nctaid.y", SpecialRegister::NctaidY},
      {"%nctaid.z", SpecialRegister::NctaidZ},
      {"%laneid", SpecialRegister::LaneId},
      {"%warpid", SpecialRegister::WarpId},
  };
  for (const auto &[spelling, which] : specials)
    if (name == spelling)
      return which;
  return std::nullopt;
}

/// The integer type of twice `type`'s width and its signedness: what .wide
/// multiplications produce.
ScalarType widened(ScalarType type) {
  bool isSigned = isSignedInteger(type);
  if (bitWidth(type) == 16)
    return isSigned ? ScalarType::S32 : ScalarType::U32;
  return isSigned ? ScalarType::S64 : ScalarType::U64;
}

/// The dot-separated parts of a mnemonic after its opcode. The decoder
/// takes those it understands; any left over are unsupported.
class Modifiers {
public:
  explicit Modifiers(std::string_view mnemonic) {
    size_t dot = mnemonic.find('.');
    opcode = mnemonic.substr(0, dot);
    while (dot != std::string_view::npos) {
      size_t next = mnemonic.find('.', dot + 1);
      parts.push_back(mnemonic.substr(dot + 1, next - dot - 1));
      dot = next;
    }
    used.assign(parts.size(), false);
  }

  std::string_view opcode;

  bool take(std::string_view modifier) {
    for (size_t i = 0; i < parts.size(); ++i)
      if (!used[i] && parts[i] == modifier)
        return used[i] = true;
    return false;
  }

  /// The index in `choices` of the one present, taken; -1 if none is.
  int takeOneOf(std::initializer_list<std::string_view> choices) {
    int index = 0;
    for (std::string_view choice : choices) {
      if (take(choice))
        return index;
      ++index;
    }
    return -1;
  }

  /// The last `count` parts, which must be types.
  std::optional<std::vector<ScalarType>> takeTypes(unsigned count) {
    if (parts.size() < count)
      return std::nullopt;
    std::vector<ScalarType> types;
    for (size_t i = parts.size() - count; i < parts.size(); ++i) {
      std::optional<ScalarType> type = parseScalarType(parts[i]);
      if (!type || used[i])
        return std::nullopt;
      used[i] = true;
      types.push_back(*type);
    }
    return types;
  }

  /// The first part nothing took, or empty.
  std::string_view leftOver() const {
    for (size_t i = 0; i < parts.size(); ++i)
      if (!used[i])
        return parts[i];
    return {};
  }

private:
  std::vector<std::string_view> parts;
  std::vector<bool> used;
};

class Decoder {
public:
  Decoder(const ParsedInstruction &parsed, KernelBuilder &builder,
          Instruction &instruction)
      : parsed(parsed), builder(builder), instruction(instruction),
        modifiers(parsed.mnemonic) {}

  std::string run();

private:
  using DecodeFn = bool (Decoder::*)();

  bool decodeAdd() { return decodeArithmetic(IntegerOp::Add, FloatOp::Add); }
  bool decodeSub() { return decodeArithmetic(IntegerOp::Sub, FloatOp::Sub); }
  bool decodeMul();
  bool decodeMad();
  bool decodeFma();
  bool decodeDiv() { return decodeArithmetic(IntegerOp::Div, FloatOp::Div); }
  bool decodeRem();
  bool decodeMin() { return decodeArithmetic(IntegerOp::Min, FloatOp::Min); }
  bool decodeMax() { return decodeArithmetic(IntegerOp::Max, FloatOp::Max); }
  bool decodeNeg() { return decodeArithmetic(IntegerOp::Neg, FloatOp::Neg); }
  bool decodeAbs() { return decodeArithmetic(IntegerOp::Abs, FloatOp::Abs); }
  bool decodeRcp() { return decodeFloatOnly(FloatOp::Rcp); }
  bool decodeSqrt() { return decodeFloatOnly(FloatOp::Sqrt); }
  bool decodeAnd() { return decodeBitwise(IntegerOp::And); }
  bool decodeOr() { return decodeBitwise(IntegerOp::Or); }
  bool decodeXor() { return decodeBitwise(IntegerOp::Xor); }
  bool decodeNot() { return decodeBitwise(IntegerOp::Not); }
  bool decodeShl() { return decodeBitwise(IntegerOp::Shl); }
  bool decodeShr();
  bool decodeSetp();
  bool decodeSelp();
  bool decodeMov();
  bool decodePrmt();
  bool decodeCvt();
  bool decodeCvta();
  bool decodeLoad() { return decodeMemory(false); }
  bool decodeStore() { return decodeMemory(true); }
  bool decodeShfl();
  bool decodeBarrier();
  bool decodeBra();
  bool decodeExit();

  bool decodeArithmetic(IntegerOp integerOp, FloatOp floatOp);
  bool decodeFloat(FloatOp op, ScalarType type, bool roundingRequired);
  bool decodeInteger(IntegerOp op, ScalarType type);
  bool decodeFloatOnly(FloatOp op);
  bool decodeBitwise(IntegerOp op);
  bool decodeMemory(bool isStore);
  bool decodeAddress(const Operand &operand, StateSpace space);

  // Operands.
  bool expectOperands(size_t count);
  bool destination(const Operand &operand, ScalarType type,
                   RegisterIndex &index);
  bool source(const Operand &operand, ScalarType type, RegisterIndex &index);
  /// Destinations d, sources a, b, ... of the given types.
  bool operands(ScalarType destinationType,
                std::initializer_list<ScalarType> sourceTypes);
  bool checkRegisterType(const RegisterInfo &info, ScalarType type,
                         std::string_view name);

  std::optional<ScalarType> takeType();
  /// .rn/.rz/.rm/.rp (nearest even when absent), .ftz, and .sat when
  /// `allowSaturate`.
  FloatModes takeFloatModes(bool allowSaturate);
  bool hasRounding = false;

  bool select(ExecuteFn execute);
  bool fail(std::string message) {
    if (error.empty())
      error = std::move(message);
    return false;
  }
  std::string quoted() const {
    return "'" + std::string(parsed.mnemonic) + "'";
  }

  const ParsedInstruction &parsed;
  KernelBuilder &builder;
  Instruction &instruction;
  Modifiers modifiers;
  std::string error;
};

std::string Decoder::run() {
  static const std::pair<std::string_view, DecodeFn> decoders[] = {
      {"add", &Decoder::decodeAdd},         {"sub", &Decoder::decodeSub},
      {"mul", &Decoder::decodeMul},         {"mad", &Decoder::decodeMad},
      {"fma", &Decoder::decodeFma},         {"div", &Decoder::decodeDiv},
      {"rem", &Decoder::decodeRem},         {"min", &Decoder::decodeMin},
      {"max", &Decoder::decodeMax},         {"neg", &Decoder::decodeNeg},
      {"abs", &Decoder::decodeAbs},         {"rcp", &Decoder::decodeRcp},
      {"sqrt", &Decoder::decodeSqrt},       {"and", &Decoder::decodeAnd},
      {"or", &Decoder::decodeOr},           {"xor", &Decoder::decodeXor},
      {"not", &Decoder::decodeNot},         {"shl", &Decoder::decodeShl},
      {"shr", &Decoder::decodeShr},         {"setp", &Decoder::decodeSetp},
      {"selp", &Decoder::decodeSelp},       {"mov", &Decoder::decodeMov},
      {"prmt", &Decoder::decodePrmt},
      {"cvt", &Decoder::decodeCvt},         {"cvta", &Decoder::decodeCvta},
      {"ld", &Decoder::decodeLoad},         {"st", &Decoder::decodeStore},
      {"shfl", &Decoder::decodeShfl},       {"bar", &Decoder::decodeBarrier},
      {"barrier", &Decoder::decodeBarrier}, {"bra", &Decoder::decodeBra},
      {"ret", &Decoder::decodeExit},        {"exit", &Decoder::decodeExit},
  };
  DecodeFn decode = nullptr;
  for (const auto &[opcode, function] : decoders)
    if (modifiers.opcode == opcode)
      decode = function;
  if (!decode)
    return "unknown opcode " + quoted();

  instruction.line = parsed.line;
  instruction.opcodeId = builder.opcodeId(parsed.mnemonic);
  if (!parsed.guard.empty()) {
    const RegisterInfo *guard = builder.findRegister(parsed.guard);
    if (!guard)
      return "undeclared predicate " + std::string(parsed.guard);
    if (guard->type != ScalarType::Pred)
      return "guard " + std::string(parsed.guard) + " is not a predicate";
    instruction.guard = guard->index;
    instruction.guardNegated = parsed.guardNegated;
  }
  if (!(this->*decode)())
    return error;
  if (std::string_view unused = modifiers.leftOver(); !unused.empty())
    return "unsupported modifier '." + std::string(unused) + "' in " + quoted();
  if (!builder.registerError().empty())
    return builder.registerError();
  return "";
}

//===----------------------------------------------------------------------===//
// Operands
//===----------------------------------------------------------------------===//

bool Decoder::expectOperands(size_t count) {
  if (parsed.operands.size() == count)
    return true;
  return fail(quoted() + " takes " + std::to_string(count) + " operands, not " +
              std::to_string(parsed.operands.size()));
}

bool Decoder::checkRegisterType(const RegisterInfo &info, ScalarType type,
                                std::string_view name) {
  bool wantsPredicate = type == ScalarType::Pred;
  if ((info.type == ScalarType::Pred) == wantsPredicate)
    return true;
  return fail(std::string(name) +
              (wantsPredicate ? " is not a predicate register in "
                              : " is a predicate register in ") +
              quoted());
}

bool Decoder::destination(const Operand &operand, ScalarType type,
                          RegisterIndex &index) {
  if (operand.kind != Operand::Kind::Register)
    return fail("the destination of " + quoted() + " must be a register");
  const RegisterInfo *info = builder.findRegister(operand.name);
  if (!info)
    return fail("undeclared register " + std::string(operand.name) + " in " +
                quoted());
  index = info->index;
  return checkRegisterType(*info, type, operand.name);
}

bool Decoder::source(const Operand &operand, ScalarType type,
                     RegisterIndex &index) {
  switch (operand.kind) {
  case Operand::Kind::Register: {
    if (const RegisterInfo *info = builder.findRegister(operand.name)) {
      index = info->index;
      return checkRegisterType(*info, type, operand.name);
    }
    if (std::optional<SpecialRegister> which =
            parseSpecialRegister(operand.name)) {
      index = builder.specialRegister(*which);
      return true;
    }
    return fail("undeclared register or unsupported special register " +
                std::string(operand.name) + " in " + quoted());
  }
  case Operand::Kind::Integer:
    if (isFloat(type))
      return fail("integer immediate for a ." + std::string(spelling(type)) +
                  " operand of " + quoted());
    index = builder.constant(type == ScalarType::Pred ? operand.value != 0
                                                      : operand.value);
    return true;
  case Operand::Kind::FloatBits:
    if (bitWidth(type) != operand.floatWidth)
      return fail("a " + std::to_string(operand.floatWidth) +
                  "-bit float immediate for a ." + std::string(spelling(type)) +
                  " operand of " + quoted());
    index = builder.constant(operand.value);
    return true;
  case Operand::Kind::Symbol: {
    const SymbolAddress *symbol = builder.findSymbol(operand.name);
    if (!symbol || symbol->space == StateSpace::Param)
      return fail("unknown symbol " + std::string(operand.name) + " in " +
                  quoted());
    index = builder.constant(symbol->value);
    return true;
  }
  default:
    return fail("unexpected operand form in " + quoted());
  }
}

bool Decoder::operands(ScalarType destinationType,
                       std::initializer_list<ScalarType> sourceTypes) {
  if (!expectOperands(1 + sourceTypes.size()))
    return false;
  if (!parsed.operands[0].predicate.empty())
    return fail(quoted() + " has no second destination");
  if (!destination(parsed.operands[0], destinationType,
                   instruction.destinations[0]))
    return false;
  size_t index = 0;
  for (ScalarType type : sourceTypes) {
    if (!source(parsed.operands[1 + index], type, instruction.sources[index]))
      return false;
    ++index;
  }
  return true;
}

std::optional<ScalarType> Decoder::takeType() {
  std::optional<std::vector<ScalarType>> types = modifiers.takeTypes(1);
  if (!types) {
    fail(quoted() + " needs a type the emulator supports");
    return std::nullopt;
  }
  return types->front();
}

FloatModes Decoder::takeFloatModes(bool allowSaturate) {
  FloatModes modes;
  int rounding = modifiers.takeOneOf({"rn", "rz", "rm", "rp"});
  hasRounding = rounding >= 0;
  if (hasRounding)
    modes.rounding = Rounding(rounding);
  modes.flushSubnormals = modifiers.take("ftz");
  modes.saturate = allowSaturate && modifiers.take("sat");
  return modes;
}

bool Decoder::select(ExecuteFn execute) {
  if (!execute)
    return fail(quoted() + " is not supported (no such combination of "
                           "types and modifiers in the emulator)");
  instruction.execute = execute;
  return true;
}

//===----------------------------------------------------------------------===//
// Arithmetic
//===----------------------------------------------------------------------===//

bool Decoder::decodeArithmetic(IntegerOp integerOp, FloatOp floatOp) {
  std::optional<ScalarType> type = takeType();
  if (!type)
    return false;
  if (isFloat(*type))
    return decodeFloat(floatOp, *type,
                       floatOp == FloatOp::Div && *type != ScalarType::F16 &&
                           *type != ScalarType::BF16);
  return decodeInteger(integerOp, *type);
}

bool Decoder::decodeFloat(FloatOp op, ScalarType type, bool roundingRequired) {
  if (modifiers.take("approx") || modifiers.take("full"))
    return fail(quoted() + " is not supported: approximate forms (.approx, "
                           ".full) are not");
  bool computes = op != FloatOp::Min && op != FloatOp::Max &&
                  op != FloatOp::Neg && op != FloatOp::Abs;
  bool propagateNaN =
      (op == FloatOp::Min || op == FloatOp::Max) && modifiers.take("NaN");
  FloatModes modes = takeFloatModes(op == FloatOp::Add || op == FloatOp::Sub ||
                                    op == FloatOp::Mul || op == FloatOp::Fma);
  if (!computes && hasRounding)
    return fail(quoted() + " takes no rounding modifier");
  if (roundingRequired && !hasRounding)
    return fail(quoted() + " needs a rounding modifier (.rn, .rz, .rm or "
                           ".rp)");
  instruction.type = type;
  instruction.floatModes = modes;
  if (!select(selectFloatOp(op, type, modes, propagateNaN)))
    return false;
  switch (op) {
  case FloatOp::Fma:
    return operands(type, {type, type, type});
  case FloatOp::Rcp:
  case FloatOp::Sqrt:
  case FloatOp::Neg:
  case FloatOp::Abs:
    return operands(type, {type});
  default:
    return operands(type, {type, type});
  }
}

bool Decoder::decodeInteger(IntegerOp op, ScalarType type) {
  instruction.type = type;
  if (!select(selectIntegerOp(op, type)))
    return false;
  switch (op) {
  case IntegerOp::Neg:
  case IntegerOp::Abs:
  case IntegerOp::Not:
    return operands(type, {type});
  case IntegerOp::Shl:
  case IntegerOp::Shr:
    return operands(type, {type, ScalarType::U32});
  case IntegerOp::MadLo:
  case IntegerOp::MadHi:
    return operands(type, {type, type, type});
  default:
    return operands(type, {type, type});
  }
}

bool Decoder::decodeMul() {
  int mode = modifiers.takeOneOf({"lo", "hi", "wide"});
  std::optional<ScalarType> type = takeType();
  if (!type)
    return false;
  if (isFloat(*type))
    return mode < 0 ? decodeFloat(FloatOp::Mul, *type, false)
                    : fail(quoted() + ": .lo, .hi and .wide are for integers");
  if (mode < 0)
    return fail(quoted() + " needs .lo, .hi or .wide");
  if (mode != 2)
    return decodeInteger(mode == 0 ? IntegerOp::MulLo : IntegerOp::MulHi,
                         *type);
  instruction.type = *type;
  return select(selectIntegerOp(IntegerOp::MulWide, *type)) &&
         operands(widened(*type), {*type, *type});
}

bool Decoder::decodeMad() {
  int mode = modifiers.takeOneOf({"lo", "hi", "wide"});
  std::optional<ScalarType> type = takeType();
  if (!type)
    return false;
  if (isFloat(*type))
    return mode < 0 ? decodeFloat(FloatOp::Fma, *type, true)
                    : fail(quoted() + ": .lo, .hi and .wide are for integers");
  if (mode < 0)
    return fail(quoted() + " needs .lo, .hi or .wide");
  if (mode != 2)
    return decodeInteger(mode == 0 ? IntegerOp::MadLo : IntegerOp::MadHi,
                         *type);
  instruction.type = *type;
  ScalarType wide = widened(*type);
  return select(selectIntegerOp(IntegerOp::MadWide, *type)) &&
         operands(wide, {*type, *type, wide});
}

bool Decoder::decodeFma() {
  std::optional<ScalarType> type = takeType();
  if (!type)
    return false;
  if (!isFloat(*type))
    return fail(quoted() + " needs a float type");
  return decodeFloat(FloatOp::Fma, *type, true);
}

bool Decoder::decodeRem() {
  std::optional<ScalarType> type = takeType();
  return type && decodeInteger(IntegerOp::Rem, *type);
}

bool Decoder::decodeFloatOnly(FloatOp op) {
  std::optional<ScalarType> type = takeType();
  if (!type)
    return false;
  if (!isFloat(*type))
    return fail(quoted() + " needs a float type");
  return decodeFloat(op, *type, true);
}

bool Decoder::decodeBitwise(IntegerOp op) {
  std::optional<ScalarType> type = takeType();
  return type && decodeInteger(op, *type);
}

bool Decoder::decodeShr() {
  std::optional<ScalarType> type = takeType();
  return type && decodeInteger(IntegerOp::Shr, *type);
}

//===----------------------------------------------------------------------===//
// Comparison, selection, moves and conversions
//===----------------------------------------------------------------------===//

bool Decoder::decodeSetp() {
  int compare = modifiers.takeOneOf({"eq", "ne", "lt", "le", "gt", "ge", "lo",
                                     "ls", "hi", "hs", "equ", "neu", "ltu",
                                     "leu", "gtu", "geu", "num", "nan"});
  std::optional<ScalarType> type = takeType();
  if (!type)
    return false;
  if (compare < 0)
    return fail(quoted() + " needs a comparison");
  instruction.type = *type;
  return select(selectCompare(CompareOp(compare), *type)) &&
         operands(ScalarType::Pred, {*type, *type});
}

bool Decoder::decodeSelp() {
  std::optional<ScalarType> type = takeType();
  if (!type)
    return false;
  if (*type == ScalarType::Pred)
    return fail(quoted() + " needs a data type");
  instruction.type = *type;
  return select(selectSelect()) &&
         operands(*type, {*type, *type, ScalarType::Pred});
}

bool Decoder::decodePrmt() {
  if (modifiers.takeOneOf({"f4e", "b4e", "rc8", "ecl", "ecr", "rc16"}) >= 0)
    return fail(quoted() + " is not supported: only prmt's default mode is");
  std::optional<ScalarType> type = takeType();
  if (!type)
    return false;
  if (*type != ScalarType::B32)
    return fail(quoted() + " takes .b32 only");
  instruction.type = *type;
  return select(selectPermute()) &&
         operands(*type, {*type, *type, *type});
}

bool Decoder::decodeMov() {
  std::optional<ScalarType> type = takeType();
  if (!type || !expectOperands(2))
    return false;
  instruction.type = *type;
  const Operand &to = parsed.operands[0], &from = parsed.operands[1];
  if (to.kind == Operand::Kind::Vector) { // mov.b32 {lo, hi}, packed
    size_t parts = to.elements.size();
    if (!select(selectUnpack(bitWidth(*type), unsigned(parts))))
      return false;
    ScalarType partType =
        bitWidth(*type) / parts == 16 ? ScalarType::B16 : ScalarType::B32;
    for (size_t part = 0; part < parts; ++part) {
      if (to.elements[part].kind == Operand::Kind::Sink)
        continue;
      if (!destination(to.elements[part], partType,
                       instruction.destinations[part]))
        return false;
    }
    return source(from, *type, instruction.sources[0]);
  }
  if (from.kind == Operand::Kind::Vector) { // mov.b32 packed, {lo, hi}
    size_t parts = from.elements.size();
    if (!select(selectPack(bitWidth(*type), unsigned(parts))))
      return false;
    ScalarType partType =
        bitWidth(*type) / parts == 16 ? ScalarType::B16 : ScalarType::B32;
    for (size_t part = 0; part < parts; ++part)
      if (!source(from.elements[part], partType, instruction.sources[part]))
        return false;
    return destination(to, *type, instruction.destinations[0]);
  }
  return select(selectMove()) && operands(*type, {*type});
}

bool Decoder::decodeCvt() {
  int integerRounding = modifiers.takeOneOf({"rni", "rzi", "rmi", "rpi"});
  FloatModes modes = takeFloatModes(true);
  std::optional<std::vector<ScalarType>> types = modifiers.takeTypes(2);
  if (!types)
    return fail(quoted() + " needs a destination and a source type the "
                           "emulator supports");
  ScalarType to = (*types)[0], from = (*types)[1];
  if (integerRounding >= 0) {
    if (hasRounding)
      return fail(quoted() + " has two rounding modifiers");
    modes.rounding = Rounding(integerRounding);
  }
  instruction.type = to;
  instruction.floatModes = modes;

  if (to == ScalarType::F16x2 || to == ScalarType::BF16x2) {
    if (from != ScalarType::F32 || !hasRounding || modes.flushSubnormals ||
        modes.saturate)
      return fail(quoted() + " is not supported (packed conversions take "
                             "two .f32 sources and .rn, .rz, .rm or .rp)");
    return select(selectPackedConvert(to)) &&
           operands(ScalarType::B32, {ScalarType::F32, ScalarType::F32});
  }

  bool toFloat = isFloat(to), fromFloat = isFloat(from);
  if (!toFloat && !fromFloat && (hasRounding || integerRounding >= 0))
    return fail(quoted() + ": integer conversions take no rounding modifier");
  if (!toFloat && fromFloat && integerRounding < 0)
    return fail(quoted() + " needs an integer rounding modifier (.rni, "
                           ".rzi, .rmi or .rpi)");
  bool inexactToFloat =
      toFloat && (!fromFloat || bitWidth(to) < bitWidth(from));
  if (inexactToFloat && !hasRounding)
    return fail(quoted() + " needs a rounding modifier (.rn, .rz, .rm or "
                           ".rp)");
  return select(selectConvert(to, from, modes, integerRounding >= 0)) &&
         operands(to, {from});
}

bool Decoder::decodeCvta() {
  modifiers.take("to");
  if (!modifiers.take("global"))
    return fail(quoted() + " is not supported: only the global space is "
                           "(generic addresses are global addresses here)");
  std::optional<ScalarType> type = takeType();
  if (!type)
    return false;
  if (*type != ScalarType::U64)
    return fail(quoted() + " needs .u64 (64-bit addresses)");
  return select(selectMove()) && operands(*type, {*type});
}

//===----------------------------------------------------------------------===//
// Memory, shuffles and control flow
//===----------------------------------------------------------------------===//

bool Decoder::decodeAddress(const Operand &operand, StateSpace space) {
  if (operand.kind != Operand::Kind::Address)
    return fail(quoted() + " needs an address operand [...]");
  MemoryOperand &memory = instruction.memory;
  memory.offset = operand.offset;
  if (space == StateSpace::Param) {
    const KernelParameter *parameter =
        operand.baseIsRegister ? nullptr : builder.findParameter(operand.name);
    if (!parameter)
      return fail(quoted() + " must name a kernel parameter");
    if (operand.offset < 0 ||
        uint64_t(operand.offset) + memory.bytes() > parameter->bytes)
      return fail(quoted() + " reads past the end of parameter " +
                  parameter->name);
    memory.offset = parameter->offset + operand.offset;
    return true;
  }
  if (operand.baseIsRegister) {
    const RegisterInfo *base = builder.findRegister(operand.name);
    if (!base)
      return fail("undeclared register " + std::string(operand.name) + " in " +
                  quoted());
    memory.base = base->index;
    return checkRegisterType(*base, ScalarType::U64, operand.name);
  }
  uint64_t address = 0;
  if (!operand.name.empty()) {
    const SymbolAddress *symbol = builder.findSymbol(operand.name);
    if (!symbol || symbol->space != space)
      return fail(quoted() + " names " + std::string(operand.name) +
                  ", which is not a variable in its state space");
    address = symbol->value;
  }
  memory.base = builder.constant(address);
  return true;
}

bool Decoder::decodeMemory(bool isStore) {
  int space = modifiers.takeOneOf({"global", "shared", "param"});
  if (space < 0)
    return fail(quoted() + " is not supported: the state space must be "
                           ".global, .shared or .param");
  MemoryOperand &memory = instruction.memory;
  memory.space = StateSpace(space);
  if (!isStore && memory.space == StateSpace::Global)
    modifiers.take("nc");
  // Cache and ordering hints change nothing for a single-threaded
  // interpreter.
  modifiers.takeOneOf({"ca", "cg", "cs", "lu", "cv", "wb", "wt"});
  modifiers.take("weak");
  modifiers.take("volatile");
  int vector = modifiers.takeOneOf({"v2", "v4"});
  memory.elementCount = uint8_t(vector == 0 ? 2 : vector == 1 ? 4 : 1);
  std::optional<ScalarType> type = takeType();
  if (!type)
    return false;
  if (*type == ScalarType::Pred || !expectOperands(2))
    return fail(quoted() + " needs a data type");
  memory.elementBytes = uint8_t(byteWidth(*type));
  memory.signExtend = isSignedInteger(*type);
  if (memory.bytes() > 16)
    return fail(quoted() + " accesses more than 16 bytes");
  instruction.type = *type;
  if (!select(isStore ? selectStore(memory.space) : selectLoad(memory.space)))
    return false;

  const Operand &address = parsed.operands[isStore ? 0 : 1];
  const Operand &data = parsed.operands[isStore ? 1 : 0];
  if (!decodeAddress(address, memory.space))
    return false;
  std::vector<Operand> single{data};
  const std::vector<Operand> &elements =
      data.kind == Operand::Kind::Vector ? data.elements : single;
  if (elements.size() != memory.elementCount)
    return fail(quoted() + " needs " + std::to_string(memory.elementCount) +
                " values, not " + std::to_string(elements.size()));
  for (size_t element = 0; element < elements.size(); ++element) {
    if (isStore) {
      if (!source(elements[element], *type, instruction.sources[element]))
        return false;
    } else if (elements[element].kind != Operand::Kind::Sink &&
               !destination(elements[element], *type,
                            instruction.destinations[element])) {
      return false;
    }
  }
  return true;
}

bool Decoder::decodeShfl() {
  if (!modifiers.take("sync"))
    return fail(quoted() + " is not supported: only shfl.sync is");
  int mode = modifiers.takeOneOf({"up", "down", "bfly", "idx"});
  std::optional<ScalarType> type = takeType();
  if (!type)
    return false;
  if (mode < 0 || *type != ScalarType::B32)
    return fail(quoted() + " needs a mode (.up, .down, .bfly or .idx) and "
                           ".b32");
  instruction.shuffleMode = ShuffleMode(mode);
  if (!select(selectShuffle()) || !expectOperands(5))
    return false;
  const Operand &result = parsed.operands[0];
  if (!destination(result, ScalarType::B32, instruction.destinations[0]))
    return false;
  if (!result.predicate.empty()) {
    Operand predicate;
    predicate.name = result.predicate;
    if (!destination(predicate, ScalarType::Pred, instruction.destinations[1]))
      return false;
  }
  return source(parsed.operands[1], ScalarType::B32, instruction.sources[0]) &&
         source(parsed.operands[2], ScalarType::U32, instruction.sources[1]) &&
         source(parsed.operands[3], ScalarType::U32, instruction.sources[2]) &&
         source(parsed.operands[4], ScalarType::U32, instruction.sources[3]);
}

bool Decoder::decodeBarrier() {
  // bar.warp.sync: the lanes of a warp meet, without stopping the block.
  if (modifiers.opcode == "bar" && modifiers.take("warp")) {
    if (!modifiers.take("sync"))
      return fail(quoted() + " is not supported: only bar.warp.sync is");
    if (!select(selectWarpSync()) || !expectOperands(1))
      return false;
    return source(parsed.operands[0], ScalarType::U32, instruction.sources[0]);
  }
  // bar.sync, bar.cta.sync and barrier.sync[.aligned]: all wait for every
  // thread of the block at the barrier.
  modifiers.take("cta");
  if (modifiers.opcode == "barrier")
    modifiers.take("aligned");
  if (!modifiers.take("sync"))
    return fail(quoted() + " is not supported: only bar.sync is");
  if (parsed.operands.size() == 2)
    return fail(quoted() + " with a thread count is not supported");
  if (!expectOperands(1))
    return false;
  const Operand &barrier = parsed.operands[0];
  if (barrier.kind != Operand::Kind::Integer || barrier.value >= 16)
    return fail(quoted() + " needs a barrier number from 0 to 15");
  instruction.flow = ControlFlow::Barrier;
  instruction.target = uint32_t(barrier.value);
  return true;
}

bool Decoder::decodeBra() {
  modifiers.take("uni");
  if (!expectOperands(1))
    return false;
  if (parsed.operands[0].kind != Operand::Kind::Symbol)
    return fail(quoted() + " needs a label");
  instruction.flow = ControlFlow::Branch;
  builder.useLabel(parsed.operands[0].name, parsed.line);
  return true;
}

bool Decoder::decodeExit() {
  modifiers.take("uni");
  if (!expectOperands(0))
    return false;
  instruction.flow = ControlFlow::Exit;
  return true;
}

} // namespace

std::string decodeInstruction(const ParsedInstruction &parsed,
                              KernelBuilder &builder,
                              Instruction &instruction) {
  return Decoder(parsed, builder, instruction).run();
}

} // namespace fff::emulator

//===- PtxParser.cpp - PTX text to a decoded module -------------*- C++ -*-===//
//
// A recursive-descent parser over PtxLexer's tokens. Each parse method
// returns false once it has recorded an error; the first error wins.
//
//===----------------------------------------------------------------------===//

#include "PtxParser.h"

#include "InstructionDecoder.h"
#include "KernelBuilder.h"
#include "PtxLexer.h"

#include <cstdlib>
#include <cstring>

namespace fff::emulator {
namespace {

/// The newest PTX ISA and the device the emulator stands in for.
constexpr unsigned NewestPtxMajorVersion = 9;
constexpr unsigned EmulatedArchitecture = 90;

/// Whether `count` elements of `bytes` each stay within 2^32 bytes, the
/// most any declared array or parameter may hold (sizes are 32-bit
/// further on): a product that wrapped would under-allocate.
bool fitsDeclaredBytes(uint64_t bytes, uint64_t count) {
  constexpr uint64_t kMaxDeclaredBytes = uint64_t(1) << 32;
  return count == 0 || bytes <= kMaxDeclaredBytes / count;
}

bool isHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
         (c >= 'A' && c <= 'F');
}

/// Parses a PTX integer literal (decimal, 0x hex, 0b binary, 0 octal, with
/// an optional U suffix) with two's complement wrap-around.
bool parseIntegerLiteral(std::string_view text, uint64_t &value) {
  if (!text.empty() && (text.back() == 'U' || text.back() == 'u'))
    text.remove_suffix(1);
  unsigned base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  } else if (text.size() > 2 && text[0] == '0' &&
             (text[1] == 'b' || text[1] == 'B')) {
    base = 2;
    text.remove_prefix(2);
  } else if (text.size() > 1 && text[0] == '0') {
    base = 8;
    text.remove_prefix(1);
  }
  if (text.empty())
    return false;
  value = 0;
  for (char c : text) {
    unsigned digit;
    if (c >= '0' && c <= '9')
      digit = unsigned(c - '0');
    else if (c >= 'a' && c <= 'f')
      digit = unsigned(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      digit = unsigned(c - 'A' + 10);
    else
      return false;
    if (digit >= base)
      return false;
    value = value * base + digit;
  }
  return true;
}

/// "0f3F800000" (32 bits) or "0d3FF0000000000000" (64 bits).
bool parseFloatBits(std::string_view text, uint64_t &bits, unsigned &width) {
  if (text.size() < 2 || text[0] != '0' ||
      (text[1] != 'f' && text[1] != 'F' && text[1] != 'd' && text[1] != 'D'))
    return false;
  width = text[1] == 'f' || text[1] == 'F' ? 32 : 64;
  std::string_view digits = text.substr(2);
  if (digits.size() != width / 4)
    return false;
  bits = 0;
  for (char c : digits) {
    if (!isHexDigit(c))
      return false;
    bits = bits * 16 + unsigned(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return true;
}

class PtxParser {
public:
  PtxParser(std::string_view text, DeviceMemory &memory)
      : lexer(text), memory(memory), module(std::make_unique<Module>()) {
    token = lexer.next();
    lookahead = lexer.next();
  }

  std::unique_ptr<Module> parse(ParseError &result);

private:
  // Module scope.
  bool parseModuleDirective();
  bool parseVersion();
  bool parseTarget();
  bool parseAddressSize();
  bool parseEntry();
  bool parseParameter(KernelBuilder &builder);
  bool parsePerformanceDirective(Kernel &kernel);
  bool parseGlobalVariable();

  // Kernel bodies.
  bool parseBody(KernelBuilder &builder, Kernel &kernel);
  bool parseRegisterDeclaration(KernelBuilder &builder);
  bool parseSharedVariable(KernelBuilder *builder);
  bool parseStatement(KernelBuilder &builder, Kernel &kernel);
  bool parseOperand(Operand &operand);
  bool parseAddress(Operand &operand);

  /// A variable's declaration after its state space: [.align N] .type
  /// name[dims]. The size of an unsized array ([]) is 0.
  bool parseVariable(std::string_view &name, uint64_t &bytes,
                     unsigned &alignment, ScalarType &type);
  bool parseUnsigned(uint64_t &value);
  bool parseDirectiveType(ScalarType &type);

  void advance() {
    token = lookahead;
    lookahead = lexer.next();
  }
  bool consume(char punctuation) {
    if (!token.is(punctuation))
      return false;
    advance();
    return true;
  }
  bool expect(char punctuation) {
    if (consume(punctuation))
      return true;
    return fail(std::string("expected '") + punctuation + "', found " +
                describe(token));
  }
  static std::string describe(const Token &token) {
    return token.kind == TokenKind::End ? "the end of the module"
                                        : "'" + std::string(token.text) + "'";
  }
  bool fail(const std::string &message, unsigned line = 0,
            CUresult code = CUDA_ERROR_INVALID_PTX) {
    if (error.code == CUDA_SUCCESS)
      error = {code, "line " + std::to_string(line ? line : token.line) + ": " +
                         message};
    return false;
  }

  PtxLexer lexer;
  Token token, lookahead;
  DeviceMemory &memory;
  std::unique_ptr<Module> module;
  SymbolTable moduleSymbols;
  unsigned moduleSharedBytes = 0;
  bool sawVersion = false, sawTarget = false;
  ParseError error;
};

std::unique_ptr<Module> PtxParser::parse(ParseError &result) {
  while (token.kind != TokenKind::End)
    if (!parseModuleDirective())
      break;
  if (error.code == CUDA_SUCCESS && (!sawVersion || !sawTarget))
    fail("the module lacks a .version or .target directive");
  if (error.code != CUDA_SUCCESS) {
    memory.releaseAll(module.get());
    result = error;
    return nullptr;
  }
  return std::move(module);
}

bool PtxParser::parseModuleDirective() {
  if (token.is(".version"))
    return parseVersion();
  if (token.is(".target"))
    return parseTarget();
  if (token.is(".address_size"))
    return parseAddressSize();
  // Linkage: .visible and .weak change nothing for a module loaded alone.
  if (token.is(".visible") || token.is(".weak"))
    advance();
  if (token.is(".entry"))
    return parseEntry();
  if (token.is(".global"))
    return parseGlobalVariable();
  if (token.is(".shared"))
    return parseSharedVariable(nullptr);
  if (token.kind == TokenKind::Name && token.text[0] == '.')
    return fail("unsupported directive '" + std::string(token.text) + "'");
  return fail("expected a directive, found " + describe(token));
}

bool PtxParser::parseVersion() {
  advance();
  if (token.kind != TokenKind::Number)
    return fail("expected a version number after .version");
  unsigned major = unsigned(std::atoi(std::string(token.text).c_str()));
  if (major > NewestPtxMajorVersion)
    return fail("PTX ISA version " + std::string(token.text) +
                    " is newer than the emulator's (" +
                    std::to_string(NewestPtxMajorVersion) + ".x)",
                0, CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
  sawVersion = true;
  advance();
  return true;
}

bool PtxParser::parseTarget() {
  advance();
  std::string_view name = token.text;
  if (token.kind != TokenKind::Name || name.substr(0, 3) != "sm_")
    return fail("expected a target such as sm_90 after .target");
  unsigned architecture =
      unsigned(std::atoi(std::string(name.substr(3)).c_str()));
  if (architecture > EmulatedArchitecture)
    return fail("target " + std::string(name) +
                " is newer than the emulated device (sm_" +
                std::to_string(EmulatedArchitecture) + ")");
  advance();
  if (token.is(','))
    return fail("target options after " + std::string(name) +
                " are not supported");
  sawTarget = true;
  return true;
}

bool PtxParser::parseAddressSize() {
  advance();
  if (token.kind != TokenKind::Number || token.text != "64")
    return fail(".address_size must be 64");
  advance();
  return true;
}

bool PtxParser::parseUnsigned(uint64_t &value) {
  if (token.kind != TokenKind::Number ||
      !parseIntegerLiteral(token.text, value))
    return fail("expected a number, found " + describe(token));
  advance();
  return true;
}

bool PtxParser::parseDirectiveType(ScalarType &type) {
  std::optional<ScalarType> parsed;
  if (token.kind == TokenKind::Name && token.text[0] == '.')
    parsed = parseScalarType(token.text.substr(1));
  if (!parsed)
    return fail("unsupported type " + describe(token));
  type = *parsed;
  advance();
  return true;
}

bool PtxParser::parseVariable(std::string_view &name, uint64_t &bytes,
                              unsigned &alignment, ScalarType &type) {
  uint64_t explicitAlignment = 0;
  if (token.is(".align")) {
    advance();
    if (!parseUnsigned(explicitAlignment))
      return false;
    if (!explicitAlignment || (explicitAlignment & (explicitAlignment - 1)))
      return fail(".align needs a power of two");
  }
  if (!parseDirectiveType(type))
    return false;
  if (token.kind != TokenKind::Name)
    return fail("expected a variable name, found " + describe(token));
  name = token.text;
  advance();
  bytes = byteWidth(type);
  while (consume('[')) {
    if (token.is(']')) { // unsized: the initializer says
      bytes = 0;
    } else {
      uint64_t count;
      if (!parseUnsigned(count))
        return false;
      if (!fitsDeclaredBytes(bytes, count))
        return fail("an array of more than 2^32 bytes");
      bytes *= count;
    }
    if (!expect(']'))
      return false;
  }
  alignment = unsigned(explicitAlignment ? explicitAlignment : byteWidth(type));
  return true;
}

bool PtxParser::parseGlobalVariable() {
  advance();
  std::string_view name;
  uint64_t bytes;
  unsigned alignment;
  ScalarType type;
  if (!parseVariable(name, bytes, alignment, type))
    return false;
  unsigned elementBytes = byteWidth(type);
  std::vector<uint64_t> initializer;
  if (consume('=')) {
    bool braced = consume('{');
    do {
      bool negative = consume('-');
      uint64_t value;
      unsigned width;
      if (token.kind == TokenKind::Number &&
          parseFloatBits(token.text, value, width) &&
          width == 8 * elementBytes) {
        advance();
      } else if (!parseUnsigned(value)) {
        return false;
      }
      initializer.push_back(negative ? 0 - value : value);
    } while (braced && consume(','));
    if (braced && !expect('}'))
      return false;
  }
  if (!bytes)
    bytes = initializer.size() * elementBytes;
  if (initializer.size() * elementBytes > bytes)
    return fail("the initializer of " + std::string(name) +
                " is larger than the variable");
  if (!expect(';'))
    return false;
  uint64_t address = memory.allocate(bytes ? bytes : 1, module.get());
  if (!address)
    return fail("out of memory for .global " + std::string(name), 0,
                CUDA_ERROR_OUT_OF_MEMORY);
  auto *data = static_cast<uint8_t *>(DeviceMemory::hostAddress(address));
  std::memset(data, 0, bytes); // .global variables start zeroed
  for (size_t i = 0; i < initializer.size(); ++i)
    std::memcpy(data + i * elementBytes, &initializer[i], elementBytes);
  if (!moduleSymbols
           .emplace(std::string(name),
                    SymbolAddress{StateSpace::Global, address, bytes})
           .second)
    return fail("symbol " + std::string(name) + " is declared twice");
  return true;
}

/// A .shared variable of the module (`builder` null) or of a kernel.
bool PtxParser::parseSharedVariable(KernelBuilder *builder) {
  advance();
  std::string_view name;
  uint64_t bytes;
  unsigned alignment;
  ScalarType type;
  if (!parseVariable(name, bytes, alignment, type) || !expect(';'))
    return false;
  if (!bytes)
    return fail("dynamic shared memory (" + std::string(name) +
                "[]) is not supported");
  if (builder) {
    std::string message = builder->declareShared(name, bytes, alignment);
    return message.empty() || fail(message);
  }
  uint64_t offset = (moduleSharedBytes + alignment - 1) / alignment * alignment;
  if (!moduleSymbols
           .emplace(std::string(name),
                    SymbolAddress{StateSpace::Shared, offset, bytes})
           .second)
    return fail("symbol " + std::string(name) + " is declared twice");
  moduleSharedBytes = unsigned(offset + bytes);
  return true;
}

bool PtxParser::parseEntry() {
  advance();
  if (token.kind != TokenKind::Name)
    return fail("expected a kernel name after .entry");
  auto kernel = std::make_unique<Kernel>();
  kernel->name = std::string(token.text);
  unsigned line = token.line;
  advance();
  KernelBuilder builder(*kernel, *module, moduleSymbols, moduleSharedBytes);
  if (consume('(')) {
    if (!token.is(')')) {
      do {
        if (!parseParameter(builder))
          return false;
      } while (consume(','));
    }
    if (!expect(')'))
      return false;
  }
  while (!token.is('{'))
    if (!parsePerformanceDirective(*kernel))
      return false;
  if (!parseBody(builder, *kernel))
    return false;
  if (std::string message = builder.finish(); !message.empty()) {
    error = {CUDA_ERROR_INVALID_PTX, message};
    return false;
  }
  if (kernel->staticSharedBytes > 48 * 1024)
    return fail("kernel " + kernel->name + " uses " +
                    std::to_string(kernel->staticSharedBytes) +
                    " bytes of static shared memory; a block may use 49152",
                line);
  std::string name = kernel->name;
  if (!module->kernels.emplace(name, std::move(kernel)).second)
    return fail("kernel " + name + " is defined twice", line);
  return true;
}

/// .param [.align N] .type [.ptr [.space] [.align N]] name[[N]]
bool PtxParser::parseParameter(KernelBuilder &builder) {
  if (!token.is(".param"))
    return fail("expected .param, found " + describe(token));
  advance();
  uint64_t alignment = 0;
  if (token.is(".align")) {
    advance();
    if (!parseUnsigned(alignment))
      return false;
  }
  ScalarType type;
  if (!parseDirectiveType(type))
    return false;
  if (token.is(".ptr")) { // what the pointer points to: no effect here
    advance();
    if (token.is(".global") || token.is(".shared") || token.is(".const") ||
        token.is(".local"))
      advance();
    if (token.is(".align")) {
      advance();
      uint64_t pointeeAlignment;
      if (!parseUnsigned(pointeeAlignment))
        return false;
    }
  }
  if (token.kind != TokenKind::Name)
    return fail("expected a parameter name, found " + describe(token));
  std::string_view name = token.text;
  advance();
  uint64_t bytes = byteWidth(type);
  if (consume('[')) {
    uint64_t count;
    if (!parseUnsigned(count) || !expect(']'))
      return false;
    if (!fitsDeclaredBytes(bytes, count))
      return fail("a parameter of more than 2^32 bytes");
    bytes *= count;
  }
  std::string message = builder.declareParameter(
      name, unsigned(bytes), unsigned(alignment ? alignment : byteWidth(type)));
  return message.empty() || fail(message);
}

bool PtxParser::parsePerformanceDirective(Kernel &kernel) {
  bool maxThreads = token.is(".maxntid"), required = token.is(".reqntid");
  if (maxThreads || required) {
    advance();
    uint64_t dims[3] = {1, 1, 1};
    for (unsigned i = 0; i < 3; ++i) {
      if (!parseUnsigned(dims[i]))
        return false;
      if (!consume(','))
        break;
    }
    Dim3 threads{unsigned(dims[0]), unsigned(dims[1]), unsigned(dims[2])};
    if (maxThreads) {
      kernel.hasMaxThreads = true;
      kernel.maxThreads = threads;
    } else {
      kernel.hasRequiredThreads = true;
      kernel.requiredThreads = threads;
    }
    return true;
  }
  // Register and occupancy hints do not change what a kernel computes.
  if (token.is(".maxnreg") || token.is(".minnctapersm")) {
    advance();
    uint64_t ignored;
    return parseUnsigned(ignored);
  }
  return fail("unsupported kernel directive " + describe(token));
}

bool PtxParser::parseBody(KernelBuilder &builder, Kernel &kernel) {
  if (!expect('{'))
    return false;
  while (!consume('}')) {
    if (token.kind == TokenKind::End)
      return fail("kernel " + kernel.name + " has no closing '}'");
    if (token.is(".reg")) {
      if (!parseRegisterDeclaration(builder))
        return false;
    } else if (token.is(".shared")) {
      if (!parseSharedVariable(&builder))
        return false;
    } else if (token.is(".pragma")) {
      advance();
      if (token.kind != TokenKind::String || token.text != "nounroll")
        return fail("unsupported pragma " + describe(token));
      advance(); // an unrolling hint: nothing to do
      if (!expect(';'))
        return false;
    } else if (token.is('{')) {
      return fail("nested blocks are not supported");
    } else if (!parseStatement(builder, kernel)) {
      return false;
    }
  }
  return true;
}

/// .reg .type %name<N>, %other, ...;
bool PtxParser::parseRegisterDeclaration(KernelBuilder &builder) {
  advance();
  ScalarType type;
  if (!parseDirectiveType(type))
    return false;
  do {
    if (token.kind != TokenKind::Name || token.text[0] != '%')
      return fail("expected a register name, found " + describe(token));
    std::string_view name = token.text;
    advance();
    std::string message;
    if (consume('<')) {
      uint64_t count;
      if (!parseUnsigned(count) || !expect('>'))
        return false;
      message = builder.declareRegisters(name, unsigned(count), type);
    } else {
      message = builder.declareRegister(name, type);
    }
    if (!message.empty())
      return fail(message);
  } while (consume(','));
  return expect(';');
}

bool PtxParser::parseStatement(KernelBuilder &builder, Kernel &kernel) {
  if (token.kind == TokenKind::Name && lookahead.is(':')) {
    builder.defineLabel(token.text, token.line);
    advance();
    advance();
    return true;
  }
  ParsedInstruction parsed;
  if (consume('@')) {
    parsed.guardNegated = consume('!');
    if (token.kind != TokenKind::Name)
      return fail("expected a predicate after '@'");
    parsed.guard = token.text;
    advance();
  }
  if (token.kind != TokenKind::Name || token.text[0] == '.')
    return fail(token.kind == TokenKind::Name
                    ? "unsupported directive '" + std::string(token.text) + "'"
                    : "expected an instruction, found " + describe(token));
  parsed.mnemonic = token.text;
  parsed.line = token.line;
  advance();
  if (!token.is(';')) {
    do {
      parsed.operands.emplace_back();
      if (!parseOperand(parsed.operands.back()))
        return false;
    } while (consume(','));
  }
  if (!expect(';'))
    return false;
  Instruction instruction;
  std::string message = decodeInstruction(parsed, builder, instruction);
  if (!message.empty())
    return fail(message, parsed.line);
  kernel.code.push_back(instruction);
  return true;
}

bool PtxParser::parseOperand(Operand &operand) {
  if (consume('{')) {
    operand.kind = Operand::Kind::Vector;
    do {
      operand.elements.emplace_back();
      if (!parseOperand(operand.elements.back()))
        return false;
    } while (consume(','));
    return expect('}');
  }
  if (token.is('['))
    return parseAddress(operand);
  bool negative = consume('-');
  if (token.kind == TokenKind::Number) {
    if (parseFloatBits(token.text, operand.value, operand.floatWidth)) {
      if (negative)
        return fail("a float immediate cannot be negated with '-'");
      operand.kind = Operand::Kind::FloatBits;
    } else if (parseIntegerLiteral(token.text, operand.value)) {
      operand.kind = Operand::Kind::Integer;
      if (negative)
        operand.value = 0 - operand.value;
    } else {
      return fail("unsupported immediate '" + std::string(token.text) + "'");
    }
    advance();
    return true;
  }
  if (negative || token.kind != TokenKind::Name)
    return fail("expected an operand, found " + describe(token));
  operand.name = token.text;
  operand.kind = token.text == "_"      ? Operand::Kind::Sink
                 : token.text[0] == '%' ? Operand::Kind::Register
                                        : Operand::Kind::Symbol;
  advance();
  if (consume('|')) {
    if (token.kind != TokenKind::Name)
      return fail("expected a predicate after '|'");
    operand.predicate = token.text;
    advance();
  }
  return true;
}

/// [base], [base+offset], [base+-offset], [base-offset] or [offset]; base
/// is a register or a symbol.
bool PtxParser::parseAddress(Operand &operand) {
  advance();
  operand.kind = Operand::Kind::Address;
  bool hasBase = token.kind == TokenKind::Name;
  if (hasBase) {
    operand.name = token.text;
    operand.baseIsRegister = token.text[0] == '%';
    advance();
  }
  bool hasOffset = !hasBase;
  bool negative = false;
  if (hasBase && (token.is('+') || token.is('-'))) {
    negative = token.is('-');
    advance();
    hasOffset = true;
  }
  if (hasOffset) {
    if (consume('-'))
      negative = !negative;
    uint64_t value;
    if (!parseUnsigned(value))
      return false;
    operand.offset = int64_t(negative ? 0 - value : value);
  }
  return expect(']');
}

} // namespace

std::unique_ptr<Module> parsePtx(std::string_view text, DeviceMemory &memory,
                                 ParseError &error) {
  return PtxParser(text, memory).parse(error);
}

} // namespace fff::emulator

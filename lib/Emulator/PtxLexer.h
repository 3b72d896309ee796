//===- PtxLexer.h - Tokens of PTX text --------------------------*- C++ -*-===//
//
// PTX's lexical structure, simplified where it costs nothing: a name may
// contain dots, so an opcode with its modifiers ("ld.global.v4.b32"), a
// directive (".reg") and a special register ("%tid.x") are each one token;
// a number is kept as written ("0f3F800000", "0x1f", "8.0") for the parser
// to interpret by context.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_PTXLEXER_H
#define FFF_EMULATOR_PTXLEXER_H

#include <string_view>

namespace fff::emulator {

enum class TokenKind {
  Name,        // identifiers, opcodes, directives, registers, labels
  Number,      // starts with a digit
  String,      // "...", without the quotes
  Punctuation, // one character of ;,{}[]()<>+-@!|:=
  End,
  Invalid, // a character PTX does not use
};

struct Token {
  TokenKind kind = TokenKind::End;
  std::string_view text;
  unsigned line = 0;

  bool is(char punctuation) const {
    return kind == TokenKind::Punctuation && text[0] == punctuation;
  }
  bool is(std::string_view name) const {
    return kind == TokenKind::Name && text == name;
  }
};

class PtxLexer {
public:
  explicit PtxLexer(std::string_view text) : text(text) {}

  Token next();

private:
  void skipSpaceAndComments();

  std::string_view text;
  size_t position = 0;
  unsigned line = 1;
};

} // namespace fff::emulator

#endif // FFF_EMULATOR_PTXLEXER_H

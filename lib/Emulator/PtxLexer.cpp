//===- PtxLexer.cpp - Tokens of PTX text ------------------------*- C++ -*-===//

#include "PtxLexer.h"

#include <cctype>
#include <cstring>

namespace fff::emulator {
namespace {

bool isNameStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
         c == '%' || c == '.';
}

bool isNameContinuation(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
         c == '.';
}

} // namespace

void PtxLexer::skipSpaceAndComments() {
  while (position < text.size()) {
    char c = text[position];
    if (c == '\n') {
      ++line;
      ++position;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++position;
    } else if (text.compare(position, 2, "//") == 0) {
      while (position < text.size() && text[position] != '\n')
        ++position;
    } else if (text.compare(position, 2, "/*") == 0) {
      size_t end = text.find("*/", position + 2);
      end = end == std::string_view::npos ? text.size() : end + 2;
      for (; position < end; ++position)
        line += text[position] == '\n';
    } else {
      return;
    }
  }
}

Token PtxLexer::next() {
  skipSpaceAndComments();
  Token token;
  token.line = line;
  if (position >= text.size())
    return token;

  size_t start = position;
  char c = text[position];
  if (isNameStart(c) || std::isdigit(static_cast<unsigned char>(c))) {
    // Numbers take the same characters as names: "0f3F800000", "8.0", "4U".
    token.kind = std::isdigit(static_cast<unsigned char>(c)) ? TokenKind::Number
                                                             : TokenKind::Name;
    ++position;
    while (position < text.size() && isNameContinuation(text[position]))
      ++position;
  } else if (c == '"') {
    size_t end = text.find('"', position + 1);
    if (end == std::string_view::npos) {
      token.kind = TokenKind::Invalid;
      token.text = text.substr(position, 1);
      position = text.size();
      return token;
    }
    token.kind = TokenKind::String;
    token.text = text.substr(position + 1, end - position - 1);
    position = end + 1;
    return token;
  } else {
    token.kind = c != '\0' && std::strchr(";,{}[]()<>+-@!|:=", c)
                     ? TokenKind::Punctuation
                     : TokenKind::Invalid;
    ++position;
  }
  token.text = text.substr(start, position - start);
  return token;
}

} // namespace fff::emulator

//===- Program.cpp - Decoded PTX: kernels as instruction arrays -*- C++ -*-===//

#include "Program.h"

namespace fff::emulator {

unsigned bitWidth(ScalarType type) {
  switch (type) {
  case ScalarType::Pred:
    return 1;
  case ScalarType::B8:
  case ScalarType::U8:
  case ScalarType::S8:
    return 8;
  case ScalarType::B16:
  case ScalarType::U16:
  case ScalarType::S16:
  case ScalarType::F16:
  case ScalarType::BF16:
    return 16;
  case ScalarType::B32:
  case ScalarType::U32:
  case ScalarType::S32:
  case ScalarType::F32:
  case ScalarType::F16x2:
  case ScalarType::BF16x2:
    return 32;
  case ScalarType::B64:
  case ScalarType::U64:
  case ScalarType::S64:
  case ScalarType::F64:
    return 64;
  }
  return 0;
}

bool isSignedInteger(ScalarType type) {
  return type == ScalarType::S8 || type == ScalarType::S16 ||
         type == ScalarType::S32 || type == ScalarType::S64;
}

bool isBitType(ScalarType type) {
  return type == ScalarType::B8 || type == ScalarType::B16 ||
         type == ScalarType::B32 || type == ScalarType::B64;
}

bool isFloat(ScalarType type) {
  return type == ScalarType::F16 || type == ScalarType::BF16 ||
         type == ScalarType::F32 || type == ScalarType::F64 ||
         type == ScalarType::F16x2 || type == ScalarType::BF16x2;
}

const char *spelling(ScalarType type) {
  switch (type) {
  case ScalarType::Pred:
    return "pred";
  case ScalarType::B8:
    return "b8";
  case ScalarType::B16:
    return "b16";
  case ScalarType::B32:
    return "b32";
  case ScalarType::B64:
    return "b64";
  case ScalarType::U8:
    return "u8";
  case ScalarType::U16:
    return "u16";
  case ScalarType::U32:
    return "u32";
  case ScalarType::U64:
    return "u64";
  case ScalarType::S8:
    return "s8";
  case ScalarType::S16:
    return "s16";
  case ScalarType::S32:
    return "s32";
  case ScalarType::S64:
    return "s64";
  case ScalarType::F16:
    return "f16";
  case ScalarType::BF16:
    return "bf16";
  case ScalarType::F32:
    return "f32";
  case ScalarType::F64:
    return "f64";
  case ScalarType::F16x2:
    return "f16x2";
  case ScalarType::BF16x2:
    return "bf16x2";
  }
  return "?";
}

} // namespace fff::emulator

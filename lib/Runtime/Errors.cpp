//===- Errors.cpp - the error state fff's runtimes share --------*- C++ -*-===//

#include "Errors.h"

#include "fff/Runtime/Runtime.h"

#include <mutex>

namespace {

/// Function-local so that it is constructed on first use: compiled modules
/// load (and may fail) from global constructors that run before this
/// library's own static initializers.
struct State {
  std::mutex mutex;
  std::string lastError;
  bool hasError = false;
};

State &state() {
  static State instance;
  return instance;
}

} // namespace

void fff::runtime::recordError(const std::string &message) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.hasError)
    return;
  s.lastError = message;
  s.hasError = true;
}

extern "C" {

const char *fffGetLastError(void) {
  static thread_local std::string reported;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.hasError)
    return nullptr;
  reported = s.lastError;
  s.hasError = false;
  return reported.c_str();
}

void fffReportCheckFailure(const char *message) {
  fff::runtime::recordError(message ? message : "a run-time check failed");
}

} // extern "C"

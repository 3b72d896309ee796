//===- Errors.cpp - Error codes and their messages --------------*- C++ -*-===//

#include "Errors.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>

namespace fff::emulator {
namespace {

struct ErrorInfo {
  CUresult code;
  const char *name;
  const char *description; // as the CUDA driver words it
};

// The codes the emulator can return.
constexpr ErrorInfo knownErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED",
     "initialization error"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE",
     "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE",
     "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT",
     "invalid device context"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX",
     "a PTX JIT compilation failed"},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE",
     "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS",
     "misaligned address"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED",
     "unspecified launch failure"},
};

const ErrorInfo *find(CUresult code) {
  for (const ErrorInfo &info : knownErrors)
    if (info.code == code)
      return &info;
  return nullptr;
}

struct DetailedMessages {
  std::mutex mutex;
  std::map<CUresult, std::string> latest;
};

DetailedMessages &detailedMessages() {
  static DetailedMessages messages;
  return messages;
}

} // namespace

const char *errorName(CUresult code) {
  const ErrorInfo *info = find(code);
  return info ? info->name : nullptr;
}

const char *errorString(CUresult code) {
  const ErrorInfo *info = find(code);
  if (!info)
    return nullptr;
  DetailedMessages &messages = detailedMessages();
  std::lock_guard<std::mutex> lock(messages.mutex);
  auto it = messages.latest.find(code);
  return it != messages.latest.end() ? it->second.c_str() : info->description;
}

CUresult reportError(CUresult code, const std::string &detail) {
  const char *name = errorName(code);
  std::string message = std::string(name ? name : "CUDA error") + ": " + detail;
  std::fprintf(stderr, "fff-emulator: %s\n", message.c_str());
  DetailedMessages &messages = detailedMessages();
  std::lock_guard<std::mutex> lock(messages.mutex);
  messages.latest[code] = std::move(message);
  return code;
}

std::string formatHex(uint64_t address) {
  std::ostringstream text;
  text << "0x" << std::hex << address;
  return text.str();
}

} // namespace fff::emulator

//===- Errors.h - the error state fff's runtimes share ----------*- C++ -*-===//

#ifndef FFF_LIB_RUNTIME_ERRORS_H
#define FFF_LIB_RUNTIME_ERRORS_H

#include <string>

namespace fff::runtime {

/// Records `message` for fffGetLastError, unless an error is already
/// recorded and not yet read: the first error is the one that explains.
void recordError(const std::string &message);

} // namespace fff::runtime

#endif // FFF_LIB_RUNTIME_ERRORS_H

//===- FFFError.h - fff's errors in Python --------------------------------===//

#ifndef FFF_PYTHON_SRC_FFFERROR_H
#define FFF_PYTHON_SRC_FFFERROR_H

#include <stdexcept>

namespace fff::python {

/// fff's errors in Python: fff.FFFError, with fff's one-line message.
struct FFFError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

} // namespace fff::python

#endif // FFF_PYTHON_SRC_FFFERROR_H

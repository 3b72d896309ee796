//===- Npy.h - reading and writing NumPy .npy files -------------*- C++ -*-===//
//
// The subset of the .npy format (version 1.0-3.0) that fff-run exchanges:
// little-endian, C-order arrays of fixed-size numbers.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_TOOLS_FFF_RUN_NPY_H
#define FFF_TOOLS_FFF_RUN_NPY_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fff {

/// An array as stored in a .npy file.
struct NpyArray {
  /// NumPy's type string without the byte-order mark: "f4", "f2", "u2", ...
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<char> data;

  int64_t numElements() const;
};

/// Reads `path`. Fails with a one-line message on anything that is not a
/// little-endian C-order array of fixed-size numbers.
llvm::Expected<NpyArray> readNpy(llvm::StringRef path);

/// Writes `array` to `path` in .npy version 1.0.
llvm::Error writeNpy(llvm::StringRef path, const NpyArray &array);

} // namespace fff

#endif // FFF_TOOLS_FFF_RUN_NPY_H

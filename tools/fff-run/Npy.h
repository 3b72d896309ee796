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
#include "llvm/Support/ErrorHandling.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace fff {

/// Storage that starts on a cache line, as torch's CPU tensors do: a
/// 64-byte vector load from a row of a buffer 16 bytes past one (malloc's
/// alignment) touches two lines, and fff's tree layers ran a fifth slower
/// on such rows.
template <typename T> struct CacheLineAllocator {
  using value_type = T;
  static constexpr size_t kBytes = 64;

  CacheLineAllocator() = default;
  template <typename U> CacheLineAllocator(const CacheLineAllocator<U> &) {}

  T *allocate(size_t count) {
    size_t bytes = (count * sizeof(T) + kBytes - 1) / kBytes * kBytes;
    if (void *memory = std::aligned_alloc(kBytes, bytes ? bytes : kBytes))
      return static_cast<T *>(memory);
    llvm::report_bad_alloc_error("fff-run: out of memory for an array");
  }
  void deallocate(T *memory, size_t) { std::free(memory); }

  template <typename U> bool operator==(const CacheLineAllocator<U> &) const {
    return true;
  }
};

/// An array as stored in a .npy file.
struct NpyArray {
  /// NumPy's type string without the byte-order mark: "f4", "f2", "u2", ...
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<char, CacheLineAllocator<char>> data;

  int64_t numElements() const;
};

/// Reads `path`. Fails with a one-line message on anything that is not a
/// little-endian C-order array of fixed-size numbers.
llvm::Expected<NpyArray> readNpy(llvm::StringRef path);

/// Writes `array` to `path` in .npy version 1.0.
llvm::Error writeNpy(llvm::StringRef path, const NpyArray &array);

} // namespace fff

#endif // FFF_TOOLS_FFF_RUN_NPY_H

//===- HostCall.h - calling a JIT-compiled CPU function from Python -------===//
//
// The common case of a call to a compiled CPU function, in native code:
// every argument a numpy array or CPU torch tensor that compiled code can
// read as it is (the declared element type and shape, C-contiguous, its
// data aligned to its element), every result wrapped without a copy over
// the buffer compiled code allocated. In Python the same took 35 us at
// batch 1, and 140 us after a call that swept the caches (a bf16 RMSNorm
// of 4096x768), which the interpreter then ran cold.
//
// Torch tensors are read, and results made, without torch's Python code
// (TorchTensors.h). Anything else (lists, other dtypes, strided or
// misaligned arrays, tensor subclasses, views with torch's negative bit)
// is left to fff/_compiler.py, which converts what it can and words the
// errors.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_PYTHON_SRC_HOSTCALL_H
#define FFF_PYTHON_SRC_HOSTCALL_H

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fff::python {

/// A tensor type of a compiled function's signature: its element type
/// ("f32", "bf16", ...) and its extents, -1 where dynamic.
struct TensorSpec {
  std::string element;
  std::vector<int64_t> shape;
};

class HostCall {
public:
  /// `entry` is the address of the function's packed C interface entry
  /// point (_mlir_ciface_<name>, void (*)(void **)); `engine` is kept alive
  /// while this is.
  HostCall(nanobind::object engine, uintptr_t entry,
           std::vector<TensorSpec> arguments, std::vector<TensorSpec> results);

  /// Calls the function on `args` and returns its result (a tuple of them
  /// where it has several, () where none), as torch tensors if any
  /// argument is one and as numpy arrays otherwise; or None, having called
  /// nothing, where an argument is not in the common case. Throws FFFError
  /// with the first error compiled code reported.
  nanobind::object operator()(nanobind::args args) const;

private:
  nanobind::object engine;
  void (*entry)(void **);
  std::vector<TensorSpec> arguments, results;
  /// Where each result's descriptor starts in the results' storage, in
  /// 8-byte fields, and the storage's size.
  std::vector<size_t> resultOffsets;
  size_t resultFields = 0;
  /// Whether every element type is one HostCall passes (else the Python
  /// side says what it makes of them).
  bool allKnown = false;
};

} // namespace fff::python

#endif // FFF_PYTHON_SRC_HOSTCALL_H

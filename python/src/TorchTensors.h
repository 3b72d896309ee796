//===- TorchTensors.h - torch CPU tensors without torch's headers ---------===//
//
// HostCall's route for torch tensors. nanobind's ndarray caster takes a
// tensor through torch's `__dlpack__` and gives one back through
// `torch.utils.dlpack.from_dlpack`, both Python code in torch; after a call
// that swept the caches the interpreter ran them cold, which cost a trained
// RMSNorm's backward call about 100 us of its 137 (8 rows). Here a tensor's
// buffer is read from its C-level attributes (dtype, is_cpu, shape, stride,
// data_ptr), and a result is wrapped by handing a DLPack capsule straight to
// torch._C._from_dlpack.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_PYTHON_SRC_TORCHTENSORS_H
#define FFF_PYTHON_SRC_TORCHTENSORS_H

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fff::python {

/// Whether `value` is a torch.Tensor (of any subclass); false while torch
/// is not imported (fff never imports it).
bool isTorchTensor(nanobind::handle value);

/// A dense CPU buffer of a torch tensor, as its attributes describe it.
struct TorchBuffer {
  uintptr_t address = 0;
  std::vector<int64_t> shape, strides; // strides in elements
};

/// The buffer of `value` if it is a plain CPU torch.Tensor or Parameter of
/// fff's `element` type ("f32", "bf16", ...) whose data can be read as it is
/// (no negative or conjugate bit); nullopt for anything else, subclasses
/// included (FakeTensor, FunctionalTensor, ...), which HostCall leaves to its
/// general route.
std::optional<TorchBuffer> readTorchBuffer(nanobind::handle value,
                                           const std::string &element);

/// A CPU torch tensor over `data` (extents `shape`, `strides` in elements)
/// that keeps `owner` alive until torch frees it; any thread may drop the
/// last reference, so `owner` must not need the GIL.
nanobind::object wrapAsTorch(void *data, nanobind::dlpack::dtype type,
                             const std::vector<int64_t> &shape,
                             const std::vector<int64_t> &strides,
                             std::shared_ptr<void> owner);

} // namespace fff::python

#endif // FFF_PYTHON_SRC_TORCHTENSORS_H

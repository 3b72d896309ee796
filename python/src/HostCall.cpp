//===- HostCall.cpp - calling a JIT-compiled CPU function from Python -----===//

#include "HostCall.h"
#include "TorchTensors.h"

#include "FFFError.h"
#include "fff/Runtime/Runtime.h"

#include <nanobind/ndarray.h>

#include <algorithm>
#include <memory>
#include <optional>

namespace nb = nanobind;
using namespace fff::python;

namespace {

using DType = nb::dlpack::dtype;

DType dtype(nb::dlpack::dtype_code code, unsigned bits) {
  return DType{uint8_t(code), uint8_t(bits), 1};
}

/// How an element type travels: in numpy, bf16 is its raw bits (uint16),
/// as the Python side has it; in torch, torch.bfloat16.
struct ElementDTypes {
  DType numpy, torch;
};

std::optional<ElementDTypes> elementDTypes(const std::string &element) {
  using Code = nb::dlpack::dtype_code;
  auto same = [](DType type) { return ElementDTypes{type, type}; };
  if (element == "f32")
    return same(dtype(Code::Float, 32));
  if (element == "f16")
    return same(dtype(Code::Float, 16));
  if (element == "bf16")
    return ElementDTypes{dtype(Code::UInt, 16), dtype(Code::Bfloat, 16)};
  if (element == "f64")
    return same(dtype(Code::Float, 64));
  if (element == "i1")
    return same(dtype(Code::Bool, 8));
  for (unsigned bits : {8u, 16u, 32u, 64u})
    if (element == "i" + std::to_string(bits))
      return same(dtype(Code::Int, bits));
  return std::nullopt;
}

/// The fields of a memref descriptor of `rank`: allocated, aligned, offset,
/// sizes, strides.
size_t descriptorFields(size_t rank) { return 3 + 2 * rank; }

/// The descriptor's fields of a buffer at `address` of `shape` (strides in
/// elements) as compiled code reads an argument of `spec`, if it can read it
/// as it is: row-major and aligned to its element.
std::optional<std::vector<int64_t>>
describeArgument(uintptr_t address, size_t itemsize,
                 const std::vector<int64_t> &shape,
                 const std::vector<int64_t> &strides, const TensorSpec &spec) {
  size_t rank = spec.shape.size();
  if (shape.size() != rank || address % std::max<size_t>(1, itemsize) != 0)
    return std::nullopt;
  std::vector<int64_t> fields(descriptorFields(rank));
  fields[0] = fields[1] = int64_t(address);
  // Neither a unit extent's stride nor an empty array's matters (numpy and
  // torch may give them any).
  bool empty = std::count(shape.begin(), shape.end(), 0) != 0;
  int64_t stride = 1;
  for (size_t dim = rank; dim-- > 0;) {
    int64_t extent = shape[dim];
    if (spec.shape[dim] != -1 && spec.shape[dim] != extent)
      return std::nullopt;
    if (extent != 1 && !empty && strides[dim] != stride)
      return std::nullopt;
    fields[3 + dim] = extent;
    fields[3 + rank + dim] = stride;
    stride *= extent;
  }
  return fields;
}

/// `array` (a numpy array, from nanobind's caster) as compiled code reads an
/// argument of `spec`, if it can.
std::optional<std::vector<int64_t>>
describeArray(const nb::ndarray<nb::ro> &array, const TensorSpec &spec) {
  std::optional<ElementDTypes> types = elementDTypes(spec.element);
  if (!types || array.device_type() != nb::device::cpu::value ||
      array.dtype() != types->numpy)
    return std::nullopt;
  std::vector<int64_t> shape(array.ndim()), strides(array.ndim());
  for (size_t dim = 0; dim < array.ndim(); ++dim) {
    shape[dim] = int64_t(array.shape(dim));
    strides[dim] = array.stride(dim);
  }
  return describeArgument(reinterpret_cast<uintptr_t>(array.data()),
                          array.itemsize(), shape, strides, spec);
}

} // namespace

HostCall::HostCall(nb::object engine, uintptr_t entry,
                   std::vector<TensorSpec> arguments,
                   std::vector<TensorSpec> results)
    : engine(std::move(engine)),
      entry(reinterpret_cast<void (*)(void **)>(entry)),
      arguments(std::move(arguments)), results(std::move(results)) {
  for (const TensorSpec &result : this->results) {
    resultOffsets.push_back(resultFields);
    resultFields += descriptorFields(result.shape.size());
  }
  auto known = [](const TensorSpec &spec) {
    return elementDTypes(spec.element).has_value();
  };
  allKnown =
      std::all_of(this->arguments.begin(), this->arguments.end(), known) &&
      std::all_of(this->results.begin(), this->results.end(), known);
}

nb::object HostCall::operator()(nb::args args) const {
  if (!allKnown || args.size() != arguments.size())
    return nb::none();
  bool torch = false;
  // Held until the call returns: the buffers nanobind's caster exported.
  std::vector<nb::ndarray<nb::ro>> arrays;
  std::vector<std::vector<int64_t>> descriptors;
  for (size_t i = 0; i < args.size(); ++i) {
    if (isTorchTensor(args[i])) {
      // Tensors it does not read as they are (subclasses, views with a
      // negative bit) are the Python side's to convert.
      torch = true;
      std::optional<TorchBuffer> buffer =
          readTorchBuffer(args[i], arguments[i].element);
      std::optional<std::vector<int64_t>> descriptor;
      if (buffer)
        descriptor = describeArgument(
            buffer->address,
            elementDTypes(arguments[i].element)->torch.bits / 8, buffer->shape,
            buffer->strides, arguments[i]);
      if (!descriptor)
        return nb::none();
      descriptors.push_back(std::move(*descriptor));
      continue;
    }
    // No conversion: what needs one is the Python side's to make.
    nb::ndarray<nb::ro> array;
    if (!nb::try_cast(args[i], array, /*convert=*/false)) {
      PyErr_Clear();
      return nb::none();
    }
    std::optional<std::vector<int64_t>> descriptor =
        describeArray(array, arguments[i]);
    if (!descriptor)
      return nb::none();
    arrays.push_back(std::move(array));
    descriptors.push_back(std::move(*descriptor));
  }

  // The packed entry point takes a pointer to each argument of the C
  // interface: the results' storage first, then each argument descriptor.
  std::vector<int64_t> storage(resultFields);
  void *resultPointer = storage.data();
  std::vector<void *> descriptorPointers, packed;
  for (std::vector<int64_t> &descriptor : descriptors)
    descriptorPointers.push_back(descriptor.data());
  if (!results.empty())
    packed.push_back(&resultPointer);
  for (void *&pointer : descriptorPointers)
    packed.push_back(&pointer);
  {
    nb::gil_scoped_release unlocked;
    entry(packed.data());
  }
  if (const char *error = fffGetLastError())
    throw FFFError(error);

  // Each buffer compiled code allocated has one owner, shared by the
  // results that view it, which frees it into the buffer cache. A result
  // that views an argument is copied: that memory is the caller's.
  std::vector<std::pair<int64_t, std::shared_ptr<void>>> owners;
  auto ownerOf = [&](int64_t allocated) -> std::shared_ptr<void> {
    for (const auto &[pointer, owner] : owners)
      if (pointer == allocated)
        return owner;
    std::shared_ptr<void> owner(reinterpret_cast<void *>(allocated),
                                fffHostFree);
    owners.emplace_back(allocated, owner);
    return owner;
  };
  auto viewsAnArgument = [&](int64_t allocated) {
    return std::any_of(descriptors.begin(), descriptors.end(),
                       [&](const std::vector<int64_t> &descriptor) {
                         return descriptor[0] == allocated;
                       });
  };
  nb::list values;
  for (size_t r = 0; r < results.size(); ++r) {
    const int64_t *fields = storage.data() + resultOffsets[r];
    size_t rank = results[r].shape.size();
    ElementDTypes types = *elementDTypes(results[r].element);
    DType type = torch ? types.torch : types.numpy;
    std::vector<size_t> shape(fields + 3, fields + 3 + rank);
    int64_t allocated = fields[0];
    auto *data = reinterpret_cast<char *>(fields[1]) +
                 fields[2] * int64_t(type.bits / 8);
    // An empty result may come without a buffer; its array is a copy of
    // nothing.
    alignas(64) static char nothing[64];
    if (!fields[1]) {
      if (std::count(shape.begin(), shape.end(), size_t(0)) == 0)
        throw FFFError("result #" + std::to_string(r) +
                       " came back without a buffer");
      data = nothing;
    }
    bool copied = data == nothing || !allocated || viewsAnArgument(allocated);
    if (torch && !copied) {
      values.append(wrapAsTorch(
          data, type, std::vector<int64_t>(fields + 3, fields + 3 + rank),
          std::vector<int64_t>(fields + 3 + rank, fields + 3 + 2 * rank),
          ownerOf(allocated)));
      continue;
    }
    nb::object owner;
    if (!copied)
      owner = nb::capsule(new std::shared_ptr<void>(ownerOf(allocated)),
                          [](void *held) noexcept {
                            delete static_cast<std::shared_ptr<void> *>(held);
                          });
    nb::rv_policy policy =
        copied ? nb::rv_policy::copy_v : nb::rv_policy::reference_v;
    auto wrap = [&](auto framework) {
      using Array = nb::ndarray<decltype(framework)>;
      Array array(data, rank, shape.data(), owner, fields + 3 + rank, type);
      return nb::object(array.cast(policy));
    };
    values.append(torch ? wrap(nb::pytorch()) : wrap(nb::numpy()));
  }
  if (values.size() == 1)
    return values[0];
  return nb::tuple(values);
}

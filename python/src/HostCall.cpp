//===- HostCall.cpp - calling a JIT-compiled CPU function from Python -----===//

#include "HostCall.h"

#include "FFFError.h"
#include "fff/Runtime/Runtime.h"

#include <nanobind/ndarray.h>

#include <algorithm>
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

/// torch.Tensor, if torch has been imported (fff never imports it).
PyObject *torchTensorType() {
  static PyObject *tensor = nullptr;
  if (tensor)
    return tensor;
  if (PyObject *torch = PyImport_GetModule(nb::str("torch").ptr())) {
    tensor = PyObject_GetAttrString(torch, "Tensor");
    Py_DECREF(torch);
  }
  // Not imported (or no Tensor): no argument is a tensor.
  PyErr_Clear();
  return tensor;
}

bool isTorchTensor(nb::handle value) {
  PyObject *tensor = torchTensorType();
  return tensor && PyObject_TypeCheck(value.ptr(), (PyTypeObject *)tensor);
}

/// The fields of a memref descriptor of `rank`: allocated, aligned, offset,
/// sizes, strides.
size_t descriptorFields(size_t rank) { return 3 + 2 * rank; }

/// `array` as compiled code reads an argument of `spec`, if it can be read
/// as it is: the descriptor's fields.
std::optional<std::vector<int64_t>>
describeArgument(const nb::ndarray<nb::ro> &array, bool torch,
                 const TensorSpec &spec) {
  std::optional<ElementDTypes> types = elementDTypes(spec.element);
  if (!types || array.device_type() != nb::device::cpu::value ||
      array.dtype() != (torch ? types->torch : types->numpy) ||
      array.ndim() != spec.shape.size())
    return std::nullopt;
  size_t rank = spec.shape.size();
  auto address = reinterpret_cast<uintptr_t>(array.data());
  if (address % std::max<size_t>(1, array.itemsize()) != 0)
    return std::nullopt;
  std::vector<int64_t> fields(descriptorFields(rank));
  fields[0] = fields[1] = int64_t(address);
  // Row-major strides. Neither a unit extent's stride nor an empty array's
  // matters (numpy and torch may give them any).
  bool empty = array.size() == 0;
  int64_t stride = 1;
  for (size_t dim = rank; dim-- > 0;) {
    int64_t extent = int64_t(array.shape(dim));
    if (spec.shape[dim] != -1 && spec.shape[dim] != extent)
      return std::nullopt;
    if (extent != 1 && !empty && array.stride(dim) != stride)
      return std::nullopt;
    fields[3 + dim] = extent;
    fields[3 + rank + dim] = stride;
    stride *= extent;
  }
  return fields;
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
  std::vector<nb::ndarray<nb::ro>> arrays(args.size());
  std::vector<std::vector<int64_t>> descriptors;
  for (size_t i = 0; i < args.size(); ++i) {
    bool isTorch = isTorchTensor(args[i]);
    // No conversion: what needs one is the Python side's to make.
    if (!nb::try_cast(args[i], arrays[i], /*convert=*/false)) {
      PyErr_Clear();
      return nb::none();
    }
    std::optional<std::vector<int64_t>> descriptor =
        describeArgument(arrays[i], isTorch, arguments[i]);
    if (!descriptor)
      return nb::none();
    descriptors.push_back(std::move(*descriptor));
    torch |= isTorch;
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

  // Each buffer compiled code allocated is owned by one capsule, shared by
  // the results that view it, which frees it into the buffer cache. A
  // result that views an argument is copied: that memory is the caller's.
  std::vector<std::pair<int64_t, nb::object>> owners;
  auto ownerOf = [&](int64_t allocated) -> nb::object {
    for (const auto &[pointer, owner] : owners)
      if (pointer == allocated)
        return owner;
    nb::object owner = nb::capsule(reinterpret_cast<void *>(allocated),
                                   [](void *buffer) noexcept {
                                     fffHostFree(buffer);
                                   });
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
    nb::object owner = copied ? nb::object() : ownerOf(allocated);
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

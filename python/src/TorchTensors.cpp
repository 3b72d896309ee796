//===- TorchTensors.cpp - torch CPU tensors without torch's headers -------===//

#include "TorchTensors.h"

#include <utility>

namespace nb = nanobind;
using namespace fff::python;

namespace {

/// torch's objects that this file uses, looked up once torch is imported.
/// Never freed: they would be released after the interpreter has gone.
struct Torch {
  PyObject *tensorType = nullptr, *parameterType = nullptr;
  PyObject *fromDLPack = nullptr;
  /// fff's element type name -> torch's dtype object.
  std::vector<std::pair<std::string, PyObject *>> dtypes;

  PyObject *dtypeOf(const std::string &element) const {
    for (const auto &[name, dtype] : dtypes)
      if (name == element)
        return dtype;
    return nullptr;
  }
};

PyObject *attribute(PyObject *object, const char *name) {
  PyObject *value = PyObject_GetAttrString(object, name);
  if (!value)
    PyErr_Clear();
  return value;
}

const Torch *torch() {
  static Torch *found = nullptr;
  if (found)
    return found;
  PyObject *module = PyImport_GetModule(nb::str("torch").ptr());
  if (!module) {
    // Not imported yet: nothing is a tensor, and a later call looks again.
    PyErr_Clear();
    return nullptr;
  }
  auto *objects = new Torch;
  objects->tensorType = attribute(module, "Tensor");
  if (PyObject *nn = attribute(module, "nn")) {
    objects->parameterType = attribute(nn, "Parameter");
    Py_DECREF(nn);
  }
  if (PyObject *C = attribute(module, "_C")) {
    objects->fromDLPack = attribute(C, "_from_dlpack");
    Py_DECREF(C);
  }
  for (auto [element, name] : {std::pair{"f32", "float32"},
                               {"f16", "float16"},
                               {"bf16", "bfloat16"},
                               {"f64", "float64"},
                               {"i1", "bool"},
                               {"i8", "int8"},
                               {"i16", "int16"},
                               {"i32", "int32"},
                               {"i64", "int64"}})
    if (PyObject *dtype = attribute(module, name))
      objects->dtypes.emplace_back(element, dtype);
  Py_DECREF(module);
  found = objects;
  return found;
}

/// A method's result, or null (error cleared).
nb::object callMethod(nb::handle object, const char *name) {
  PyObject *result = PyObject_CallMethod(object.ptr(), name, nullptr);
  if (!result)
    PyErr_Clear();
  return nb::steal(result);
}

nb::object getAttribute(nb::handle object, const char *name) {
  return nb::steal(attribute(object.ptr(), name));
}

/// The ints of a tuple (torch.Size, or stride()'s tuple).
std::optional<std::vector<int64_t>> ints(const nb::object &tuple) {
  if (!tuple.is_valid() || !PyTuple_Check(tuple.ptr()))
    return std::nullopt;
  std::vector<int64_t> values(PyTuple_GET_SIZE(tuple.ptr()));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple.ptr(), i));
    if (values[i] == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return std::nullopt;
    }
  }
  return values;
}

/// DLPack's DLManagedTensor (the unversioned ABI, which every torch takes),
/// whose context holds the extents and the owner.
struct ManagedTensor {
  nb::dlpack::dltensor tensor;
  void *context;
  void (*deleter)(ManagedTensor *);
};

struct ManagedContext {
  std::vector<int64_t> shape, strides;
  std::shared_ptr<void> owner;
};

void deleteManaged(ManagedTensor *managed) {
  delete static_cast<ManagedContext *>(managed->context);
  delete managed;
}

constexpr const char *kCapsuleName = "dltensor";

/// A capsule that torch did not take still owns its tensor.
void releaseUnusedCapsule(PyObject *capsule) {
  if (PyCapsule_IsValid(capsule, kCapsuleName))
    deleteManaged(static_cast<ManagedTensor *>(
        PyCapsule_GetPointer(capsule, kCapsuleName)));
}

} // namespace

bool fff::python::isTorchTensor(nb::handle value) {
  const Torch *objects = torch();
  return objects && objects->tensorType &&
         PyObject_TypeCheck(value.ptr(), (PyTypeObject *)objects->tensorType);
}

std::optional<TorchBuffer>
fff::python::readTorchBuffer(nb::handle value, const std::string &element) {
  const Torch *objects = torch();
  auto *type = reinterpret_cast<PyObject *>(Py_TYPE(value.ptr()));
  if (!objects || !type ||
      (type != objects->tensorType && type != objects->parameterType))
    return std::nullopt;
  PyObject *dtype = objects->dtypeOf(element);
  nb::object actual = getAttribute(value, "dtype");
  nb::object cpu = getAttribute(value, "is_cpu");
  if (!dtype || actual.ptr() != dtype || cpu.ptr() != Py_True ||
      callMethod(value, "is_neg").ptr() != Py_False ||
      callMethod(value, "is_conj").ptr() != Py_False)
    return std::nullopt;
  std::optional<std::vector<int64_t>> shape =
      ints(getAttribute(value, "shape"));
  std::optional<std::vector<int64_t>> strides =
      ints(callMethod(value, "stride"));
  nb::object pointer = callMethod(value, "data_ptr");
  if (!shape || !strides || shape->size() != strides->size() ||
      !pointer.is_valid())
    return std::nullopt;
  uintptr_t address = PyLong_AsUnsignedLongLong(pointer.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return std::nullopt;
  }
  return TorchBuffer{address, std::move(*shape), std::move(*strides)};
}

nb::object fff::python::wrapAsTorch(void *data, nb::dlpack::dtype type,
                                    const std::vector<int64_t> &shape,
                                    const std::vector<int64_t> &strides,
                                    std::shared_ptr<void> owner) {
  const Torch *objects = torch();
  if (!objects || !objects->fromDLPack)
    throw std::runtime_error("torch._C._from_dlpack is not available");
  auto *context = new ManagedContext{shape, strides, std::move(owner)};
  auto *managed = new ManagedTensor{};
  managed->tensor.data = data;
  managed->tensor.device = {/*kDLCPU=*/1, 0};
  managed->tensor.ndim = int32_t(shape.size());
  managed->tensor.dtype = type;
  managed->tensor.shape = context->shape.data();
  managed->tensor.strides = context->strides.data();
  managed->context = context;
  managed->deleter = deleteManaged;
  nb::object capsule =
      nb::steal(PyCapsule_New(managed, kCapsuleName, releaseUnusedCapsule));
  if (!capsule.is_valid()) {
    deleteManaged(managed);
    throw nb::python_error();
  }
  PyObject *tensor = PyObject_CallOneArg(objects->fromDLPack, capsule.ptr());
  if (!tensor)
    throw nb::python_error();
  return nb::steal(tensor);
}

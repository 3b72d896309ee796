"""Tensors as MLIR memref descriptors, and back: numpy arrays and torch
tensors on the CPU, and CUDA arrays (`__cuda_array_interface__`, which
torch CUDA tensors have) on the GPU."""

import ctypes
import functools
import weakref

import numpy as np

from ._fff import FFFError, free_host_buffer

# An MLIR element type -> the numpy dtype of its storage. bf16 travels as
# its raw bits (uint16) in numpy, and as torch.bfloat16 in torch.
NUMPY_DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "f64": np.float64,
                "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64}
# __cuda_array_interface__ typestr of each element type.
CUDA_TYPESTRS = {"f32": "<f4", "f16": "<f2", "bf16": "<u2", "f64": "<f8", "i1": "|b1",
                 "i8": "|i1", "i16": "<i2", "i32": "<i4", "i64": "<i8"}


@functools.lru_cache(maxsize=None)
def descriptor_type(rank):
    """{allocated, aligned, offset, sizes[rank], strides[rank]}, as MLIR lays
    a memref out for C."""
    class Descriptor(ctypes.Structure):
        _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                    ("offset", ctypes.c_int64), ("sizes", ctypes.c_int64 * rank),
                    ("strides", ctypes.c_int64 * rank)]
    return Descriptor


def contiguous_strides(shape):
    """Row-major strides, in elements."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return strides[::-1]


def describe(pointer, shape, strides):
    """A descriptor of the buffer at `pointer` (strides in elements)."""
    descriptor = descriptor_type(len(shape))()
    descriptor.allocated = descriptor.aligned = pointer
    descriptor.offset = 0
    for i, (size, stride) in enumerate(zip(shape, strides)):
        descriptor.sizes[i], descriptor.strides[i] = size, stride
    return descriptor


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def is_torch(value):
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


def torch_dtype(element):
    torch = _torch()
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64,
            "i1": torch.bool, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32,
            "i64": torch.int64}[element]


def check_shape(where, shape, spec):
    declared = spec["shape"]
    if len(shape) != len(declared) or any(d != -1 and d != s for d, s in zip(declared, shape)):
        text = "[" + ", ".join("?" if d == -1 else str(d) for d in declared) + "]"
        raise FFFError(f"{where} has shape {list(shape)} but the function takes {text}")


def check_dense(where, value):
    """Raises where a torch tensor `value` is not a dense one (sparse,
    MKL-DNN): it has no buffer of its elements to pass."""
    if is_torch(value) and value.layout != _torch().strided:
        raise FFFError(f"{where} is a {value.layout} tensor; fff takes dense (torch.strided) tensors: "
                       f"convert it with .to_dense()")


def host_argument(where, value, spec):
    """(descriptor, keep-alive) for a CPU argument: a contiguous numpy array
    or CPU torch tensor is passed as it is; anything else is converted, and
    a non-contiguous or misaligned one copied, first."""
    element = spec["element"]
    check_dense(where, value)
    if is_torch(value):
        if value.device.type != "cpu":
            raise FFFError(f"{where} is on {value.device}; this executable runs on the CPU")
        if value.dtype != torch_dtype(element):
            raise FFFError(f"{where} has dtype {value.dtype} but the function takes {element}")
        check_shape(where, value.shape, spec)
        # A negative view's buffer holds the values it negates.
        value = value.resolve_neg().contiguous()
        shape = list(value.shape)
        return describe(value.data_ptr(), shape, contiguous_strides(shape)), value
    array = np.asarray(value)
    if array.dtype != NUMPY_DTYPES[element]:
        raw = " (raw bf16 bits)" if element == "bf16" else ""
        raise FFFError(f"{where} has dtype {array.dtype} but the function takes {element}: "
                       f"numpy dtype {np.dtype(NUMPY_DTYPES[element])}{raw}")
    check_shape(where, array.shape, spec)
    array = np.require(array, requirements=["C", "A"])
    return describe(array.ctypes.data, list(array.shape), contiguous_strides(array.shape)), array


class _Allocation:
    """A buffer compiled code allocated (from fff's host buffer cache, or
    with malloc), freed into the cache once no result array uses it."""

    def __init__(self, pointer):
        self.pointer = pointer
        # Held here: a finalizer running as the interpreter exits may find
        # the module's globals already cleared.
        self.free = free_host_buffer

    def __del__(self):
        self.free(self.pointer)


def host_result(descriptor, spec, inputs, owners, as_torch):
    """The result a descriptor describes, as a numpy array (or torch tensor)
    over the compiled code's buffer, which it then owns; none is copied."""
    dtype = np.dtype(NUMPY_DTYPES[spec["element"]])
    rank = len(spec["shape"])
    shape = [descriptor.sizes[i] for i in range(rank)]
    strides = [descriptor.strides[i] * dtype.itemsize for i in range(rank)]
    count = int(np.prod(shape)) if shape else 1
    if count == 0 or not descriptor.aligned:
        array = np.empty(shape, dtype)
    else:
        start = descriptor.aligned + descriptor.offset * dtype.itemsize
        span = 1 + sum((s - 1) * abs(st) for s, st in zip(shape, strides)) // dtype.itemsize if shape else 1
        raw = (ctypes.c_char * (span * dtype.itemsize)).from_address(start)
        base = np.frombuffer(raw, dtype)
        array = np.lib.stride_tricks.as_strided(base, shape, strides)
        allocated = descriptor.allocated
        if allocated in inputs:
            # The function returned (a view of) an argument: the caller's
            # memory, which it already owns.
            array = array.copy()
        else:
            owner = owners.setdefault(allocated, _Allocation(allocated))
            weakref.finalize(array, lambda owner: None, owner)
    if as_torch:
        torch = _torch()
        tensor = torch.from_numpy(np.ascontiguousarray(array) if count == 0 else array)
        return tensor.view(torch.bfloat16) if spec["element"] == "bf16" else tensor
    return array


def cuda_argument(where, value, spec):
    """(descriptor, keep-alive) for a GPU argument: anything with a
    `__cuda_array_interface__`, such as a torch CUDA tensor."""
    check_dense(where, value)
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is None:
        raise FFFError(f"{where} is not a CUDA array (torch CUDA tensor or "
                       "__cuda_array_interface__); this executable runs on the GPU")
    element = spec["element"]
    typestr = CUDA_TYPESTRS.get(element)
    if is_torch(value):
        if value.dtype != torch_dtype(element):
            raise FFFError(f"{where} has dtype {value.dtype} but the function takes {element}")
    elif interface["typestr"] != typestr:
        raise FFFError(f"{where} has typestr {interface['typestr']} but the function takes "
                       f"{element} ({typestr})")
    shape = list(interface["shape"])
    check_shape(where, shape, spec)
    itemsize = int(interface["typestr"][2:])
    contiguous = contiguous_strides(shape)
    strides = interface.get("strides")
    strides = contiguous if strides is None else [s // itemsize for s in strides]
    # Strides of unit dims do not matter (torch may give any).
    if any(st != c and n != 1 for st, c, n in zip(strides, contiguous, shape)) and 0 not in shape:
        raise FFFError(f"{where} is not contiguous; pass a contiguous array (torch: .contiguous())")
    return describe(interface["data"][0], shape, contiguous), value

"""Where the code fff compiles for a torch graph runs, and how a call's
tensors get there: the backend's one seam between the CPU, a CUDA GPU and
fff's PTX emulator standing in for one.

A Placement says which of three it is:
- "cpu": --fff-cpu-pipeline; CPU tensors are passed as they are and fff
  allocates the results.
- "cuda": --fff-gpu-pipeline for the device's chip. The inputs, torch CUDA
  tensors, are passed through `__cuda_array_interface__`; the results are
  allocated by torch's caching allocator on the inputs' device and written by
  fff's kernels, launched on torch's current stream. Nothing synchronizes
  with the host and nothing is copied to it.
- "emulated" (the backend's option `emulate_cuda`): --fff-gpu-pipeline,
  run on the CUDA driver that FFF_CUDA_DRIVER names (fff's PTX emulator).
  The graph's tensors are CPU tensors. Each call copies its inputs into the
  emulator's memory, at the same offset from a 256-byte boundary as the
  tensor's own data, and allocates its results there. After the call it
  copies the results back into new CPU tensors.

What differs between "cuda" and "emulated" is only in `_Emulator` and in
`Placement.call`'s two branches: the allocation of results (torch's
allocator, or the emulator's) and the copies in and out. Everything
before them is shared: the choice of placement, compilation for the chip,
the inputs made contiguous and aligned, the extents of the results, and the
marshalling of arguments (fff.compile's CUDA calls)."""

import ctypes
import dataclasses
import functools
import os

import torch

from .._fff import FFFError
from .._memref import CUDA_TYPESTRS, contiguous_strides, torch_dtype

# fff's GPU kernels read and write 16-byte vectors from the start of each
# buffer.
KERNEL_ALIGNMENT = 16
# The emulator keeps a tensor's offset from this boundary (the alignment
# of its own and of torch's CUDA allocations), so that a misaligned tensor
# stays misaligned there.
_ALLOCATION_ALIGNMENT = 256


class Unplaced(Exception):
    """fff's code cannot run where a graph's tensors are; the message says
    why, in one line."""


@dataclasses.dataclass(frozen=True)
class Placement:
    kind: str  # "cpu", "cuda" or "emulated"
    chip: str | None = None  # sm_XY, for the GPU pipeline

    @property
    def target(self):
        """fff.compile's target."""
        return "cpu" if self.kind == "cpu" else "cuda"

    @property
    def pipeline(self):
        """The fff pipeline that compiles for this placement, as the report
        names it."""
        return "cpu" if self.kind == "cpu" else "gpu"

    @property
    def options(self):
        """fff.compile's pipeline options, as a hashable tuple."""
        return () if self.kind == "cpu" else (("chip", self.chip),)

    def prepare(self, tensor):
        """`tensor` as the GPU's code takes it: contiguous and starting on a
        16-byte boundary. Either is a copy on the tensor's own device where
        it is needed, so that a strided or offset view is never read as if
        it were dense and aligned."""
        tensor = tensor.contiguous()
        if tensor.data_ptr() % KERNEL_ALIGNMENT:
            tensor = tensor.clone()
        return tensor

    def call(self, function, inputs, result_shapes):
        """Runs fff's compiled `function` on `inputs` (torch tensors where
        this placement's graphs have them) and returns its results as a
        list of tensors there; `result_shapes` are their extents, which the
        GPU's callers allocate before the call."""
        if self.kind == "cpu":
            # fff's CPU functions take any tensor: they copy what they do not
            # read as it is (fff/_compiler.py).
            results = function(*inputs)
            return list(results) if isinstance(results, tuple) else [results]
        inputs = [self.prepare(t) for t in inputs]
        dtypes = [torch_dtype(spec["element"]) for spec in function.results]
        if self.kind == "cuda":
            device = inputs[0].device
            outputs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in zip(result_shapes, dtypes)]
            function(*inputs, out=outputs)
            return outputs
        emulator = emulator_device()
        outputs = [emulator.empty(shape, dtype) for shape, dtype in zip(result_shapes, dtypes)]
        function(*[emulator.upload(t) for t in inputs], out=outputs)
        return [emulator.download(buffer) for buffer in outputs]


CPU = Placement("cpu")


def placement_of_device(device, emulate_cuda=False):
    """Where fff's code runs for a call whose tensors are on `device`: the
    emulator's GPU code for CPU tensors with `emulate_cuda`."""
    if emulate_cuda:
        if device.type != "cpu":
            raise FFFError(f"emulate_cuda takes CPU tensors, not {device.type} ones")
        return Placement("emulated", emulator_device().chip)
    if device.type == "cpu":
        return CPU
    if device.type == "cuda":
        index = torch.cuda.current_device() if device.index is None else device.index
        if index != 0:
            raise FFFError(f"fff's CUDA runtime runs on cuda:0 only, and these tensors are on cuda:{index}")
        major, minor = torch.cuda.get_device_capability(index)
        return Placement("cuda", f"sm_{major}{minor}")
    raise FFFError(f"fff runs on CPU and CUDA tensors, not on '{device.type}'")


def placement_of(tensors, emulate_cuda=False):
    """Where fff's code runs for a graph whose example inputs include
    `tensors`; raises Unplaced where it cannot run there."""
    devices = {t.device for t in tensors if isinstance(t, torch.Tensor)}
    kinds = {d.type for d in devices}
    if emulate_cuda:
        if kinds - {"cpu"}:
            raise Unplaced(f"emulate_cuda runs CPU graphs on fff's PTX emulator; this one is on "
                           f"{', '.join(sorted(kinds - {'cpu'}))}")
        return placement_of_device(torch.device("cpu"), emulate_cuda=True)
    if len(kinds) > 1:
        raise Unplaced(f"the graph's tensors are on {' and '.join(sorted(kinds))}, and fff's code for a graph runs "
                       "on one device")
    if kinds <= {"cpu"}:
        return CPU
    if kinds != {"cuda"}:
        raise Unplaced(f"the graph's tensors are on {', '.join(kinds)}, and fff's code runs on CPU and CUDA tensors")
    if len(devices) > 1:
        raise Unplaced(f"the graph's tensors are on {len(devices)} CUDA devices, and fff's code runs on one")
    (device,) = devices
    try:
        # fff's CUDA runtime loads its kernels into device 0's primary
        # context (lib/Runtime/CudaRuntime.cpp).
        return placement_of_device(device)
    except FFFError as reason:
        raise Unplaced(str(reason)) from None


def copied_inputs(values, placement):
    """Why a call at `placement` copies some of its inputs, judged from
    Dynamo's example values: a strided view is copied contiguous, and on
    the GPU one that starts off a 16-byte boundary is copied to one that
    does not (Placement.prepare). Extents or offsets that are symbols say
    nothing; the copies are decided at every call either way."""
    reasons = []
    for i, value in enumerate(values):
        shape, strides, offset = value.shape, value.stride(), value.storage_offset()
        if not all(isinstance(n, int) for n in (*shape, *strides, offset)):
            continue
        if any(s != c and n != 1 for s, c, n in zip(strides, contiguous_strides(shape), shape)):
            reasons.append(f"input {i} is a strided view, copied contiguous before each call")
        elif placement.kind != "cpu" and offset * value.element_size() % KERNEL_ALIGNMENT:
            reasons.append(f"input {i} starts {offset * value.element_size() % KERNEL_ALIGNMENT} bytes past a "
                           f"{KERNEL_ALIGNMENT}-byte boundary, copied to one before each call (fff's kernels read "
                           f"{KERNEL_ALIGNMENT}-byte vectors)")
    return reasons


def result_sources(inputs, results):
    """For each result (a fake tensor like Dynamo's), each extent as an int,
    or as (input, dim) whose extent it is at every call: a GPU call's
    results are allocated before it, from its inputs' extents. Raises
    Unplaced where an extent is no input's."""
    where = {}
    for i, value in enumerate(inputs):
        for dim, extent in enumerate(value.shape):
            if isinstance(extent, torch.SymInt):
                where.setdefault(str(extent.node.expr), (i, dim))
    sources = []
    for r, value in enumerate(results):
        shape = []
        for extent in value.shape:
            if not isinstance(extent, torch.SymInt):
                shape.append(int(extent))
            elif str(extent.node.expr) in where:
                shape.append(where[str(extent.node.expr)])
            else:
                raise Unplaced(f"result {r}'s extent {extent} is no input's extent, and a GPU call's results are "
                               "allocated before it runs")
        sources.append(tuple(shape))
    return sources


def result_shapes(sources, inputs):
    """The results' extents for a call on `inputs` (see result_sources)."""
    return [[s if isinstance(s, int) else inputs[s[0]].shape[s[1]] for s in shape] for shape in sources]


class _EmulatedTensor:
    """A buffer in the emulator's memory, with the CUDA array interface:
    what a torch CUDA tensor is to fff's calls."""

    def __init__(self, emulator, shape, dtype, offset=0):
        self.emulator, self.shape, self.dtype = emulator, tuple(shape), dtype
        self.nbytes = dtype.itemsize * int(torch.Size(shape).numel())
        self.base = emulator.allocate(offset + self.nbytes)
        self.pointer = self.base + offset

    @property
    def __cuda_array_interface__(self):
        typestr = next(t for element, t in CUDA_TYPESTRS.items() if torch_dtype(element) == self.dtype)
        return {"shape": self.shape, "typestr": typestr, "data": (self.pointer, False), "strides": None,
                "version": 3}

    def __del__(self):
        self.emulator.free(self.base)


class _Emulator:
    """The CUDA driver that FFF_CUDA_DRIVER names (fff's PTX emulator), as
    the device: the same library instance that fff's CUDA runtime loads,
    so that both see its memory."""

    def __init__(self, path):
        lib = self.lib = ctypes.CDLL(path)
        lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        lib.cuDeviceGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]
        context = ctypes.c_void_p()
        self._check(lib.cuInit(0), "starting")
        self._check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0), "opening its context")
        self._check(lib.cuCtxSetCurrent(context), "opening its context")
        major, minor = ctypes.c_int(), ctypes.c_int()
        # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR.
        self._check(lib.cuDeviceGetAttribute(ctypes.byref(major), 75, 0), "reading its compute capability")
        self._check(lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, 0), "reading its compute capability")
        self.chip = f"sm_{major.value}{minor.value}"
        self.path = path

    @staticmethod
    def _check(result, what):
        if result:
            raise FFFError(f"the CUDA driver FFF_CUDA_DRIVER names failed {what} (CUresult {result})")

    def allocate(self, nbytes):
        pointer = ctypes.c_uint64()
        self._check(self.lib.cuMemAlloc_v2(ctypes.byref(pointer), max(nbytes, 1)), "allocating memory")
        return pointer.value

    def free(self, base):
        self.lib.cuMemFree_v2(base)

    def empty(self, shape, dtype):
        return _EmulatedTensor(self, shape, dtype)

    def upload(self, tensor):
        """A copy of the contiguous CPU tensor `tensor` in the emulator's
        memory, as far past a 256-byte boundary as `tensor` is."""
        assert tensor.device.type == "cpu" and tensor.is_contiguous(), "upload takes a prepared CPU tensor"
        buffer = _EmulatedTensor(self, tensor.shape, tensor.dtype, tensor.data_ptr() % _ALLOCATION_ALIGNMENT)
        if buffer.nbytes:
            self._check(self.lib.cuMemcpyHtoD_v2(buffer.pointer, tensor.data_ptr(), buffer.nbytes), "copying in")
        return buffer

    def download(self, buffer):
        tensor = torch.empty(buffer.shape, dtype=buffer.dtype)
        if buffer.nbytes:
            self._check(self.lib.cuMemcpyDtoH_v2(tensor.data_ptr(), buffer.pointer, buffer.nbytes), "copying out")
        return tensor


@functools.lru_cache(maxsize=None)
def emulator_device():
    """The emulator that FFF_CUDA_DRIVER names; raises FFFError without one."""
    path = os.environ.get("FFF_CUDA_DRIVER")
    if not path:
        raise FFFError("emulate_cuda runs fff's GPU code on the CUDA driver that FFF_CUDA_DRIVER names: set it to "
                       "fff's PTX emulator (build/lib/libfff_cuda_emulator.so)")
    return _Emulator(path)

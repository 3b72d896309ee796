"""Compiling MLIR with fff's pipelines, and calling what was compiled."""

import ctypes
import json

import numpy as np

from . import _fff, _memref
from ._fff import FFFError

# MLIR's C runner utilities (memrefCopy and friends), which compiled CPU code
# may call: beside the libMLIR.so fff was built against.
_RUNNER_UTILS = "/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so"
_PIPELINES = {"cpu": "fff-cpu-pipeline", "cuda": "fff-gpu-pipeline"}
_CACHE_LINE = 64


def _pipeline(name, options):
    """`name{key=value ...}` from keyword options (underscores become dashes,
    booleans 1/0)."""
    if not options:
        return name
    text = " ".join(f"{key.rstrip('_').replace('_', '-')}="
                    f"{int(value) if isinstance(value, bool) else value}"
                    for key, value in options.items())
    return f"{name}{{{text}}}"


def lower(ir, pipeline):
    """Runs the pass pipeline `pipeline` (a name such as "fff-cpu-pipeline",
    with options as "fff-gpu-pipeline{chip=sm_90}", or a full
    "builtin.module(...)") on the MLIR text `ir` and returns the result as
    MLIR text. Raises FFFError with the first error."""
    return _fff.lower(ir, pipeline)


def compile(ir, target="cpu", **pipeline_options):
    """Compiles the MLIR text `ir` with fff's pipeline for `target` and
    returns an Executable whose public functions are its attributes.

    target="cpu": --fff-cpu-pipeline, JIT-compiled for this host; options
    `threads` (the norms' rows split across N threads; 0, the default, for
    all cores; results are the same for any N), `vector_bits`,
    `integer_bf16`, `reference`, `raise_`, `gpu_twin` and `buffer_cache` (on
    by default: buffers come from fff's host buffer cache, which keeps freed
    ones, results included, for later calls; see set_buffer_cache_limit).
    target="cuda":
    --fff-gpu-pipeline, kernels as PTX for the CUDA driver (FFF_CUDA_DRIVER
    or libcuda.so.1) and host code JIT-compiled; options `chip`, `features`,
    `opt_level`, `tree_variant`, `tree_staging`.
    """
    if target not in _PIPELINES:
        raise FFFError(f"unknown target '{target}': expected 'cpu' or 'cuda'")
    if target == "cpu":
        pipeline_options.setdefault("buffer_cache", True)
    signatures = json.loads(_fff.describe(ir))
    engine = _fff.Engine(ir, _pipeline(_PIPELINES[target], pipeline_options), 3, _RUNNER_UTILS)
    # A GPU module loads its kernels as the engine starts; a missing driver
    # or a kernel the driver rejects is an error now, not at the first call.
    error = _fff.last_error()
    if error:
        raise FFFError(error)
    return Executable(engine, signatures, target)


def aligned(array):
    """`array` (anything numpy takes) as a C-contiguous numpy array whose
    data starts on a 64-byte boundary, copied only if it is not one already.

    Compiled CPU code reads a row of a buffer 16 bytes past a cache line
    (where numpy's large arrays usually start) two lines per vector: a tree
    layer at batch 4096 ran a fifth slower on such rows. torch's CPU tensors
    are aligned already. The results are the same bits either way."""
    array = np.asarray(array)
    if array.flags.c_contiguous and array.ctypes.data % _CACHE_LINE == 0:
        return array
    storage = np.empty(array.nbytes + _CACHE_LINE, np.uint8)
    start = -storage.ctypes.data % _CACHE_LINE
    copy = storage[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def set_buffer_cache_limit(nbytes):
    """Sets how many bytes of freed CPU buffers (results no longer used, and
    compiled code's scratch) fff's host buffer cache keeps for later calls,
    whose pages are then already mapped; 0 keeps none. Releases the oldest
    beyond the limit and returns the previous one. The limit starts at the
    environment's FFF_BUFFER_CACHE_BYTES, or 1 GiB."""
    return _fff.set_buffer_cache_limit(nbytes)


def parallel_runtime():
    """Where compiled CPU code runs its parallel loops' blocks, and on how
    many threads: ("openmp", n) in a process with an OpenMP runtime loaded
    (torch's), on teams of its threads, so that torch.set_num_threads(n)
    applies to fff's code too and fff's threads never wait for cores that
    torch's spinning workers hold; ("fff", cores) otherwise, or with the
    environment's FFF_OPENMP=0, on fff's own threads. Results are the same
    bits either way."""
    return _fff.parallel_runtime()


class Executable:
    """A compiled module: each public function is an attribute."""

    def __init__(self, engine, signatures, target):
        self.target = target
        self._engine = engine
        self.functions = {s["name"]: Function(self, s) for s in signatures}

    def __getattr__(self, name):
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"the module has no public function '{name}'")

    def __dir__(self):
        return list(super().__dir__()) + list(self.functions)


class Function:
    """One compiled function, called with numpy arrays or torch tensors (CPU)
    or CUDA arrays (GPU); returns its result, or a tuple of them."""

    def __init__(self, executable, signature):
        self._executable = executable
        self.name = signature["name"]
        self.arguments = signature["arguments"]
        self.results = signature["results"]
        for kind, specs in (("argument", self.arguments), ("result", self.results)):
            for i, spec in enumerate(specs):
                if spec["element"] is None:
                    raise FFFError(f"@{self.name} {kind} #{i} is not a ranked tensor; "
                                   "fff's Python functions pass tensors")
                if spec["element"] not in _memref.NUMPY_DTYPES:
                    raise FFFError(f"@{self.name} {kind} #{i} has element type {spec['element']}, "
                                   "which fff's Python functions do not pass (they pass "
                                   f"{', '.join(_memref.NUMPY_DTYPES)})")
        # Results come back through one pointer: to the descriptor, or to a
        # struct of them (laid end to end: all fields are 8 bytes).
        fields = [(f"r{i}", _memref.descriptor_type(len(spec["shape"]))) for i, spec in enumerate(self.results)]
        self._results_type = type("Results", (ctypes.Structure,), {"_fields_": fields})
        packed = executable._engine.lookup("_mlir_ciface_" + self.name)
        self._packed = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))(packed)
        # The common CPU call, in native code (python/src/HostCall.h).
        self._host_call = _fff.HostCall(
            executable._engine, packed,
            [(s["element"], s["shape"]) for s in self.arguments],
            [(s["element"], s["shape"]) for s in self.results])

    def __repr__(self):
        def text(spec):
            return "x".join("?" if d == -1 else str(d) for d in spec["shape"]) + "x" + spec["element"]
        return (f"<fff function @{self.name}({', '.join(map(text, self.arguments))}) -> "
                f"({', '.join(map(text, self.results))})>")

    def _call(self, pointers):
        packed = (ctypes.c_void_p * len(pointers))(
            *[ctypes.cast(ctypes.pointer(p), ctypes.c_void_p) for p in pointers])
        self._packed(packed)
        error = _fff.last_error()
        if error:
            raise FFFError(error)

    def __call__(self, *args, out=None):
        if len(args) != len(self.arguments):
            raise FFFError(f"@{self.name} takes {len(self.arguments)} arguments, got {len(args)}")
        if self._executable.target == "cuda":
            return self._call_cuda(args, out)
        if out is not None:
            raise FFFError("out= is for CUDA executables; CPU results are allocated by fff")
        return self._call_cpu(args)

    def _call_cpu(self, args):
        results = self._host_call(*args)
        if results is not None:
            return results
        return self._call_cpu_converting(args)

    def _call_cpu_converting(self, args):
        """A CPU call whose arguments HostCall does not take as they are:
        converted, copied, or refused with an error that says why."""
        described = [_memref.host_argument(f"@{self.name} argument #{i}", value, spec)
                     for i, (value, spec) in enumerate(zip(args, self.arguments))]
        storage = self._results_type() if self.results else None
        pointers = ([ctypes.c_void_p(ctypes.addressof(storage))] if self.results else []) + \
            [ctypes.c_void_p(ctypes.addressof(d)) for d, _ in described]
        self._call(pointers)
        inputs = {d.allocated for d, _ in described}
        as_torch = any(_memref.is_torch(a) for a in args)
        owners = {}
        values = [_memref.host_result(getattr(storage, f"r{i}"), spec, inputs, owners, as_torch)
                  for i, spec in enumerate(self.results)]
        return values[0] if len(values) == 1 else tuple(values)

    def _call_cuda(self, args, out):
        described = [_memref.cuda_argument(f"@{self.name} argument #{i}", value, spec)
                     for i, (value, spec) in enumerate(zip(args, self.arguments))]
        outputs = self._outputs(args, out)
        described += [_memref.cuda_argument(f"@{self.name} result #{i}", value, spec)
                      for i, (value, spec) in enumerate(zip(outputs, self.results))]
        torch = _memref._torch()
        torch_args = [a for a in list(args) + outputs if _memref.is_torch(a)]
        # Launch on torch's current stream, as torch's own kernels do.
        _fff.set_stream(torch.cuda.current_stream(torch_args[0].device).cuda_stream if torch_args else 0)
        try:
            self._call([ctypes.c_void_p(ctypes.addressof(d)) for d, _ in described])
        finally:
            _fff.set_stream(0)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _outputs(self, args, out):
        """The caller's `out` buffers, or torch CUDA tensors allocated like
        the arguments: a dynamic extent is taken from the first argument of
        the same rank (the compiled code checks it)."""
        if out is not None:
            out = list(out) if isinstance(out, (list, tuple)) else [out]
            if len(out) != len(self.results):
                raise FFFError(f"@{self.name} has {len(self.results)} results, out= gives {len(out)}")
            return out
        torch_args = [a for a in args if _memref.is_torch(a)]
        if not torch_args:
            raise FFFError(f"@{self.name}: pass out= buffers for its results, or torch CUDA tensors")
        outputs = []
        for spec in self.results:
            shape = []
            for dim, extent in enumerate(spec["shape"]):
                if extent == -1:
                    like = next((a for a in args if len(a.__cuda_array_interface__["shape"]) == len(spec["shape"])), None)
                    if like is None:
                        raise FFFError(f"@{self.name}: pass out= (a result extent follows no argument)")
                    extent = like.__cuda_array_interface__["shape"][dim]
                shape.append(extent)
            outputs.append(torch_args[0].new_empty(shape, dtype=_memref.torch_dtype(spec["element"])))
        return outputs

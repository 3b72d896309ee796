"""fff from Python: compile MLIR with fff's pipelines and call it.

    import fff
    text = fff.lower(ir, "fff-cpu-pipeline")         # MLIR text -> MLIR text
    exe = fff.compile(ir, target="cpu")              # JIT for this host
    y = exe.layer_norm(x, gamma, beta)               # numpy arrays or torch tensors
    exe = fff.compile(ir, target="cuda", chip="sm_90")
    y = exe.layer_norm(x, gamma, beta)               # torch CUDA tensors

`ir` is MLIR text at fff or linalg-on-tensors level (torch-mlir's output,
say). Errors, from compiling or from the checks compiled code makes when
called, raise FFFError with fff's one-line message. See docs/Embedding.md.
"""

from ._compiler import Executable, Function, aligned, compile, lower, parallel_runtime, set_buffer_cache_limit
from ._fff import FFFError

__all__ = ["Executable", "FFFError", "Function", "aligned", "compile", "lower", "parallel_runtime",
           "set_buffer_cache_limit"]
__version__ = "0.1.0"

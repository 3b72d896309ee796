"""fff from PyTorch.

    import fff.torch
    compiled = torch.compile(model, backend="fff")      # norms to fff, the rest to Inductor
    fff.torch.explain(model, x)                           # what fff took, what it left, and why
    layer = fff.torch.TreeFFN(768, 768, depth=11)         # UltraFastBERT's layer, on fff's kernels
    layer = fff.torch.TreeFFN.from_ultrafastbert(fff_layer)
    layer = fff.torch.LeafTreeFFN.from_fastfeedforward(fff_module)
    theirs = layer.to_ultrafastbert()                     # and back (fff.torch.MaskedTreeFFN)
    fff.torch.use_tree_feedforwards(bert, depth=11)       # a BERT encoder's FFNs become tree layers

Importing it registers the backend "fff" and the custom ops fff::tree_ffn,
fff::leaf_tree_ffn, fff::tree_sublayer, fff::region, and the trained norms
fff::layer_norm_train and fff::rms_norm_train with their backward ops. See
docs/PyTorch.md.
"""

import atexit
import gc

from torch._dynamo import register_backend as _register_backend

from . import _kernels, _regions, _training
from ._backend import backend, check_options, explain
from ._layers import LeafTreeFFN, TreeFFN, leaf_tree_ffn, tree_ffn
from ._report import Region, Report
from ._ultrafastbert import MaskedTreeFFN, convert_tree_layers, use_tree_feedforwards


@_register_backend(name="fff")
def _fff_backend(gm, example_inputs, mode=None, options=None, **_):
    """torch.compile(model, backend="fff", mode=..., options={"fallback":
    "eager"|"inductor", "inductor": {Inductor's config}, "emulate_cuda":
    bool}). torch.compile's other keywords (its `name`) say nothing to the
    backend."""
    return backend(gm, example_inputs, mode=mode, **check_options(options))


@atexit.register
def _release_executables():
    # Compiled executables live in module-level caches; released before the
    # interpreter tears the extension down, not after (nanobind reports
    # objects still alive then as leaks).
    _regions.release_executables()
    _kernels.release_executables()
    _training.release_executables()
    gc.collect()


__all__ = ["LeafTreeFFN", "MaskedTreeFFN", "Region", "Report", "TreeFFN", "backend", "convert_tree_layers", "explain",
           "leaf_tree_ffn", "tree_ffn", "use_tree_feedforwards"]

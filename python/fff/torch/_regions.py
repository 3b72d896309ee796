"""Regions: a connected set of a norm and the pointwise work around it, cut
from Dynamo's graph, compiled by fff, and run as the custom op fff::region.

A region goes to the fff pipeline of its graph's placement (the CPU's, or
the GPU's: _devices.py) as follows:
1. its ops are traced to ATen (make_fx, torch-mlir's decompositions,
   functionalized) on Dynamo's own fake values, so that a dynamic extent
   keeps its symbol. torch.export is not used: it sets a process-wide flag
   that changes how other threads' compiled code runs;
2. torch-mlir's FX importer takes that graph to linalg-on-tensors;
3. fff's raising must find a norm there, and fff compiles it;
4. before the region is used, its compiled function is run once on random
   data shaped like Dynamo's examples, and its results are held to what the
   region's own ops give: count, shape, dtype, layout (contiguous: what the
   fake implementation declares) and values. Any difference refuses the
   region, with the reason, so it never runs to give a wrong answer."""

import collections
import dataclasses
import functools
import operator
import re
import threading

import torch

from .._compiler import compile as _compile, lower as _lower
from ._devices import CPU, Unplaced, result_shapes, result_sources
from ._nodes import example_value

# The backend's tables and torch-mlir's importer are shared by every thread
# that compiles; Dynamo holds a lock of its own while it calls a backend,
# but fff.torch.backend may be called directly.
LOCK = threading.RLock()

# Relative error (over each result) allowed between a compiled region and
# the region's own ops on random data: f32 arithmetic, or one rounding to a
# half-width type where torch rounds after every op.
_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}
_NORM_OPS = ("layer_norm", "rms_norm", "tree_ffn", "leaf_tree_ffn")


@dataclasses.dataclass(frozen=True)
class ExactNorm:
    """A region that is one norm of its inputs and nothing else (a
    hand-written RMSNorm, say), as raising found it: which inputs are x and
    the parameters. A `widened` one computes on x widened to f32, with f32
    parameters, and narrows the result back to x's dtype (Cohere's and
    Helium's norms: `(weight.float() * norm(x.float())).to(x.dtype)`)."""

    kind: str  # layer_norm or rms_norm
    x: int
    weight: int | None
    bias: int | None
    eps: float
    widened: bool = False

    def operands(self, inputs):
        """(x, weight, bias) for the norm's op, from the region call's
        `inputs` (graph nodes; None for an absent parameter). A widened
        norm's f32 parameters that are all widened from x's dtype, which
        rounds nothing, are taken before their widening, for the op in x's
        dtype; else as they are, f32 parameters of a mixed-type op (which
        computes as the widened norm does: in f32, y rounded once)."""
        x = inputs[self.x]
        parameters = [None if i is None else inputs[i] for i in (self.weight, self.bias)]
        if not self.widened:
            return x, *parameters
        dtype = example_value(x).dtype if isinstance(x, torch.fx.Node) else None
        narrow = [p if p is None else _widened_from(p, dtype) for p in parameters]
        if any(n is None for n, p in zip(narrow, parameters) if p is not None):
            return x, *parameters
        return x, *narrow


def _widened_from(node, dtype):
    """The tensor that `node` widens to f32 (x.float(), x.to(torch.float32))
    where that tensor is of `dtype`; None otherwise."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_method":
        return None
    source, rest = (node.args[0], node.args[1:]) if node.args else (None, ())
    widening = (node.target == "float" and not rest and not node.kwargs) or \
        (node.target in ("to", "type") and ((rest == (torch.float32,) and not node.kwargs) or
                                            (not rest and node.kwargs == {"dtype": torch.float32})))
    value = example_value(source) if isinstance(source, torch.fx.Node) else None
    if not widening or not isinstance(value, torch.Tensor) or value.dtype != dtype:
        return None
    return source


@dataclasses.dataclass(frozen=True)
class _Compiled:
    function: object  # the executable's `forward`
    module: torch.fx.GraphModule  # the region's own ops: its fake
    norm: ExactNorm | None
    placement: object  # where `function` runs (_devices.Placement)
    result_sources: list  # its results' extents (_devices.result_sources)

    def __call__(self, inputs):
        return self.placement.call(self.function, inputs, result_shapes(self.result_sources, inputs))


# fff::region's index into this list names the region it runs.
_REGIONS = []


def results_of(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


@torch.library.custom_op("fff::region", mutates_args=())
def region(inputs: list[torch.Tensor], index: int) -> list[torch.Tensor]:
    """Runs region `index`, compiled by fff, on its inputs."""
    return _region(index)(inputs)


@region.register_fake
def _(inputs, index):
    # fff's code returns new contiguous tensors, whatever layout torch's own
    # ops would have given: the fake says so, and torch plans around it.
    return [torch.empty(r.shape, dtype=r.dtype, device=r.device) for r in results_of(_region(index).module(*inputs))]


def _region(index):
    """The compiled region `index` names (a graph's call of fff::region is
    only valid in the process, and while the executables live, that
    compiled it)."""
    if not 0 <= index < len(_REGIONS):
        raise ValueError(f"fff::region {index} names no region compiled in this process "
                         f"({len(_REGIONS)} are): call it only from the graphs the fff backend made")
    return _REGIONS[index]


def register(entry):
    """Adds `entry` (anything with `module`, `norm` and a call on the
    inputs, as _Compiled has) to the regions fff::region runs: its index."""
    with LOCK:
        _REGIONS.append(entry)
        return len(_REGIONS) - 1


def release_executables():
    _compiled.cache_clear()
    _REGIONS.clear()


@functools.lru_cache(maxsize=None)
def _compiled(ir, placement):
    """One executable per distinct region and placement: 24 identical
    layers compile once."""
    return _compile(ir, target=placement.target, **dict(placement.options))


class Refused(Exception):
    """fff does not take a region; the message says why, in one line."""


def _out_of_place(module):
    """A copy of `module` whose in-place adds and multiplies (`h += a`) are
    out of place. The partitioner lets one into a region only where nothing
    else reads the value it writes (_nodes.writes_unseen), so the two
    forms give the same results."""
    module = torch.fx.GraphModule(module, module.graph.__deepcopy__())
    for node in module.graph.nodes:
        if node.op == "call_function" and node.target in (operator.iadd, operator.imul):
            node.target = operator.add if node.target is operator.iadd else operator.mul
    _drop_whole_slices(module.graph)
    # Out of place, every op is pure: what no result needs is dead.
    module.graph.eliminate_dead_code()
    module.recompile()
    return module


def _whole(index):
    """Whether indexing with `index` selects everything: `[:]`, `[0:]`,
    `[..., :]` and the like."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(part is Ellipsis or (isinstance(part, slice) and part.start in (None, 0) and part.stop is None
                                    and part.step in (None, 1)) for part in parts)


def _drop_whole_slices(graph):
    """Replaces each whole slice of a value (`logits[:, 0:, :]`, as
    transformers' causal LMs write logits_to_keep=0) with the value. Out of
    place these are the identity; traced, such a view on symbolic sizes
    becomes a slice_copy whose meta kernel fails (torch logs the failure
    before it falls back). A slice of an input stays: the region's result
    would be its input."""
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is operator.getitem and len(node.args) == 2 \
                and isinstance(node.args[0], torch.fx.Node) and node.args[0].op != "placeholder" \
                and _whole(node.args[1]):
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)


def _norm_names(module):
    """The ops of `module` that a norm is computed with, by name."""
    return {getattr(n.target, "__name__", str(n.target)) for n in module.graph.nodes
            if n.op in ("call_function", "call_method")} & {"layer_norm", "rms_norm", "mean", "var", "var_mean"}


def _aten_graph(module, values):
    """The region as a graph of functional ATen ops, with the decompositions
    torch-mlir's importer expects, traced on Dynamo's fake values."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    if not all(isinstance(v, FakeTensor) for v in values):
        raise Refused("its inputs are not Dynamo's fake tensors")
    # Dynamo's graph keeps the fake tensors it traced with, whose mode it has
    # since left; a mode of fff's own over Dynamo's shapes (its ShapeEnv)
    # keeps every symbol.
    fake_mode = FakeTensorMode(shape_env=values[0].fake_mode.shape_env)

    def run(*args):
        return tuple(results_of(module(*args)))

    # Functionalized, mutations are removed and views stay views, which
    # torch-mlir imports as such. As view_copy ops they failed on symbolic
    # sizes (torch's slice kernel asked a symbolic tensor for its
    # storage_offset()), and a region that sliced a norm went to the
    # fallback after torch had logged the failure's traceback.

    with unset_fake_temporarily(), fake_mode:
        fakes = [torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device) for v in values]
        graph = make_fx(torch.func.functionalize(run, remove="mutations"),
                        decomposition_table=get_decomposition_table())(*fakes)
        if any(_mutates(node) for node in graph.graph.nodes):
            # A decomposition may write in place (aten.rms_norm's adds eps
            # with add_), beneath the functionalization it ran under: a
            # second one, with nothing left to decompose, removes that.
            graph = make_fx(torch.func.functionalize(graph, remove="mutations"))(*fakes)
    for node in graph.graph.nodes:
        if _mutates(node):
            raise Refused(f"it writes into a value in place ({node.target})")
    return graph


def _mutates(node):
    return isinstance(node.target, torch._ops.OpOverload) and node.target._schema.is_mutable


class _LoweringRefused(Exception):
    """torch-mlir did not lower a region; the message is its first error."""


def _linalg(graph):
    """The region's graph in linalg-on-tensors, by torch-mlir. Its
    diagnostics are kept, not printed: a region it cannot lower (an op it
    does not legalize) is a refusal like any other, whose reason the report
    gives, not an "error:" on the user's stderr."""
    from torch_mlir import fx, ir
    from torch_mlir.dialects import torch as torch_dialect
    from torch_mlir.extras.fx_importer import FxImporter

    context = ir.Context()
    torch_dialect.register_dialect(context)
    errors = []

    def keep(diagnostic):
        if diagnostic.severity == ir.DiagnosticSeverity.ERROR:
            errors.append(str(diagnostic.message))
        return True

    context.attach_diagnostic_handler(keep)
    try:
        return str(fx.stateless_fx_import(graph, output_type="linalg-on-tensors", model_name="forward",
                                          fx_importer=FxImporter(context=context)))
    except Exception as error:
        if errors:
            raise _LoweringRefused(f"torch-mlir: {errors[0]}") from error
        raise


def _raised_ops(raised):
    """fff's ops in the raised module `raised`, by name; a layer_norm without
    gamma and beta is `layer_norm (no affine)`."""
    found = collections.Counter()
    for line in raised.splitlines():
        for name in _NORM_OPS:
            if f"fff.{name} " in line:
                affine = name != "layer_norm" or " scale(" in line or " bias(" in line
                found[name if affine else f"{name} (no affine)"] += 1
    return found


_EXACT_NORM = re.compile(r"^\s*(%\w+) = fff\.(layer_norm|rms_norm) (%\w+)"
                         r"(?: scale\(%arg(\d+) : [^)]*\))?(?: bias\(%arg(\d+) : [^)]*\))?"
                         r"(?: \{epsilon = ([-+.\w]+) : f32\})? : [^ ]+$")
# A linalg.generic that only converts its one input's elements (arith.extf
# or arith.truncf), as torch-mlir imports `.to(dtype)`.
_CONVERSION = re.compile(r"^\s*(%\w+) = linalg\.generic \{[^\n]*\} ins\((%\w+) : [^)]*\) outs\([^)]*\) \{\n"
                         r"\s*\^bb0\([^)]*\):\n"
                         r"\s*(%\w+) = arith\.(extf|truncf) %in : (\w+) to (\w+)\n"
                         r"\s*linalg\.yield \3 : \w+\n"
                         r"\s*\} -> ", re.MULTILINE)


def _exact_norm(raised):
    """The region's ExactNorm, if its raised module returns one norm op
    applied to its arguments (and computes nothing else it returns), or the
    norm in f32 of an argument widened to f32, narrowed back to its type."""
    norms = [m for m in map(_EXACT_NORM.match, raised.splitlines()) if m]
    returned = re.findall(r"^\s*return (%\w+) :", raised, re.MULTILINE)
    if len(norms) != 1 or len(returned) != 1 or raised.count("fff.") != 1:
        return None
    result, kind, x, weight, bias, eps = norms[0].groups()
    # value -> (its converted operand, extf or truncf, from type, to type)
    conversions = {m.group(1): (m.group(2), m.group(4), m.group(5), m.group(6)) for m in _CONVERSION.finditer(raised)}
    widen, narrow = conversions.get(x), conversions.get(returned[0])
    widened = raised.count("linalg.generic") == 2 and widen is not None and narrow is not None and \
        widen[1:] == ("extf", narrow[3], "f32") and narrow == (result, "truncf", "f32", widen[2])
    if widened:
        x = widen[0]
    elif returned != [result]:
        return None
    if not re.fullmatch(r"%arg\d+", x):
        return None
    as_index = lambda text: None if text is None else int(text)  # noqa: E731
    return ExactNorm(kind, int(x[4:]), as_index(weight), as_index(bias), float(eps) if eps else 1e-5, widened)


def exact_norm(index):
    """Region `index`'s ExactNorm, or None."""
    return _region(index).norm


def _concrete(values, seed=0):
    """Real random tensors shaped like `values` (a symbol takes its hint),
    on their devices."""
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for value in values:
        shape = []
        for extent in value.shape:
            if isinstance(extent, torch.SymInt):
                if not extent.node.has_hint():
                    raise Refused(f"its input extent {extent} has no example size")
                extent = extent.node.hint
            shape.append(int(extent))
        if value.dtype.is_floating_point:
            tensor = torch.randn(shape, generator=generator, dtype=value.dtype)
        elif value.dtype == torch.bool:
            tensor = torch.randint(0, 2, shape, generator=generator).bool()
        else:
            tensor = torch.randint(-3, 4, shape, generator=generator).to(value.dtype)
        tensors.append(tensor.to(value.device))
    return tensors


# Elements compared at a time (in float64) when a region's results are held
# to its ops': a region compiled for a large static shape is checked at
# that shape, and whole-tensor float64 temporaries would need many times
# the memory the model itself uses.
_CHECK_CHUNK = 1 << 20


def _mismatch(name, actual, expected):
    """Why the compiled region's result `actual` is not its ops' `expected`,
    or None."""
    if not isinstance(actual, torch.Tensor):
        return f"{name} is a {type(actual).__name__}, not a tensor"
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"{name} is {actual.dtype}{list(actual.shape)}, its ops give {expected.dtype}{list(expected.shape)}"
    if not actual.is_contiguous():
        return f"{name} has strides {actual.stride()}, where the region declares contiguous results"
    if not expected.is_floating_point():
        return None if torch.equal(actual, expected) else f"{name} differs from what its ops give"
    actual, expected = actual.reshape(-1), expected.reshape(-1)
    squared_error = squared_norm = 0.0
    for start in range(0, actual.numel(), _CHECK_CHUNK):
        a = actual[start:start + _CHECK_CHUNK].double()
        e = expected[start:start + _CHECK_CHUNK].double()
        infinite = torch.isinf(e)
        if not torch.equal(torch.isnan(a), torch.isnan(e)) or not torch.equal(a[infinite], e[infinite]):
            return f"{name} has NaNs or infinities where its ops do not"
        finite = torch.isfinite(e)
        squared_error += (a[finite] - e[finite]).square().sum().item()
        squared_norm += e[finite].square().sum().item()
    error = squared_error ** 0.5 / max(squared_norm ** 0.5, 1e-30)
    if not error <= _TOLERANCE.get(expected.dtype, 1e-4):
        return f"{name} is off by {error:.2g} (relative) from what its ops give"
    return None


def check_results(compiled, values):
    """Runs the compiled region and its own ops on the same random data;
    raises Refused with the first difference."""
    tensors = _concrete(values)
    expected = results_of(compiled.module(*tensors))
    actual = compiled(tensors)
    del tensors
    if len(actual) != len(expected):
        raise Refused(f"its compiled code gives {len(actual)} results, its ops {len(expected)}")
    for i, (a, e) in enumerate(zip(actual, expected)):
        reason = _mismatch(f"result {i}", a, e)
        if reason:
            raise Refused(reason)


def _result_values(module):
    """Dynamo's example values of the region's results."""
    output = next(n for n in module.graph.nodes if n.op == "output")
    return [example_value(n) for n in results_of(output.args[0])]


def compile_region(module, values, placement=CPU):
    """Compiles the region `module` (Dynamo's ops) for inputs like `values`
    (Dynamo's fake tensors) to run at `placement`: (the index fff::region
    takes, fff's ops found in it). Raises Refused, with the reason, where
    fff does not take it."""
    written = _norm_names(module)
    results = _result_values(module)
    module = _out_of_place(module)
    if written and not _norm_names(module):
        raise Refused("its norm's result is not used: there is nothing for fff to compute")
    try:
        graph = _aten_graph(module, values)
        ir = _linalg(graph)
        raised_ir = _lower(ir, "builtin.module(fff-raise-norms)")
        raised = _raised_ops(raised_ir)
        if not raised:
            raise Refused("fff found no norm in it")
        sources = result_sources(values, results)
        function = _compiled(ir, placement).forward
    except Refused:
        raise
    except Unplaced as reason:
        raise Refused(str(reason)) from None
    except Exception as error:  # tracing, torch-mlir or fff refused it
        text = str(error).strip()
        gpu = f" for the GPU ({placement.chip})" if placement.pipeline == "gpu" else ""
        raise Refused(f"it did not compile{gpu}: {text.splitlines()[0] if text else type(error).__name__}") from error
    compiled = _Compiled(function, module, _exact_norm(raised_ir), placement, sources)
    check_results(compiled, values)
    return register(compiled), raised

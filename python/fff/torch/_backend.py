"""The torch.compile backend "fff": Dynamo's graph is split into regions that
fff takes (norms with the pointwise work around them) and the rest, which the
fallback compiles (Inductor, or eager). Each region goes through torch.export
and torch-mlir's FX importer to linalg, then fff's CPU pipeline, and runs as
the custom op fff::region, so that the fallback sees it as one opaque call."""

import collections
import dataclasses
import functools
import inspect
import logging
import operator

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from .._compiler import compile as _compile, lower as _lower
from .._fff import FFFError

log = logging.getLogger("fff.torch")

# Torch-level ops (Dynamo's graph: functions, and methods by name) that a
# region may hold: what norms are written with in model code, and the
# pointwise work next to them that fff fuses into a norm's unit.
_NORMS = {"layer_norm", "rms_norm"}
_REDUCTIONS = {"mean", "var", "var_mean", "sum"}
_POINTWISE = {"add", "sub", "mul", "truediv", "div", "neg", "pow", "rsqrt", "sqrt", "reciprocal", "exp",
              "tanh", "erf", "sigmoid", "relu", "gelu", "silu", "abs", "square", "to", "float", "half",
              "bfloat16", "type_as", "dropout", "iadd", "imul"}
_TREE_OPS = {"fff.tree_ffn.default": "tree_ffn", "fff.leaf_tree_ffn.default": "leaf_tree_ffn"}
_SUBLAYER_OP = "fff.tree_sublayer.default"
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
# Why fff leaves an op, by name; anything else is "not an op fff compiles".
_MATRIX_PRODUCTS = "matrix products stay with the fallback (fff lowers them to plain loops on the CPU)"
_LEFT_BECAUSE = {
    "linear": _MATRIX_PRODUCTS,
    "matmul": _MATRIX_PRODUCTS,
    "bmm": _MATRIX_PRODUCTS,
    "softmax": "softmax is not a norm: it stays with the fallback",
    "scaled_dot_product_attention": "attention stays with the fallback",
}


def op_name(node):
    """A node's op as the report names it: `layer_norm`, `add`, `linear`."""
    if node.op == "call_method":
        return node.target
    if node.op == "call_module":
        return f"module {node.target}"
    if isinstance(node.target, torch._ops.OpOverload):
        if str(node.target) == _SUBLAYER_OP:
            return "tree_sublayer"
        return _TREE_OPS.get(str(node.target), str(node.target))
    return getattr(node.target, "__name__", str(node.target)).lstrip("_")


def _value(node):
    return node.meta.get("example_value", node.meta.get("val"))


def _is_float_tensor(value):
    return isinstance(value, torch.Tensor) and value.dtype in _FLOATS


class _RegionOps(OperatorSupportBase):
    """Which of Dynamo's nodes a region may hold."""

    def is_node_supported(self, submodules, node):
        if node.op not in ("call_function", "call_method"):
            return False
        name = op_name(node)
        if name == "getitem":
            # The parts of var_mean's pair.
            return isinstance(node.args[0], torch.fx.Node) and op_name(node.args[0]) == "var_mean"
        if name not in _NORMS | _REDUCTIONS | _POINTWISE:
            return False
        if name == "dropout" and (node.kwargs.get("training", node.args[2] if len(node.args) > 2 else True)):
            return False
        value = _value(node)
        values = value if isinstance(value, tuple) else (value,)
        return all(_is_float_tensor(v) for v in values)


def _has_norm(nodes):
    names = {op_name(n) for n in nodes}
    return bool(names & _NORMS) or (bool(names & {"mean", "var", "var_mean"}) and bool(names & {"rsqrt", "sqrt"}))


@dataclasses.dataclass
class Report:
    """What fff took from the graphs it was given, and what it left and why.
    `taken` counts fff's ops by name (`layer_norm`, `rms_norm`, `tree_ffn`,
    ...); `left` counts (op, reason) pairs; `ops` and `ops_taken` count the
    graphs' torch ops in all and in fff's hands."""

    graphs: int = 0
    ops: int = 0
    ops_taken: int = 0
    taken: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    left: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def leave(self, node_or_name, reason):
        name = node_or_name if isinstance(node_or_name, str) else op_name(node_or_name)
        self.left[(name, reason)] += 1
        log.info("fff left %s: %s", name, reason)

    def __str__(self):
        share = f"{self.ops_taken} of {self.ops} ops" if self.ops else "nothing"
        lines = [f"fff took {share} in {self.graphs} graph(s):"]
        lines += [f"  {name} x{count}" for name, count in sorted(self.taken.items())] or ["  nothing"]
        lines.append("and left:")
        lines += [f"  {name} x{count}: {reason}" for (name, reason), count in sorted(self.left.items())] \
            or ["  nothing"]
        return "\n".join(lines)


# Regions by number, for fff::region: the compiled function, and the graph
# that gives its results' shapes when traced.
_REGIONS = []


@torch.library.custom_op("fff::region", mutates_args=())
def region(inputs: list[torch.Tensor], index: int) -> list[torch.Tensor]:
    """Runs region `index`, compiled by fff, on its inputs."""
    function = _REGIONS[index][0]
    results = function(*[t.contiguous() for t in inputs])
    return list(results) if isinstance(results, tuple) else [results]


@region.register_fake
def _(inputs, index):
    results = _REGIONS[index][1](*inputs)
    results = list(results) if isinstance(results, (tuple, list)) else [results]
    # An op's results never alias its inputs (a `.to` of the same dtype would).
    return [r.clone() if any(r is i for i in inputs) else r for r in results]


@functools.lru_cache(maxsize=None)
def _compiled(ir):
    """One executable per distinct region: 24 identical layers compile once."""
    return _compile(ir, target="cpu")


def release_executables():
    _compiled.cache_clear()
    _REGIONS.clear()


def _example(values):
    """Real tensors shaped like `values` (a dynamic extent takes its size
    hint), and torch.export's dynamic shapes for them: one Dim per symbol."""
    dims, tensors, shapes = {}, [], []
    for value in values:
        concrete, spec = [], {}
        for axis, extent in enumerate(value.shape):
            if isinstance(extent, torch.SymInt):
                symbol = str(extent)
                hint = extent.node.hint if extent.node.has_hint() else 2
                if symbol not in dims:
                    dims[symbol] = (torch.export.Dim(f"d{len(dims)}"), max(int(hint), 2))
                spec[axis] = dims[symbol][0]
                concrete.append(dims[symbol][1])
            else:
                concrete.append(int(extent))
        tensors.append(torch.randn(concrete, dtype=torch.float32).to(value.dtype))
        shapes.append(spec or None)
    return tensors, tuple(shapes)


def _region_ir(module, values):
    from torch_mlir import fx

    tensors, dynamic = _example(values)
    # A trace of its own: not Dynamo's, whose guards it must not add to.
    with torch._guards.tracing(None):
        module = fx.export_and_import(module, *tensors, output_type="linalg-on-tensors", func_name="forward",
                                      dynamic_shapes=dynamic if any(dynamic) else None)
    return str(module)


def _raised_ops(ir):
    text = _lower(ir, "builtin.module(fff-raise-norms)")
    return collections.Counter(name for name in ("layer_norm", "rms_norm", "tree_ffn", "leaf_tree_ffn")
                               for _ in range(text.count(f"fff.{name} ")))


def _outputs(module):
    return next(n for n in module.graph.nodes if n.op == "output").args[0]


def _note_results(gm, node):
    """Gives the fused call `node` (or the getitems that take its results)
    the example values of the nodes it replaced, which the region's copies of
    them keep, so that a region fed by another knows its inputs."""
    outputs = _outputs(getattr(gm, node.target))
    if not isinstance(outputs, (tuple, list)):
        node.meta["example_value"] = _value(outputs)
        return
    for user in node.users:
        if user.op == "call_function" and user.target is operator.getitem:
            user.meta["example_value"] = _value(outputs[user.args[1]])


def _take_region(gm, node, report):
    """Compiles the fused region `node` calls; on success, replaces the call
    with fff::region and returns True."""
    module = getattr(gm, node.target)
    inner = [n for n in module.graph.nodes if n.op in ("call_function", "call_method")]
    values = [_value(a) for a in node.args]
    if not all(isinstance(v, torch.Tensor) for v in values):
        for n in inner:
            report.leave(n, "its region takes a value that is not a tensor")
        return False
    try:
        ir = _region_ir(module, values)
        raised = _raised_ops(ir)
        if not raised:
            raise FFFError("fff found no norm in it")
        function = _compiled(ir).forward
    except Exception as error:  # torch.export, torch-mlir or fff refused it
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        for n in inner:
            report.leave(n, f"its region did not compile: {reason}")
        return False
    report.taken.update(raised)
    report.ops_taken += len(inner)
    _REGIONS.append((function, module))
    index = len(_REGIONS) - 1
    outputs = _outputs(module)
    with gm.graph.inserting_after(node):
        call = gm.graph.call_function(torch.ops.fff.region.default, (list(node.args), index))
    if isinstance(outputs, (tuple, list)):
        # The fused call's users take its results with getitem.
        node.replace_all_uses_with(call)
    else:
        with gm.graph.inserting_after(call):
            first = gm.graph.call_function(operator.getitem, (call, 0))
        first.meta["example_value"] = _value(node)
        node.replace_all_uses_with(first)
    gm.graph.erase_node(node)
    return True


def _bound(node, signature):
    """A call node's arguments by parameter name, defaults filled in; None
    where they do not bind to `signature`."""
    try:
        bound = signature.bind(*node.args, **node.kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return bound.arguments


def _schema_signature(op):
    """A custom op's schema (its default overload's, for Dynamo's packet) as
    a Python signature."""
    if isinstance(op, torch._ops.OpOverloadPacket):
        op = op.default
    return inspect.Signature([inspect.Parameter(a.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                default=a.default_value if a.has_default_value()
                                                else inspect.Parameter.empty)
                              for a in op._schema.arguments])


# The norms a tree sublayer may start with, by the function Dynamo's graph
# calls (nn.RMSNorm calls torch.rms_norm), and the signature their
# arguments bind to.
_SUBLAYER_NORMS = {torch.nn.functional.layer_norm: "layer_norm", torch.nn.functional.rms_norm: "rms_norm",
                   torch.rms_norm: "rms_norm"}
_NORM_SIGNATURES = {"layer_norm": inspect.signature(torch.nn.functional.layer_norm),
                    "rms_norm": inspect.signature(torch.nn.functional.rms_norm)}


def _tree_sublayer(tree):
    """The call of fff::tree_sublayer that can stand for `tree` (a tree op
    node), the layer_norm or rms_norm it reads and the add that alone reads
    it (a pre-LN FFN sublayer, `residual + tree(norm(x))`): its arguments,
    and the three nodes; None where they are not such a sublayer."""
    norm, users = tree.args[0], list(tree.users)
    if not isinstance(norm, torch.fx.Node) or norm.target not in _SUBLAYER_NORMS or \
            len(norm.users) != 1 or len(users) != 1:
        return None
    add = users[0]
    if op_name(add) not in ("add", "iadd") or len(add.args) != 2 or add.kwargs:
        return None
    residual = add.args[1] if add.args[0] is tree else add.args[0]
    norm_args = _bound(norm, _NORM_SIGNATURES[_SUBLAYER_NORMS[norm.target]])
    tree_args = _bound(tree, _schema_signature(tree.target))
    # rms_norm's default epsilon is its dtype's machine epsilon, which fff
    # does not guess.
    if norm_args is not None and norm_args["eps"] is None:
        return None
    if norm_args is None or tree_args is None or \
            not all(isinstance(n, torch.fx.Node) for n in (residual, norm_args["input"])):
        return None
    x, result = _value(norm_args["input"]), _value(add)
    if not all(isinstance(v, torch.Tensor) for v in (x, result, _value(residual))) or \
            x.dtype not in _FLOATS or _value(residual).shape != result.shape or \
            _value(residual).dtype != result.dtype or tuple(norm_args["normalized_shape"]) != (x.shape[-1],):
        return None
    # The norm's parameters as fff's norms take them: x's dtype and width.
    norm_bias = norm_args.get("bias")
    for parameter in (norm_args["weight"], norm_bias):
        value = _value(parameter) if isinstance(parameter, torch.fx.Node) else parameter
        if parameter is not None and not (isinstance(value, torch.Tensor) and value.dtype == x.dtype and
                                          tuple(value.shape) == (x.shape[-1],)):
            return None
    names = ["w_in", "b_in", "w_out", "b_out"] if op_name(tree) == "tree_ffn" else \
        ["node_w", "node_b", "w1", "b1", "w2", "b2"]
    arguments = (norm_args["input"], residual, _SUBLAYER_NORMS[norm.target], norm_args["weight"], norm_bias,
                 float(norm_args["eps"]), op_name(tree), [tree_args[name] for name in names], tree_args["depth"],
                 tree_args["activation"])
    return arguments, (norm, tree, add)


def _take_tree_sublayers(gm, report):
    """Puts fff::tree_sublayer, one fff call, in place of each pre-LN FFN
    sublayer whose FFN is a tree op: its norm, layer and residual add then
    run as one fused unit, and torch runs nothing between them."""
    taken = False
    for tree in [n for n in gm.graph.nodes if op_name(n) in _TREE_OPS.values()]:
        found = _tree_sublayer(tree)
        if found is None:
            continue
        taken = True
        arguments, (norm, _, add) = found
        with gm.graph.inserting_before(add):
            call = gm.graph.call_function(torch.ops.fff.tree_sublayer.default, arguments)
        call.meta["example_value"] = _value(add)
        add.replace_all_uses_with(call)
        for node in (add, tree, norm):
            gm.graph.erase_node(node)
        report.taken.update([_SUBLAYER_NORMS[norm.target], op_name(tree)])
        report.ops_taken += 3
    if taken:
        gm.graph.lint()
        gm.recompile()


def _fallback(name, gm, example_inputs):
    if name == "eager":
        return gm.forward
    if name == "inductor":
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)
    raise ValueError(f"unknown fallback '{name}': expected 'inductor' or 'eager'")


def _compute_nodes(gm):
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def backend(gm, example_inputs, fallback="inductor", report=None):
    """What torch.compile(model, backend="fff") calls: takes fff's regions out
    of Dynamo's graph `gm` and hands the rest, with the regions as opaque
    calls, to `fallback` ("inductor", the default, or "eager"). What fff
    took and left is logged (logger "fff.torch") and added to `report`."""
    report = report if report is not None else Report()
    report.graphs += 1
    nodes = _compute_nodes(gm)
    report.ops += len(nodes)
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs):
        for n in nodes:
            report.leave(n, f"the graph needs gradients, which fff's regions do not give: all of it goes to {fallback}")
        return _fallback(fallback, gm, example_inputs)
    devices = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    if devices - {"cpu"}:
        # fff's regions run on the CPU JIT; its CUDA route is the tree ops'.
        for n in nodes:
            report.leave(n, f"the graph runs on {', '.join(sorted(devices - {'cpu'}))}, and fff's backend takes "
                         f"CPU graphs: all of it goes to {fallback}")
        return _fallback(fallback, gm, example_inputs)
    _take_tree_sublayers(gm, report)
    nodes = _compute_nodes(gm)
    for n in nodes:
        if op_name(n) in _TREE_OPS.values():
            report.taken[op_name(n)] += 1
            report.ops_taken += 1
    partitioner = CapabilityBasedPartitioner(gm, _RegionOps(), allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    regions = [p for p in partitions if _has_norm(p.nodes)]
    in_regions = set().union(*[p.nodes for p in regions]) if regions else set()
    for n in nodes:
        if n in in_regions or op_name(n) in (*_TREE_OPS.values(), "tree_sublayer"):
            continue
        if any(n in p.nodes for p in partitions):
            report.leave(n, f"pointwise work with no norm next to it: it stays with {fallback}")
        else:
            report.leave(n, _LEFT_BECAUSE.get(op_name(n), "not an op fff compiles"))
    if regions:
        # Inductor finds each input's origin in Dynamo's note on its
        # placeholder, which fusing does not keep.
        sources = {n.name: n._dynamo_source for n in gm.graph.find_nodes(op="placeholder")
                   if hasattr(n, "_dynamo_source")}
        gm = partitioner.fuse_partitions(regions)
        fused = [n for n in gm.graph.nodes if n.op == "call_module" and n.target.startswith("fused_")]
        for node in fused:
            _note_results(gm, node)
        for node in fused:
            _take_region(gm, node, report)
        for n in gm.graph.find_nodes(op="placeholder"):
            if n.name in sources:
                n._dynamo_source = sources[n.name]
        gm.graph.lint()
        gm.recompile()
    return _fallback(fallback, gm, example_inputs)


def explain(model, *inputs, fallback="eager", print_report=True):
    """Compiles `model` with the fff backend on `inputs` and returns (and
    prints) a Report of what fff took, what it left and why. It resets
    Dynamo's caches, so that every graph is compiled again."""
    report = Report()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=functools.partial(backend, fallback=fallback, report=report))
    with torch.no_grad():
        compiled(*inputs)
    torch._dynamo.reset()
    if print_report:
        print(report)
    return report

"""The torch.compile backend "fff": Dynamo's graph is split into regions that
fff takes (norms with the pointwise work around them, pre-LN tree
sublayers) and the rest, which the fallback compiles (Inductor, or eager).
Each region runs as one fff call (fff::region, fff::tree_sublayer), so that
the fallback sees it as one opaque op."""

import collections
import copy
import functools
import operator

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupportBase

from . import _kernels
from ._backward_fusion import with_backward_fusion
from ._devices import Unplaced, copied_inputs, placement_of
from ._dynamic_floats import restart_with_constant_floats
from ._nodes import ARITHMETIC, FLOATS, NORMS as _NORMS, REDUCTIONS as _REDUCTIONS, TREE_OPS, example_value, \
    is_fff_call, op_name, sort_in_place, writes_unseen
from ._masked_trees import raise_masked_tree_layers
from ._ops import forward_mode_refusal
from ._placed_ops import place_fff_ops
from ._regions import LOCK, Refused, compile_region, exact_norm
from ._report import Report
from ._subgraphs import called_subgraphs, inline_subgraphs
from ._sublayers import constant_normalized_shapes, take_region_sublayers, take_tree_sublayers
from ._trained_norms import is_trained_norm, replace_with_trained_norm, take_trained_norms

# A region may hold the ops norms are written with in model code (_NORMS,
# _REDUCTIONS, arithmetic) and the pointwise work next to them that fff
# fuses into a norm's unit (_POINTWISE). Of those, the ones whose result
# may be their input itself (a cast to the dtype it has, eval dropout):
_MAY_ALIAS = {"to", "float", "half", "bfloat16", "type_as", "dropout"}
_IN_PLACE = {"iadd", "imul"}
_POINTWISE = ARITHMETIC | _MAY_ALIAS | _IN_PLACE
# Why fff leaves an op, by name; anything else is "not an op fff compiles".
_MATRIX_PRODUCTS = "matrix products stay with the fallback (fff lowers them to plain loops on the CPU)"
_LEFT_BECAUSE = {
    "linear": _MATRIX_PRODUCTS,
    "matmul": _MATRIX_PRODUCTS,
    "bmm": _MATRIX_PRODUCTS,
    "softmax": "softmax is not a norm: it stays with the fallback",
    "scaled_dot_product_attention": "attention stays with the fallback",
    "tag_activation_checkpoint": "a checkpointed block's call: its norms are fff's, the call the fallback's",
    "invoke_subgraph": "a nested compile region's call: its norms are fff's, the call the fallback's",
}
_OPTIONS = ("fallback", "inductor", "emulate_cuda")


def _is_float_tensor(value):
    return isinstance(value, torch.Tensor) and value.dtype in FLOATS


def _written_in_place(gm):
    """The values that some op of `gm` writes into: the first operand of
    `h += a`, `h.add_(a)`, `h.copy_(a)`..."""
    written = set()
    for node in gm.graph.nodes:
        name = op_name(node) if node.op in ("call_function", "call_method") else ""
        in_place = name in _IN_PLACE or (node.op == "call_method" and name.endswith("_") and
                                         not name.startswith("_"))
        if in_place and node.args and isinstance(node.args[0], torch.fx.Node):
            written.add(node.args[0])
    return written


class _RegionOps(OperatorSupportBase):
    """Which of Dynamo's nodes a region may hold. A region computes new
    values and writes into none: fff's code returns new tensors."""

    def __init__(self, gm, excluded=(), training=False):
        super().__init__()
        self.written = _written_in_place(gm)
        self.excluded = set(excluded)
        self.training = training

    def is_node_supported(self, submodules, node):
        if node.op not in ("call_function", "call_method") or node in self.excluded:
            return False
        name = op_name(node)
        if name == "getitem":
            # The parts of var_mean's pair.
            return isinstance(node.args[0], torch.fx.Node) and op_name(node.args[0]) == "var_mean"
        if name not in _NORMS | _REDUCTIONS | _POINTWISE or _sliced_by_other_values(node):
            return False
        if name == "dropout" and (node.kwargs.get("training", node.args[2] if len(node.args) > 2 else True)):
            return False
        if name in _IN_PLACE and not writes_unseen(node):
            return False
        if self.training and name in ("add", "iadd") and _adds_alike(node):
            # A norm's formula adds eps or a bias, never two tensors of one
            # shape: that is a residual add, whose gradient the fallback
            # gives in a training graph (fff's trained norms are the norm).
            return False
        if name in _MAY_ALIAS and (node in self.written or node.args[0] in self.written):
            # Where torch's result is its input, a write into one is seen in
            # the other; fff's result would be apart.
            return False
        value = example_value(node)
        values = value if isinstance(value, tuple) else (value,)
        return all(_is_float_tensor(v) for v in values)


def _sliced_by_other_values(node):
    """Whether `node`'s users are all getitems and one of them also reads
    another value (`h[..., :n]` with a symbolic n). torch's partitioner
    moves a value's getitems into its partition where they are its only
    users; such a getitem would be moved between the two values'
    partitions, back and forth, forever (torch 2.15: propose_partitions
    never returned on LFM2's dynamic-shape graph). Left out of regions,
    the value gives the getitem no partition to move to."""
    users = list(node.users)
    return bool(users) and all(user.op == "call_function" and user.target is operator.getitem for user in users) \
        and any(len(user.all_input_nodes) > 1 for user in users)


def _adds_alike(node):
    """Whether `node` adds two tensors of one shape."""
    values = [example_value(a) for a in node.args[:2] if isinstance(a, torch.fx.Node)]
    return len(values) == 2 and all(isinstance(v, torch.Tensor) for v in values) and \
        values[0].shape == values[1].shape


def _has_norm(nodes):
    names = {op_name(n) for n in nodes}
    return bool(names & _NORMS) or (bool(names & {"mean", "var", "var_mean"}) and any(map(_is_root, nodes)))


def _is_root(node):
    """rsqrt or sqrt, or pow by -0.5 or 0.5 (Gemma 3n's pow(mean(x^2) +
    eps, -0.5))."""
    name = op_name(node)
    if name != "pow":
        return name in ("rsqrt", "sqrt")
    exponent = node.args[1] if len(node.args) > 1 else node.kwargs.get("exponent")
    return isinstance(exponent, float) and exponent in (-0.5, 0.5)


def _connected_parts(partition):
    """The partitioner groups ops that no path joins, where that makes no
    cycle: a region holds only what its values connect."""
    nodes = set(partition.nodes)
    parent = {n: n for n in nodes}

    def root(n):
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for n in nodes:
        for user in n.users:
            if user in nodes:
                parent[root(user)] = root(n)
    parts = {}
    for n in nodes:
        parts.setdefault(root(n), []).append(n)
    return [Partition(nodes=part) for part in parts.values()]


def _norm_core(partition):
    """The part of a region proposed in a training graph that may be one
    norm: without the work before it whose values other ops read too (the
    residual add before LLaMA's hand-written RMSNorm), so that the norm
    alone is left. A value that leaves the region and feeds another that
    leaves it is such work: it goes, and all it is computed from. So does
    work on lower-rank values (parameters) that reads nothing else of the
    region."""
    nodes = set(partition.nodes)
    leaving = {n for n in nodes if any(user not in nodes for user in n.users)}

    def reach(start, step):
        seen, stack = set(), [start]
        while stack:
            for other in step(stack.pop()):
                if other in nodes and other not in seen:
                    seen.add(other)
                    stack.append(other)
        return seen

    peeled = set()
    for value in leaving:
        if reach(value, lambda n: n.users) & leaving:
            peeled |= {value} | reach(value, lambda n: n.all_input_nodes)
    # Work on the parameters alone (Gemma's `1 + weight`): torch computes
    # it, and its gradient, and the norm takes the result as its weight.
    rank = max((_rank(n) for n in nodes), default=0)
    grown = True
    while grown:
        grown = False
        for node in nodes - peeled:
            inside = [n for n in node.all_input_nodes if n in nodes]
            if 0 < _rank(node) < rank and all(n in peeled for n in inside):
                peeled.add(node)
                grown = True
    return Partition(nodes=[n for n in partition.nodes if n not in peeled])


def _rank(node):
    value = example_value(node)
    return value.dim() if isinstance(value, torch.Tensor) else 0


def _take_trained_region(gm, node, index, inner, report, placement):
    """In a training graph, the region `node` calls, compiled as region
    `index`, becomes the trained op of its norm where raising found it to
    be exactly one norm of its inputs."""
    norm = exact_norm(index)
    if norm is None:
        for n in inner:
            report.leave(n, "in a training graph fff takes a norm written out in ops only where the region is "
                         "exactly the norm: this one computes more")
        return False
    x, weight, bias = norm.operands(list(node.args))
    outputs = _outputs(getattr(gm, node.target))
    results = [u for u in node.users] if isinstance(outputs, (tuple, list)) else [node]
    return replace_with_trained_norm(gm, node, results, norm.kind, x, weight, bias, 1, norm.eps, inner, report,
                                     placement, mixed=norm.widened)


def _outputs(module):
    return next(n for n in module.graph.nodes if n.op == "output").args[0]


def _note_results(gm, node):
    """Gives the fused call `node` (or the getitems that take its results)
    the example values of the nodes it replaced, which the region's copies of
    them keep, so that a region fed by another knows its inputs."""
    outputs = _outputs(getattr(gm, node.target))
    if not isinstance(outputs, (tuple, list)):
        node.meta["example_value"] = example_value(outputs)
        return
    for user in node.users:
        if user.op == "call_function" and user.target is operator.getitem:
            user.meta["example_value"] = example_value(outputs[user.args[1]])


def _take_region(gm, node, report, placement, training=False):
    """Compiles the fused region `node` calls to run at `placement`; on
    success, replaces the call with fff::region (in a training graph, where
    the region is exactly one norm, with the norm's trained op) and returns
    True."""
    module = getattr(gm, node.target)
    inner = [n for n in module.graph.nodes if n.op in ("call_function", "call_method")]
    values = [example_value(a) for a in node.args]
    try:
        if any(isinstance(v, torch.SymFloat) for v in values):
            raise Refused("it reads a float that Dynamo keeps dynamic (an argument, under dynamic=True), and fff's "
                          "code takes floats as constants")
        if not all(isinstance(v, torch.Tensor) for v in values):
            raise Refused("it takes a value that is not a tensor")
        index, raised = compile_region(module, values, placement)
    except Refused as refusal:
        for n in inner:
            report.leave(n, f"its region was refused: {refusal}")
        return False
    if training:
        return _take_trained_region(gm, node, index, inner, report, placement)
    report.take("fff::region", raised, inner, index=index, pipeline=placement.pipeline,
                copies=copied_inputs(values, placement))
    outputs = _outputs(module)
    with gm.graph.inserting_after(node):
        call = gm.graph.call_function(torch.ops.fff.region.default, (list(node.args), index))
    if isinstance(outputs, (tuple, list)):
        # The fused call's users take its results with getitem.
        node.replace_all_uses_with(call)
    else:
        with gm.graph.inserting_after(call):
            first = gm.graph.call_function(operator.getitem, (call, 0))
        first.meta["example_value"] = example_value(node)
        node.replace_all_uses_with(first)
    gm.graph.erase_node(node)
    return True


def _inductor_patches(mode, inductor):
    """Inductor's config for `mode` (torch.compile's, as Inductor reads it),
    then the user's own `inductor` options over it."""
    patches = {}
    if mode not in (None, "default"):
        from torch._inductor import list_mode_options
        modes = ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
        if mode not in modes:
            raise ValueError(f"unknown mode '{mode}': expected 'default' or one of {', '.join(modes)}")
        patches.update(list_mode_options(mode))
    patches.update(inductor or {})
    return patches


def _fallback(name, gm, example_inputs, patches):
    if name == "eager":
        return gm.forward
    if name == "inductor":
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs, config_patches=patches or None)
    raise ValueError(f"unknown fallback '{name}': expected 'inductor' or 'eager'")


def _compute_nodes(gm):
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def check_options(options):
    """torch.compile's `options` for this backend, checked: a dict with the
    keys `fallback`, `inductor` (a dict of Inductor's config) and
    `emulate_cuda` (a bool)."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(map(repr, unknown))} for backend 'fff': "
                         f"it takes {', '.join(map(repr, _OPTIONS))}")
    if not isinstance(options.get("inductor", {}), dict):
        raise ValueError("option 'inductor' must be a dict of Inductor's config, as torch.compile's options are")
    if not isinstance(options.get("emulate_cuda", False), bool):
        raise ValueError("option 'emulate_cuda' must be True or False")
    return options


def backend(gm, example_inputs, fallback="inductor", report=None, mode=None, inductor=None, emulate_cuda=False):
    """What torch.compile(model, backend="fff") calls: takes fff's regions out
    of Dynamo's graph `gm` and hands the rest, with the regions as opaque
    calls, to `fallback` ("inductor", the default, or "eager"), compiled in
    torch.compile's `mode` with Inductor's config `inductor` on top. What
    fff took and left is logged (logger "fff.torch") and added to
    `report`. Regions of a CPU graph run on fff's CPU pipeline, those of a
    CUDA graph on its GPU pipeline; with `emulate_cuda`, a CPU graph's
    regions run on the GPU pipeline's code on fff's PTX emulator (the
    driver FFF_CUDA_DRIVER names), as a CUDA graph's would on a GPU
    (_devices.py)."""
    patches = _inductor_patches(mode, inductor)
    if fallback not in ("inductor", "eager"):
        raise ValueError(f"unknown fallback '{fallback}': expected 'inductor' or 'eager'")
    report = report if report is not None else Report()
    before = copy.deepcopy(report)
    try:
        with LOCK:
            _take_regions(gm, example_inputs, fallback, report, emulate_cuda)
        if report.training and fallback == "inductor":
            # The backward graph's residual adds join fff's norm backward calls.
            patches = with_backward_fusion(patches)
        return _fallback(fallback, gm, example_inputs, patches)
    except torch._dynamo.exc.RestartAnalysis:
        # Dynamo traces the frame again (fff or Inductor asked it to make a
        # float constant) and discards this graph: so does the report.
        vars(report).update(vars(before))
        raise


def _inside_transforms(gm):
    """The nodes of `gm` inside a torch.func transform that Dynamo traced
    into the graph (between a level's _grad/_vmap/_jvp/_func
    _increment_nesting and its _decrement_nesting), each with the kinds of
    the levels around it ("grad", "vmap", "jvp", "func"), outermost first.
    Their tensors are the transforms' wrappers, which fff's ops do not
    take."""
    inside, levels = {}, []
    for node in gm.graph.nodes:
        module = getattr(node.target, "__module__", None) or ""
        name = getattr(node.target, "__name__", "")
        functorch = node.op == "call_function" and module.startswith(("torch._functorch", "torch._C._functorch"))
        if functorch and name.endswith("_decrement_nesting") and levels:
            levels.pop()
        elif levels:
            inside[node] = tuple(levels)
        if functorch and name.endswith("_increment_nesting"):
            levels.append(name.removesuffix("_increment_nesting").lstrip("_"))
    return inside


# Ops whose presence inside a transform's levels leaves the whole graph to
# the fallback: every pass of the backend's starts from one of them.
_STARTS_OF_FFF_WORK = _NORMS | _REDUCTIONS | set(TREE_OPS.values()) | {"linear", "matmul", "tree_sublayer"}


def _leave_graph(nodes, report, reason, fallback):
    for n in nodes:
        report.leave(n, f"{reason}: all of it goes to {fallback}")


def _take_regions(gm, example_inputs, fallback, report, emulate_cuda=False):
    report.graphs += 1
    report.fallback, report.grad = fallback, torch.is_grad_enabled()
    training = torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                               for t in example_inputs)
    if not training:
        # Nothing is recomputed or differentiated where nothing needs a
        # gradient: checkpointed blocks' and nested regions' nodes join
        # the graph's.
        inline_subgraphs(gm)
    nodes = _compute_nodes(gm)
    report.ops += len(nodes)
    try:
        placement = placement_of(example_inputs, emulate_cuda)
    except Unplaced as reason:
        return _leave_graph(nodes, report, reason, fallback)
    inside = _inside_transforms(gm)
    if any(op_name(n) in TREE_OPS.values() and "jvp" in levels for n, levels in inside.items()):
        # torch.func.jvp runs a custom op as if it had no derivative: the
        # model's tree layers would give zero tangents, with no error.
        raise forward_mode_refusal("a model's fff tree layer")
    if any(op_name(n) in _STARTS_OF_FFF_WORK for n in inside):
        # torch.func transforms compiled whole (torch.compile(jacrev(model)))
        # wrap the model's tensors in their own levels, which fff's custom
        # ops, and their autograd, do not take part in. A transform of
        # other work (transformers' masks, built under vmap) leaves the
        # graph's norms to fff, its own nodes out of every region.
        return _leave_graph(nodes, report, "torch.func transforms (grad, vmap, jacrev, ...) run this graph's norms, "
                            "and fff's ops do not implement them", fallback)
    # Checkpointed blocks and nested regions of a training graph (in an
    # inference graph, those that could not be inlined) are subgraphs,
    # whose norms and tree layers are taken where they are.
    subgraphs = called_subgraphs(gm)
    report.ops += sum(len(_compute_nodes(body)) for body in subgraphs)
    for graph in [gm, *subgraphs]:
        constant_normalized_shapes(graph)
        raise_masked_tree_layers(graph)
    if training:
        # A training graph: its norms, forward and backward, run on fff's
        # kernels; everything else, and its gradient, is the fallback's.
        report.training = True
        for graph in [gm, *subgraphs]:
            refused = take_trained_norms(graph, report, placement)
            _take_norm_regions(graph, _compute_nodes(graph), fallback, report, placement, training=True,
                               reported=refused, transformed=inside)
    else:
        take_tree_sublayers(gm, report, placement.pipeline)
        _take_norm_regions(gm, _compute_nodes(gm), fallback, report, placement, transformed=inside)
        take_region_sublayers(gm, report, placement.pipeline)
        if placement.kind != "cpu":
            return place_fff_ops(gm, placement, report)
    for graph in [gm, *subgraphs]:
        _take_tree_ops(graph, report, placement)


def _take_tree_ops(gm, report, placement):
    """Reports the tree ops of `gm` (fff's own ops, which stay in the graph
    that the fallback runs; their registered backward is an fff call of
    the backward graph: fff's kernel where it takes the tensors, else
    torch ops) and, under emulate_cuda, flags them to run the GPU's code."""
    flagged = False
    for n in _compute_nodes(gm):
        name = op_name(n)
        if name not in TREE_OPS.values():
            continue
        if placement.kind == "emulated":
            n.kwargs = {**n.kwargs, "emulate_cuda": True}
            flagged = True
        report.take(f"fff::{name}", [name], [n], pipeline=_tree_forward_pipeline(n, placement))
        value = example_value(n)
        if report.training and isinstance(value, torch.Tensor) and value.requires_grad:
            report.take_backward(f"fff::{name}_backward", [f"{name}_grad"], [n],
                                 pipeline=_tree_backward_pipeline(n, placement))
    if flagged:
        gm.recompile()


def _argument_value(arg):
    """A node argument's example value, or the argument itself."""
    return example_value(arg) if isinstance(arg, torch.fx.Node) else arg


def _tree_forward_pipeline(node, placement):
    """Where the tree op `node` runs: the placement's pipeline, or "torch"
    for a dtype fff does not compile (f64), which the op runs in torch ops."""
    x = _argument_value(node.args[0])
    return placement.pipeline if isinstance(x, torch.Tensor) and x.dtype in _kernels.ELEMENT else "torch"


def _tree_backward_pipeline(node, placement):
    """Where the backward of the tree op `node` runs: the placement's
    pipeline where fff's gradient kernel takes its tensors, else "torch"."""
    x = _argument_value(node.args[0])
    if op_name(node) == "leaf_tree_ffn":
        w1 = _argument_value(node.args[3])
        takes = isinstance(x, torch.Tensor) and isinstance(w1, torch.Tensor) and \
            _kernels.takes_leaf_grad(x, w1, placement.kind == "emulated")
    else:
        takes = isinstance(x, torch.Tensor) and _kernels.takes_tree_grad(x)
    return placement.pipeline if takes else "torch"


def _why_left(node):
    """Why `node`, in no region, stays with the fallback."""
    name = op_name(node)
    value = example_value(node)
    if name in _NORMS | _REDUCTIONS | _POINTWISE and isinstance(value, torch.Tensor) and \
            value.dtype.is_floating_point and value.dtype not in FLOATS:
        return f"fff compiles f32, f16 and bf16 tensors, and this op's are {str(value.dtype).removeprefix('torch.')}"
    return _LEFT_BECAUSE.get(name, "not an op fff compiles")


def _take_norm_regions(gm, nodes, fallback, report, placement, training=False, reported=(), transformed=()):
    """Puts fff::region in place of each region of a norm and its pointwise
    neighbours that fff compiles for `placement`, leaving out the nodes
    already `reported` as left and those inside torch.func transforms
    (`transformed`). In a training graph, a region is only the norm (see
    _norm_core), and it is taken where raising finds it to be exactly one
    norm of its inputs."""
    partitioner = CapabilityBasedPartitioner(gm, _RegionOps(gm, set(reported) | set(transformed), training),
                                             allows_single_node_partition=True)
    proposed = [part for p in partitioner.propose_partitions() for part in _connected_parts(p)]
    partitions = [_norm_core(p) for p in proposed] if training else proposed
    # In the graph's order: the partitioner's is that of sets of nodes,
    # which changes from run to run, and fusing follows it.
    position = {n: i for i, n in enumerate(gm.graph.nodes)}
    regions = [Partition(nodes=sorted(p.nodes, key=position.__getitem__)) for p in partitions if _has_norm(p.nodes)]
    restart_with_constant_floats([a for p in regions for n in p.nodes for a in n.all_input_nodes])
    in_regions = set().union(*[p.nodes for p in regions]) if regions else set()
    beside_norms = set().union(*[p.nodes for p in proposed if _has_norm(p.nodes)]) if proposed else set()
    for n in nodes:
        if n in in_regions or n in reported or is_fff_call(n) or is_trained_norm(n):
            continue
        if n in transformed:
            report.leave(n, f"inside a torch.func transform (transformers builds masks under vmap): it stays "
                         f"with {fallback}")
        elif training and n in beside_norms:
            report.leave(n, f"in a training graph fff takes the norm alone: the work around it, and its "
                         f"gradient, stay with {fallback}")
        elif any(n in p.nodes for p in partitions):
            report.leave(n, f"pointwise work with no norm next to it: it stays with {fallback}")
        else:
            report.leave(n, _why_left(n))
    if not regions:
        return
    # Dynamo keeps the Graph it traced: Inductor reads its placeholders'
    # notes on where each input comes from, and a compile that restarts
    # (Inductor's TensorifyScalarRestartAnalysis) clears it in reverse
    # order. torch.fx's fuser leaves that Graph out of order (a region's
    # result read before the region's last node) and sorts a copy; fff
    # sorts Dynamo's Graph in place and keeps it.
    graph = gm.graph
    fused_gm = partitioner.fuse_partitions(regions)
    assert fused_gm is gm, "the partitioner fuses in place"
    if gm.graph is not graph:
        sort_in_place(graph)
        gm.graph = graph
    fused = [n for n in gm.graph.nodes if n.op == "call_module" and n.target.startswith("fused_")]
    for node in fused:
        _note_results(gm, node)
    for node in fused:
        _take_region(gm, node, report, placement, training)
    gm.graph.lint()
    gm.recompile()


def explain(model, *inputs, fallback="inductor", grad=None, backward=False, options=None, print_report=True,
            **keyword_inputs):
    """Compiles `model` with the fff backend as torch.compile(model,
    backend="fff", options=options) would, runs it once on `inputs` and
    `keyword_inputs` (a transformers model's input_ids=..., say), and
    returns (and prints) a Report of what fff took, what it left and why.
    `grad` is the grad mode of that run: None (the default) keeps the
    caller's. With `backward`, the run is a training step's: grad mode on,
    then a backward of the sum of the output's floating-point tensors, whose
    fff calls the report's `backward` section counts. It resets Dynamo's
    caches, so that every graph is compiled again."""
    if backward and grad is False:
        raise ValueError("explain(backward=True) runs a backward, which needs grad=True (or None)")
    options = check_options(options)
    options.setdefault("fallback", fallback)
    report = Report()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=functools.partial(backend, report=report, **options))
    with torch.set_grad_enabled(True if backward else torch.is_grad_enabled() if grad is None else grad):
        output = compiled(*inputs, **keyword_inputs)
        if backward:
            _run_backward(output, report)
    torch._dynamo.reset()
    if print_report:
        print(report)
    return report


def _run_backward(output, report):
    """A backward of the sum of `output`'s floating-point tensors that need
    gradients; the fff backward calls it made go to `report`."""
    from torch.utils._pytree import tree_leaves

    from ._training import BACKWARD_CALLS, DY_MASK_CALLS, RESIDUAL_GRAD_CALLS

    leaves = output.to_tuple() if hasattr(output, "to_tuple") else output
    tensors = [t for t in tree_leaves(leaves) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not tensors:
        raise ValueError("explain(backward=True): the model's output holds no tensor that needs gradients")
    counters = (BACKWARD_CALLS, RESIDUAL_GRAD_CALLS, DY_MASK_CALLS)
    before = [collections.Counter(c) for c in counters]
    sum(t.float().sum() for t in tensors).backward()
    report.backward_calls, report.backward_residual_grads, report.backward_dy_masks = (
        collections.Counter(c) - b for c, b in zip(counters, before))

"""UltraFastBERT's own layers, raised: a call of one of the FFF authors'
layers in Dynamo's graph becomes a call of fff::tree_ffn, so that a model
built from their code runs each row's path on fff's kernels, where their
training layer ran all of the tree's neurons and their inference code
walked it in a dozen gathers and batched products.

Two of their layers:
- the masked dense training layer (training/cramming/architectures/fff.py
  in their repository, fff.torch.MaskedTreeFFN here): `linear_in` and the
  activation over every node, a 0/1 mask of each row's path (walked on the
  signs of the logits, under no_grad), and a dense `linear_out` of the
  masked activations. Its weights are two Linears' ("linear" layout):
  w_in [K*N, Din] with a bias, w_out [Dout, K*N] without.
- the inference layer of their PyTorch benchmarks
  (benchmark_pytorch/fff/fff_bmm.py, and benchmark_cuda's alike): a walk
  of index_select and bmm over `w1s` that records each level's node and
  logit, then act(logits) times the gathered rows of `w2s` in one bmm. Its
  weights are one tree's rows ("rows" layout): w_in [N, Din] and w_out
  [N, Dout], without biases. A logit of exactly 0 goes right there
  (`plane_score >= 0`), and its result keeps bmm's unit dim: [B, 1, Dout].
Both compute the values of fff.tree_ffn (with zero_goes_right for the
second), whose gradient (shared/DESIGN.md) is theirs: none through the
routing.

A call is recognised by what it computes, not by its class's name. Its
nodes are those Dynamo records under one module call (nn_module_stack).
The call must read nothing from the rest of the graph but the rows, its
weights, laid out as one of the two layers holds them, and the rows'
symbolic extents (a dynamic batch), and give it one tensor: the rows'
leading dims and Dout, with a unit dim before Dout or not. The masked
layer's call holds two linear ops: the first with a bias, the second
without, fed by the first. Then the call's own ops, cut out of the graph,
are run on random data and on small integers (whose logits are exact and
often exactly 0, where the direction of a tie shows) against
fff.tree_ffn's definition for each tree count K, depth (from 1),
activation and direction of ties that fit the shapes; the call is replaced
only where one of them gives the same values. Other calls are left as they
are."""

import contextlib
import dataclasses
import itertools
import math

import torch

from ._nodes import example_value, op_name
from ._tree_checks import ACTIVATIONS, MAX_DEPTH
from ._tree_training import _activation_and_slope
from ._ultrafastbert import path_mask

_LINEAR = (torch._C._nn.linear, torch.nn.functional.linear)
_TREE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# The largest example input (elements) whose call is run whole to check it.
_MAX_CHECKED_ELEMENTS = 1 << 22


def _module_calls(gm):
    """The call_function and call_method nodes of each module call, by the
    call's key in nn_module_stack (a module's id, "@n" for its n-th call),
    and of the whole graph (key None: the module torch.compile was given
    has no entry of its own)."""
    calls = {None: []}
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method"):
            calls[None].append(node)
            for key in node.meta.get("nn_module_stack") or {}:
                calls.setdefault(key, []).append(node)
    return calls


@dataclasses.dataclass
class _Candidate:
    """A module call that may be one of the authors' layers: its nodes, its
    result, the rows it reads, its weights as `layout` holds them (linear:
    w_in, b_in, w_out; rows: w_in, w_out), and the rows' extents it reads
    (node, dim of the rows)."""

    nodes: list
    result: torch.fx.Node
    x: torch.fx.Node
    weights: tuple
    layout: str
    extents: list

    @property
    def unit_dim(self):
        """Whether the result has a unit dim before Dout (bmm's)."""
        return example_value(self.result).dim() == example_value(self.x).dim() + 1


def _linear_arguments(node):
    """(input, weight, bias or None) of a linear op, or None."""
    if len(node.args) + len(node.kwargs) > 3:
        return None
    args = list(node.args) + [None] * (3 - len(node.args))
    bias = node.kwargs.get("bias", args[2])
    return args[0], node.kwargs.get("weight", args[1]), bias


def _boundary(nodes):
    """(the tensors outside the call that it reads, the symbolic extents it
    reads, its one result), or None where it gives the graph more than one
    value or reads other values."""
    members = set(nodes)
    outside = {a for n in nodes for a in n.all_input_nodes if a not in members}
    results = [n for n in nodes if any(u not in members for u in n.users)]
    if len(results) != 1:
        return None
    tensors = {n for n in outside if isinstance(example_value(n), torch.Tensor)}
    extents = outside - tensors
    if not all(isinstance(example_value(n), torch.SymInt) for n in extents):
        return None
    return tensors, extents, results[0]


def _extents_of(rows, extents):
    """(node, dim) for each symbolic extent node: the dim of the rows
    `rows` whose extent it is; None where one is none of them."""
    shape = example_value(rows).shape
    found = []
    for node in extents:
        symbol = str(example_value(node).node.expr)
        dims = [d for d, e in enumerate(shape) if isinstance(e, torch.SymInt) and str(e.node.expr) == symbol]
        if not dims:
            return None
        found.append((node, dims[0]))
    return found


def _is_tree_size(count):
    return count >= 3 and (count + 1) & count == 0


def _shaped_as_result(x, y, dout):
    """Whether y is x's leading dims and dout, with a unit dim before dout
    or not."""
    leading = tuple(y.shape[:-1])
    return y.shape[-1] == dout and (leading == tuple(x.shape[:-1]) or leading == (*x.shape[:-1], 1))


def _candidates(nodes):
    """The ways the module call `nodes` may be one of the authors' layers:
    _Candidates, each to be checked by its values."""
    boundary = _boundary(nodes)
    if boundary is None:
        return []
    tensors, extents, result = boundary
    members = set(nodes)
    linears = [n for n in nodes if n.op == "call_function" and n.target in _LINEAR]
    found = []
    if len(linears) == 2:
        first, second = (_linear_arguments(n) for n in linears)
        if first is not None and second is not None and first[2] is not None and second[2] is None and \
                linears[0] in _ancestors(linears[1], members):
            weights = (first[1], first[2], second[1])
            rows = tensors - set(weights)
            if all(isinstance(w, torch.fx.Node) and w in tensors for w in weights) and len(rows) == 1:
                found.append((rows.pop(), weights, "linear"))
    elif not linears and len(tensors) == 3:
        # Which input is which: the rows and two [N, width] weights, in
        # every order (their shapes rule out the others).
        found = [(x, (w_in, w_out), "rows") for x, w_in, w_out in itertools.permutations(sorted(tensors, key=lambda n: n.name))]
    candidates = []
    for x, weights, layout in found:
        located = _extents_of(x, extents)
        values = [example_value(n) for n in (x, *weights, result)]
        if located is not None and _laid_out(layout, values):
            candidates.append(_Candidate(nodes, result, x, weights, layout, located))
    return candidates


def _laid_out(layout, values):
    """Whether the example values (x, weights..., y) are shaped and typed as
    `layout`'s layer takes and gives them."""
    x, *weights, y = values
    if len({v.dtype for v in values}) != 1 or x.dtype not in _TREE_DTYPES or x.dim() < 1 or \
            any(w.dim() != (1 if i == 1 and layout == "linear" else 2) for i, w in enumerate(weights)):
        return False
    # Weights of static extents (parameters are): a symbolic batch is never
    # compared with a tree's size, which would guard the graph on it.
    if not all(isinstance(e, int) for w in weights for e in w.shape):
        return False
    if layout == "linear":
        w_in, b_in, w_out = weights
        return w_in.shape[1] == x.shape[-1] and w_out.shape[1] == w_in.shape[0] and b_in.shape[0] == w_in.shape[0] \
            and tuple(y.shape) == (*x.shape[:-1], w_out.shape[0])
    w_in, w_out = weights
    return _is_tree_size(w_in.shape[0]) and w_out.shape[0] == w_in.shape[0] and w_in.shape[1] == x.shape[-1] and \
        _shaped_as_result(x, y, w_out.shape[1])


def _ancestors(node, members):
    """The nodes of `members` that `node` is computed from."""
    seen, stack = set(), [node]
    while stack:
        for other in stack.pop().all_input_nodes:
            if other in members and other not in seen:
                seen.add(other)
                stack.append(other)
    return seen


def _extracted(candidate):
    """The call's own ops as a function of (x, weights...), the extents it
    reads taken from x."""
    graph = torch.fx.Graph()
    env = {candidate.x: graph.placeholder("x")}
    for index, node in enumerate(candidate.weights):
        env[node] = graph.placeholder(f"w{index}")
    for node, dim in candidate.extents:
        env[node] = graph.call_method("size", (env[candidate.x], dim))
    for node in candidate.nodes:
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(env[candidate.result])
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _concrete_shape(value):
    """`value`'s extents, a symbol's as its example size; None where one has
    none."""
    shape = []
    for extent in value.shape:
        if isinstance(extent, torch.SymInt):
            if not extent.node.has_hint():
                return None
            extent = extent.node.hint
        shape.append(int(extent))
    return shape


def _tree_values(rows, w_in, b_in, w_out, trees, depth, activation, zero_goes_right):
    """fff.tree_ffn's values on rows [B, Din], for weights laid out as the
    masked layer's Linears hold them (tree k's node n at row k * N + n of
    w_in, column k * N + n of w_out; b_in may be None), computed as
    MaskedTreeFFN computes them: every logit, the paths' mask, a dense
    product."""
    logits = rows @ w_in.t()
    if b_in is not None:
        logits = logits + b_in
    logits = logits.view(rows.shape[0], trees, w_in.shape[0] // trees)
    hidden = _activation_and_slope(activation, logits)[0] * path_mask(logits, depth, zero_goes_right)
    return hidden.flatten(1) @ w_out.t()


def _examples(shape, width, outputs):
    """Weights as the masked layer's Linears hold them (x, w_in, b_in,
    w_out), to hold the call to fff.tree_ffn's values with: random ones,
    and small integers, whose dot products are exact and often exactly 0,
    where the direction of a tie shows (the authors' inference code sends a
    logit of 0 right, their training layer left)."""
    generator = torch.Generator().manual_seed(0)
    rows_width = shape[-1]

    def small_integers(*extents, density=1.0):
        values = torch.randint(-1, 2, extents, generator=generator).to(torch.float32)
        return values * (torch.rand(extents, generator=generator) < density)

    continuous = (torch.randn(shape, generator=generator),
                  torch.randn(width, rows_width, generator=generator) / math.sqrt(rows_width),
                  torch.randn(width, generator=generator) * 0.1, torch.randn(outputs, width, generator=generator))
    # Rows of about four nonzero entries: a logit is then exactly 0 about
    # a third of the time.
    integers = (small_integers(*shape, density=min(1.0, 4 / rows_width)), small_integers(width, rows_width),
                small_integers(width),
                torch.randn(outputs, width, generator=generator))
    return continuous, integers


def _call_inputs(layout, x, w_in, b_in, w_out):
    """An example's tensors as the call of `layout`'s layer reads them: the
    rows layout has no b_in, and w_out's rows are its neurons."""
    return (x, w_in, b_in, w_out) if layout == "linear" else (x, w_in, w_out.t().contiguous())


def _fits(function, layout, shape, width, outputs):
    """The (trees, depth, activation, zero_goes_right) for which `function`,
    the call's ops, gives fff.tree_ffn's values on x of `shape`; None if
    none does."""
    examples = _examples(shape, width, outputs)
    try:
        with torch.no_grad():
            # forward itself: a GraphModule's call prints the code of an op
            # that raises.
            given = [function.forward(*_call_inputs(layout, *example)) for example in examples]
    except Exception:  # not a function of these shapes: not the layer
        return None
    if not all(isinstance(g, torch.Tensor) and g.numel() == math.prod(shape[:-1]) * outputs for g in given):
        return None
    # From depth 1: a tree of depth 0 is a dense layer of K neurons, which
    # every Linear-activation-Linear computes, and which matrix products
    # compute faster. The rows layout holds one tree.
    for depth in range(1, MAX_DEPTH + 1):
        nodes = 2 ** (depth + 1) - 1
        if width % nodes or (layout == "rows" and width != nodes):
            continue
        for activation in ACTIVATIONS:
            for zero_goes_right in (False, True):
                if all(_close(g.reshape(-1, outputs),
                              _tree_values(x.reshape(-1, shape[-1]).double(), w_in.double(),
                                           b_in.double() if layout == "linear" else None, w_out.double(),
                                           width // nodes, depth, activation, zero_goes_right))
                       for g, (x, w_in, b_in, w_out) in zip(given, examples)):
                    return width // nodes, depth, activation, zero_goes_right
    return None


def _close(actual, expected):
    """Whether `actual` is `expected` (f64) within f32 rounding."""
    error = (actual.double() - expected).norm() / expected.norm().clamp_min(1e-30)
    return bool(error <= 1e-5)


def _found_tree(candidate):
    """(trees, depth, activation, zero_goes_right) of the tree the call
    computes, or None."""
    shape = _concrete_shape(example_value(candidate.x))
    if not shape:
        return None
    w_in = example_value(candidate.weights[0])
    w_out = example_value(candidate.weights[-1])
    width, din = (int(e) for e in w_in.shape)
    dout = int(w_out.shape[0] if candidate.layout == "linear" else w_out.shape[1])
    function = _extracted(candidate)
    # A few rows first; the example's own extents where the call's ops
    # fixed them (a static graph's reshapes), if that is not too large to
    # run once here, and not empty (a graph specialized to no rows, whose
    # values every candidate matches).
    found = _fits(function, candidate.layout, [64, din], width, dout)
    if not found and 0 < math.prod(shape) <= _MAX_CHECKED_ELEMENTS:
        found = _fits(function, candidate.layout, shape, width, dout)
    return found


def raise_masked_tree_layers(gm):
    """Puts fff::tree_ffn in place of each call of one of the authors'
    layers in `gm` (see the module's docstring). The backend then takes
    each such call as it takes the tree ops a model calls itself; the call
    carries the names of the ops it replaced (meta "fff_raised_ops"), which
    the report counts as taken with it."""
    replaced = set()
    for nodes in _module_calls(gm).values():
        if replaced.intersection(nodes):  # a call inside one replaced already, or the graph holding it
            continue
        for candidate in _candidates(nodes):
            found = _found_tree(candidate)
            if found:
                _replace(gm.graph, candidate, *found)
                replaced.update(candidate.nodes)
                break
    if replaced:
        gm.graph.lint()
        gm.recompile()


def _replace(graph, candidate, trees, depth, activation, zero_goes_right):
    """Puts the call of fff::tree_ffn in place of the candidate's nodes."""
    added = []

    def method(name, *args):
        added.append(graph.call_method(name, args))
        return added[-1]

    with graph.inserting_before(candidate.result):
        if candidate.layout == "linear":
            w_in, b_in, w_out = candidate.weights
            din, dout = example_value(w_in).shape[1], example_value(w_out).shape[0]
            nodes_per_tree = example_value(w_in).shape[0] // trees
            weights_in = method("view", w_in, trees, nodes_per_tree, din)
            biases_in = method("view", b_in, trees, nodes_per_tree)
            # Each neuron's output weights as a row, copied by the fallback's
            # own code (Inductor's transpose is faster than the copy the fff
            # call would make of a strided view).
            weights_out = method("view", method("contiguous", method("t", w_out)), trees, nodes_per_tree, dout)
        else:
            w_in, w_out = candidate.weights
            weights_in = method("reshape", w_in, 1, *example_value(w_in).shape)
            weights_out = method("reshape", w_out, 1, *example_value(w_out).shape)
            biases_in = None
        routing = {"zero_goes_right": True} if zero_goes_right else {}
        call = graph.call_function(torch.ops.fff.tree_ffn.default,
                                   (candidate.x, weights_in, biases_in, weights_out, None, depth, activation),
                                   routing)
        result = method("unsqueeze", call, -2) if candidate.unit_dim else call
    y = example_value(candidate.result)
    _note_values(added, call, y.squeeze(-2) if candidate.unit_dim else y)
    call.meta["fff_raised_ops"] = [op_name(n) for n in candidate.nodes]
    candidate.result.replace_all_uses_with(result)
    for node in reversed(candidate.nodes):
        graph.erase_node(node)


def _note_values(methods, call, call_value):
    """Gives the new nodes the example values later passes read (fake
    tensors of Dynamo's mode): the call the replaced result's own, the
    methods theirs on their operands' (in the order they were added)."""
    call.meta["example_value"] = call_value
    with getattr(call_value, "fake_mode", None) or contextlib.nullcontext():
        for node in methods:
            node.meta["example_value"] = getattr(_value_of(node.args[0]), node.target)(*node.args[1:])


def _value_of(arg):
    return example_value(arg) if isinstance(arg, torch.fx.Node) else arg

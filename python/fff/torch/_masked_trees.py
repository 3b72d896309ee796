"""UltraFastBERT's own layer, raised: a call of the FFF authors' masked
dense layer (training/cramming/architectures/fff.py in their repository,
fff.torch.MaskedTreeFFN here) in Dynamo's graph becomes a call of
fff::tree_ffn, so that a model built from the authors' code runs the
path's 12 neurons where it ran all 4095.

That layer computes `linear_in` and the activation over every node, a
0/1 mask of each row's path (walked on the signs of the logits, under
no_grad), and a dense `linear_out` of the masked activations: the values
of fff.tree_ffn, whose gradient (shared/DESIGN.md) is the masked layer's.

A call is recognised by what it computes, not by its class's name. Its
nodes are those Dynamo records under one module call (nn_module_stack)
that holds two linear ops: the first with a bias (linear_in, [K*N, Din]),
the second without (linear_out, [Dout, K*N]), fed by the first. The call
must read nothing from the rest of the graph but the rows and those three
parameters, and give it one tensor. Then the call's own ops, cut out of
the graph, are run on random data and on small integers (whose logits
are exact and often exactly 0, where the direction of a tie shows)
against fff.tree_ffn's definition for each tree count K, depth (from 1)
and activation that fit the shapes; the call is replaced only where one
of them gives the same values. Other calls are left as they are."""

import contextlib
import dataclasses
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
    """A module call that may be the masked layer: its nodes, its result,
    and the rows and parameters it reads."""

    nodes: list
    result: torch.fx.Node
    x: torch.fx.Node
    w_in: torch.fx.Node
    b_in: torch.fx.Node
    w_out: torch.fx.Node


def _linear_arguments(node):
    """(input, weight, bias or None) of a linear op, or None."""
    if len(node.args) + len(node.kwargs) > 3:
        return None
    args = list(node.args) + [None] * (3 - len(node.args))
    bias = node.kwargs.get("bias", args[2])
    return args[0], node.kwargs.get("weight", args[1]), bias


def _candidate(nodes):
    """The module call `nodes` as a _Candidate, or None where its shape is
    not the masked layer's."""
    members = set(nodes)
    linears = [n for n in nodes if n.op == "call_function" and n.target in _LINEAR]
    if len(linears) != 2:
        return None
    first, second = (_linear_arguments(n) for n in linears)
    if first is None or second is None or first[2] is None or second[2] is not None:
        return None
    w_in, b_in, w_out = first[1], first[2], second[1]
    outside = {a for n in nodes for a in n.all_input_nodes if a not in members}
    if not all(isinstance(p, torch.fx.Node) and p in outside for p in (w_in, b_in, w_out)):
        return None
    rows = outside - {w_in, b_in, w_out}
    results = [n for n in nodes if any(u not in members for u in n.users)]
    if len(rows) != 1 or len(results) != 1 or linears[0] not in _ancestors(linears[1], members):
        return None
    candidate = _Candidate(nodes, results[0], rows.pop(), w_in, b_in, w_out)
    values = [example_value(n) for n in (candidate.x, w_in, b_in, w_out, candidate.result)]
    if not all(isinstance(v, torch.Tensor) for v in values):
        return None
    x, wi, bi, wo, y = values
    if len({v.dtype for v in values}) != 1 or x.dtype not in _TREE_DTYPES or x.dim() < 1 or wi.dim() != 2 or \
            wo.dim() != 2 or bi.dim() != 1 or wi.shape[1] != x.shape[-1] or wo.shape[1] != wi.shape[0] or \
            bi.shape[0] != wi.shape[0] or y.shape[:-1] != x.shape[:-1] or y.shape[-1] != wo.shape[0]:
        return None
    return candidate


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
    """The call's own ops as a function of (x, w_in, b_in, w_out)."""
    graph = torch.fx.Graph()
    env = {}
    for name, node in zip(("x", "w_in", "b_in", "w_out"),
                          (candidate.x, candidate.w_in, candidate.b_in, candidate.w_out)):
        env[node] = graph.placeholder(name)
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


def _tree_values(rows, w_in, b_in, w_out, trees, depth, activation):
    """fff.tree_ffn's values on rows [B, Din], for weights laid out as the
    layer's Linears hold them (tree k's node n at row k * N + n of w_in,
    column k * N + n of w_out), computed as MaskedTreeFFN computes them:
    every logit, the paths' mask, a dense product."""
    logits = (rows @ w_in.t() + b_in).view(rows.shape[0], trees, w_in.shape[0] // trees)
    hidden = _activation_and_slope(activation, logits)[0] * path_mask(logits, depth)
    return hidden.flatten(1) @ w_out.t()


def _examples(shape, width, outputs):
    """Inputs (x, w_in, b_in, w_out) to hold the call to fff.tree_ffn's
    values with: random ones, and small integers, whose dot products are
    exact and often exactly 0, where the direction of a tie shows (a layer
    that sends a logit of 0 right, as the authors' inference code does,
    is not fff.tree_ffn)."""
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


def _fits(function, shape, width, outputs):
    """The (trees, depth, activation) for which `function`, the call's ops,
    gives fff.tree_ffn's values on x of `shape`; None if none does."""
    examples = _examples(shape, width, outputs)
    try:
        with torch.no_grad():
            # forward itself: a GraphModule's call prints the code of an op
            # that raises.
            given = [function.forward(*example) for example in examples]
    except Exception:  # not a function of these shapes: not the layer
        return None
    if not all(isinstance(g, torch.Tensor) and list(g.shape) == shape[:-1] + [outputs] for g in given):
        return None
    # From depth 1: a tree of depth 0 is a dense layer of K neurons, which
    # every Linear-activation-Linear computes, and which matrix products
    # compute faster.
    for depth in range(1, MAX_DEPTH + 1):
        nodes = 2 ** (depth + 1) - 1
        if width % nodes:
            continue
        for activation in ACTIVATIONS:
            if all(_close(g.reshape(-1, outputs),
                          _tree_values(x.reshape(-1, shape[-1]).double(), w_in.double(), b_in.double(),
                                       w_out.double(), width // nodes, depth, activation))
                   for g, (x, w_in, b_in, w_out) in zip(given, examples)):
                return width // nodes, depth, activation
    return None


def _close(actual, expected):
    """Whether `actual` is `expected` (f64) within f32 rounding."""
    error = (actual.double() - expected).norm() / expected.norm().clamp_min(1e-30)
    return bool(error <= 1e-5)


def raise_masked_tree_layers(gm):
    """Puts fff::tree_ffn in place of each call of UltraFastBERT's masked
    layer in `gm` (see the module's docstring). The backend then takes each
    such call as it takes the tree ops a model calls itself; the call
    carries the names of the ops it replaced (meta "fff_raised_ops"), which
    the report counts as taken with it."""
    replaced = set()
    for nodes in _module_calls(gm).values():
        if replaced.intersection(nodes):  # a call inside one replaced already, or the graph holding it
            continue
        candidate = _candidate(nodes)
        if candidate is None:
            continue
        x, w_in, w_out = (example_value(n) for n in (candidate.x, candidate.w_in, candidate.w_out))
        shape = _concrete_shape(x)
        if not shape:
            continue
        function = _extracted(candidate)
        # A few rows first; the example's own extents where the call's ops
        # fixed them (a static graph's reshapes), if that is not too large
        # to run once here, and not empty (a graph specialized to no rows,
        # whose values every candidate matches).
        width, din, dout = (int(e) for e in (*w_in.shape, w_out.shape[0]))
        found = _fits(function, [64, din], width, dout)
        if not found and 0 < math.prod(shape) <= _MAX_CHECKED_ELEMENTS:
            found = _fits(function, shape, width, dout)
        if not found:
            continue
        trees, depth, activation = found
        nodes_per_tree = 2 ** (depth + 1) - 1
        graph = gm.graph
        with graph.inserting_before(candidate.result):
            weights_in = graph.call_method("view", (candidate.w_in, trees, nodes_per_tree, din))
            biases_in = graph.call_method("view", (candidate.b_in, trees, nodes_per_tree))
            # Each neuron's output weights as a row, copied by the fallback's
            # own code (Inductor's transpose is faster than the copy the fff
            # call would make of a strided view).
            transposed = graph.call_method("contiguous", (graph.call_method("t", (candidate.w_out,)),))
            weights_out = graph.call_method("view", (transposed, trees, nodes_per_tree, dout))
            call = graph.call_function(torch.ops.fff.tree_ffn.default,
                                       (candidate.x, weights_in, biases_in, weights_out, None, depth, activation))
        _note_values(weights_in, biases_in, transposed, weights_out, call, candidate)
        call.meta["fff_raised_ops"] = [op_name(n) for n in candidate.nodes]
        candidate.result.replace_all_uses_with(call)
        for node in reversed(candidate.nodes):
            graph.erase_node(node)
        replaced.update(candidate.nodes)
    if replaced:
        gm.graph.lint()
        gm.recompile()


def _note_values(weights_in, biases_in, transposed, weights_out, call, candidate):
    """Gives the new nodes the example values later passes read (fake
    tensors of Dynamo's mode, from the replaced call's own)."""
    x, w_in, b_in, w_out, y = (example_value(n) for n in (candidate.x, candidate.w_in, candidate.b_in,
                                                         candidate.w_out, candidate.result))
    with getattr(x, "fake_mode", None) or contextlib.nullcontext():
        rows_out = w_out.t().contiguous()
        values = {weights_in: w_in.view(*weights_in.args[1:]), biases_in: b_in.view(*biases_in.args[1:]),
                  transposed.args[0]: w_out.t(), transposed: rows_out,
                  weights_out: rows_out.view(*weights_out.args[1:])}
    values[call] = y
    for node, value in values.items():
        node.meta["example_value"] = value

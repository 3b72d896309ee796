"""Dynamo's graph nodes as the backend sees them: the names the report
gives them, their example values, fff's own calls among them."""

import heapq
import inspect

import torch

FLOATS = (torch.float32, torch.float16, torch.bfloat16)

# fff's own custom ops, by the name the report gives them.
TREE_OPS = {"fff.tree_ffn.default": "tree_ffn", "fff.leaf_tree_ffn.default": "leaf_tree_ffn"}
SUBLAYER_OP = "fff.tree_sublayer.default"
REGION_OP = "fff.region.default"
FFF_CALLS = {*TREE_OPS, SUBLAYER_OP, REGION_OP}


def _overload(target):
    """A custom op's overload name, `fff.tree_ffn.default`: Dynamo's graphs
    call the op's packet (`fff.tree_ffn`), AOTAutograd's its overload."""
    if isinstance(target, torch._ops.OpOverloadPacket):
        return f"{target}.default"
    return str(target) if isinstance(target, torch._ops.OpOverload) else None


def op_name(node):
    """A node's op as the report names it: `layer_norm`, `add`, `linear`."""
    if node.op == "call_method":
        return node.target
    if node.op == "call_module":
        return f"module {node.target}"
    overload = _overload(node.target)
    if overload == SUBLAYER_OP:
        return "tree_sublayer"
    if overload == REGION_OP:
        return "region"
    if overload in TREE_OPS:
        return TREE_OPS[overload]
    if isinstance(node.target, torch._ops.OpOverload):
        return str(node.target)
    return getattr(node.target, "__name__", str(node.target)).lstrip("_")


def bound_arguments(node, signature):
    """A call node's arguments by parameter name, defaults filled in; None
    where they do not bind to `signature` (an inspect.Signature)."""
    try:
        bound = signature.bind(*node.args, **node.kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return bound.arguments


def custom_op_arguments(node):
    """A custom op call's arguments by the names of its schema (its default
    overload's, for Dynamo's packet), defaults filled in; None where they
    do not bind."""
    op = node.target.default if isinstance(node.target, torch._ops.OpOverloadPacket) else node.target
    signature = inspect.Signature([inspect.Parameter(a.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                     default=a.default_value if a.has_default_value()
                                                     else inspect.Parameter.empty)
                                   for a in op._schema.arguments])
    return bound_arguments(node, signature)


def static_extents(normalized_shape):
    """A norm call's `normalized_shape` argument, or a value's trailing
    extents, as a tuple of ints; None where any extent is dynamic: a SymInt
    that Dynamo's guards leave free. A node (`x.shape[-1:]` under dynamic
    shapes) is read as the value Dynamo traced it with, and a SymInt that
    the guards fix (a dynamic input's width, once multiplied with a
    parameter's) is its int."""
    if isinstance(normalized_shape, torch.fx.Node):
        normalized_shape = example_value(normalized_shape)
    if isinstance(normalized_shape, (int, torch.SymInt)):
        normalized_shape = (normalized_shape,)
    if not isinstance(normalized_shape, (tuple, list, torch.Size)):
        return None
    extents = []
    for extent in normalized_shape:
        if isinstance(extent, torch.fx.Node):
            extent = example_value(extent)
        if isinstance(extent, torch.SymInt) and extent.node.expr.is_Integer:
            extent = int(extent.node.expr)
        if not isinstance(extent, int) or isinstance(extent, bool):
            return None
        extents.append(extent)
    return tuple(extents)


def sort_in_place(graph):
    """Moves `graph`'s nodes so that each follows its inputs, the rest
    keeping their order: a stable topological sort that keeps the nodes and
    the Graph they belong to, where torch.fx's copies them into a new one."""
    position = {n: i for i, n in enumerate(graph.nodes)}
    waiting = {n: len(n.all_input_nodes) for n in position}
    ready = [(position[n], n) for n, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, node = heapq.heappop(ready)
        order.append(node)
        for user in node.users:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (position[user], user))
    if len(order) != len(position):
        raise AssertionError("the graph has a cycle")
    output = graph.output_node()
    for node in order:
        if node is not output:
            output.prepend(node)


def is_fff_call(node):
    return node.op == "call_function" and _overload(node.target) in FFF_CALLS


def example_value(node):
    """The value Dynamo traced `node` with (a fake tensor, a SymInt...)."""
    return node.meta.get("example_value", node.meta.get("val"))


# Pointwise arithmetic at torch level (functions, and methods by name).
ARITHMETIC = {"add", "sub", "mul", "truediv", "div", "neg", "pow", "rsqrt", "sqrt", "reciprocal", "exp", "tanh",
              "erf", "sigmoid", "relu", "gelu", "silu", "abs", "square"}
NORMS = {"layer_norm", "rms_norm"}
REDUCTIONS = {"mean", "var", "var_mean", "sum"}
# Ops whose result is always a new tensor (never a view or an input): an
# in-place op on one changes nothing anyone else holds.
_NEW_RESULTS = ARITHMETIC | NORMS | REDUCTIONS | {
    "linear", "matmul", "bmm", "baddbmm", "addmm", "softmax", "scaled_dot_product_attention", "conv1d", "conv2d",
    "embedding", *TREE_OPS.values()}


def writes_unseen(node):
    """Whether the in-place op `node` (`h += a`) may run out of place: `h`
    is a new tensor that nothing else reads (no graph input, no view, no
    other user), so no one sees whether it was written."""
    target = node.args[0] if node.args else None
    return isinstance(target, torch.fx.Node) and target.op in ("call_function", "call_method") and \
        op_name(target) in _NEW_RESULTS and len(target.users) == 1

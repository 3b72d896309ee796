"""Tree sublayers, pre-LN `residual + tree(norm(x))` and post-LN
`norm(residual + tree(x))`, where the tree is one of fff's custom ops: each
becomes one call of fff::tree_sublayer, which fff compiles as one unit."""

import inspect
import operator

import torch

from ._dynamic_floats import restart_with_constant_floats
from ._nodes import (FLOATS as _FLOATS, REGION_OP, TREE_OPS, bound_arguments, custom_op_arguments,
                     example_value as _value, op_name, static_extents, writes_unseen)
from ._regions import exact_norm


def _is_eval_dropout(node):
    """A dropout that is the identity: eval mode, or p = 0."""
    if op_name(node) != "dropout" or node.op != "call_function":
        return False
    bound = bound_arguments(node, inspect.signature(torch.nn.functional.dropout))
    return bound is not None and (bound["training"] is False or bound["p"] == 0) and not bound["inplace"]


# The norms a tree sublayer may start with, by the function Dynamo's graph
# calls (nn.RMSNorm calls torch.rms_norm), and the signature their
# arguments bind to.
_SUBLAYER_NORMS = {torch.nn.functional.layer_norm: "layer_norm", torch.nn.functional.rms_norm: "rms_norm",
                   torch.rms_norm: "rms_norm"}
_NORM_SIGNATURES = {"layer_norm": inspect.signature(torch.nn.functional.layer_norm),
                    "rms_norm": inspect.signature(torch.nn.functional.rms_norm)}


def _residual_add(tree):
    """The add that alone reads the tree op `tree` (through an eval-mode
    dropout, as ViT writes it, or not), the dropout, and the other addend;
    None where there is no such add, or where it writes into a tensor that
    someone else holds (`residual += ...`)."""
    users = list(tree.users)
    if len(users) != 1:
        return None
    add, dropout = users[0], None
    if _is_eval_dropout(add) and len(add.users) == 1:
        dropout, add = add, next(iter(add.users))
    ffn = dropout or tree
    if op_name(add) not in ("add", "iadd") or len(add.args) != 2 or add.kwargs or ffn not in add.args:
        return None
    residual = add.args[1] if add.args[0] is ffn else add.args[0]
    if op_name(add) == "iadd" and add.args[0] is residual and not writes_unseen(add):
        return None
    return add, dropout, residual


def constant_normalized_shapes(gm):
    """Gives each norm call of `gm` whose normalized_shape is read off a
    value (`x.shape[-1:]`, a graph value under dynamic shapes) that
    Dynamo's guards fix (a width multiplied with a parameter's) the ints
    instead: what it computes is the same, and its region then takes no
    shape value."""
    changed = False
    for node in gm.graph.nodes:
        kind = _SUBLAYER_NORMS.get(node.target) if node.op == "call_function" else None
        arguments = bound_arguments(node, _NORM_SIGNATURES[kind]) if kind else None
        shape = arguments["normalized_shape"] if arguments else None
        read = isinstance(shape, torch.fx.Node) or \
            (isinstance(shape, (tuple, list)) and any(isinstance(e, torch.fx.Node) for e in shape))
        extents = static_extents(shape) if read else None
        if extents is None:
            continue
        if len(node.args) > 1:
            node.update_arg(1, extents)
        else:
            node.update_kwarg("normalized_shape", extents)
        changed = True
    if changed:
        # The nodes that read the shape stay, unused: the fallback drops
        # them (torch.fx's dead-code pass would also drop a call_method's
        # in-place write, which it takes to be pure).
        gm.recompile()


def _norm_arguments(norm, x):
    """(kind, weight, bias, eps) of the norm node `norm` over rows like `x`
    (a fake tensor), as fff's norms take them: one trailing dim, parameters
    of x's dtype and width; None where it is not such a norm."""
    kind = _SUBLAYER_NORMS.get(norm.target)
    arguments = bound_arguments(norm, _NORM_SIGNATURES[kind]) if kind else None
    if arguments is None or not isinstance(x, torch.Tensor) or x.dtype not in _FLOATS or \
            static_extents(arguments["normalized_shape"]) != (x.shape[-1],):
        return None
    eps = arguments["eps"]
    if eps is None:
        # rms_norm's default: the machine epsilon of the type torch computes
        # x's dtype in (f32 for f16 and bf16, as ATen's opmath_type).
        eps = torch.finfo(torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype).eps
    if not isinstance(eps, (int, float)):
        restart_with_constant_floats([eps])
        return None
    bias = arguments.get("bias")
    for parameter in (arguments["weight"], bias):
        value = _value(parameter) if isinstance(parameter, torch.fx.Node) else parameter
        if parameter is not None and not (isinstance(value, torch.Tensor) and value.dtype == x.dtype and
                                          tuple(value.shape) == (x.shape[-1],)):
            return None
    return kind, arguments["weight"], bias, float(eps)


def _alike(values):
    """Whether `values` (x, the residual, the add, then anything else of the
    sublayer's) are tensors of one dtype and device, with the residual, the
    add and the tree's result of one shape: no broadcast in the add."""
    return all(isinstance(v, torch.Tensor) for v in values) and \
        len({(v.dtype, v.device) for v in values}) == 1 and values[1].shape == values[2].shape == values[-1].shape


def _tree_arguments(tree):
    """The tree op node's arguments by name; None for a tree that sends a
    logit of 0 right (zero_goes_right), which fff::tree_sublayer's tree
    does not."""
    arguments = custom_op_arguments(tree)
    return None if arguments is None or arguments.get("zero_goes_right") else arguments


def _tree_sublayer(tree):
    """The call of fff::tree_sublayer that can stand for `tree` (a tree op
    node) and the ops around it, and the nodes it stands for; None where
    they are not a sublayer. Two orders, each with an eval-mode dropout
    after the tree or not:
    - pre-LN, `residual + tree(norm(x))`: the norm's result goes to the tree
      alone, the tree's to the add alone;
    - post-LN (BERT's), `norm(residual + tree(x))`: the tree's result goes to
      the add alone and the add's to the norm alone."""
    found = _residual_add(tree)
    tree_args = _tree_arguments(tree)
    if found is None or tree_args is None:
        return None
    add, dropout, residual = found
    head = tree.args[0]
    if isinstance(head, torch.fx.Node) and head.target in _SUBLAYER_NORMS and len(head.users) == 1:
        order, norm, x, result = "pre", head, bound_arguments(head, _NORM_SIGNATURES[_SUBLAYER_NORMS[head.target]]), add
        x = x and x["input"]
    else:
        users = list(add.users)
        if len(users) != 1 or users[0].target not in _SUBLAYER_NORMS:
            return None
        order, norm, x, result = "post", users[0], head, users[0]
        bound = bound_arguments(norm, _NORM_SIGNATURES[_SUBLAYER_NORMS[norm.target]])
        if bound is None or bound["input"] is not add:
            return None
    if not all(isinstance(n, torch.fx.Node) for n in (x, residual)):
        return None
    rows = _value(x) if order == "pre" else _value(add)
    parameters = _norm_arguments(norm, rows)
    values = [_value(n) for n in (x, residual, add, result, tree)]
    if parameters is None or not _alike(values):
        return None
    kind, weight, bias, eps = parameters
    names = ["w_in", "b_in", "w_out", "b_out"] if op_name(tree) == "tree_ffn" else \
        ["node_w", "node_b", "w1", "b1", "w2", "b2"]
    arguments = (x, residual, kind, weight, bias, eps, op_name(tree), [tree_args[name] for name in names],
                 tree_args["depth"], tree_args["activation"], order)
    chain = (norm, tree, dropout, add) if order == "pre" else (tree, dropout, add, norm)
    return arguments, tuple(n for n in chain if n is not None)


def take_tree_sublayers(gm, report, pipeline="cpu"):
    """Puts fff::tree_sublayer, one fff call, in place of each FFN sublayer
    whose FFN is a tree op: its norm, layer and residual add then run in one
    call, and torch runs nothing between them. `pipeline` compiles it (the
    report says)."""
    taken = False
    for tree in [n for n in gm.graph.nodes if op_name(n) in TREE_OPS.values()]:
        found = _tree_sublayer(tree)
        if found is None:
            continue
        taken = True
        arguments, nodes = found
        last = nodes[-1]
        report.take("fff::tree_sublayer", [arguments[2], op_name(tree)], nodes, pipeline=pipeline)
        with gm.graph.inserting_before(last):
            call = gm.graph.call_function(torch.ops.fff.tree_sublayer.default, arguments)
        call.meta["example_value"] = _value(last)
        last.replace_all_uses_with(call)
        for node in reversed(nodes):
            gm.graph.erase_node(node)
    if taken:
        gm.graph.lint()
        gm.recompile()


def _region_norm(node):
    """(the fff::region call, its ExactNorm) where `node` is the one result
    of a region that is exactly a norm of its inputs, read by one op."""
    if not (node.op == "call_function" and node.target is operator.getitem and node.args[1] == 0 and
            len(node.users) == 1):
        return None
    call = node.args[0]
    if not (isinstance(call, torch.fx.Node) and str(call.target) == REGION_OP and len(call.users) == 1):
        return None
    norm = exact_norm(call.args[1])
    return (call, norm) if norm else None


def take_region_sublayers(gm, report, pipeline="cpu"):
    """Pre-LN sublayers whose norm is written by hand (LLaMA's RMSNorm: an
    upcast, pow, mean, rsqrt and the weight), which fff compiled as a region
    that raising found to be one norm of its inputs: the region, the tree
    op and the residual add become one fff::tree_sublayer call."""
    taken = False
    for tree in [n for n in gm.graph.nodes if op_name(n) in TREE_OPS.values()]:
        found = _region_norm(tree.args[0]) if isinstance(tree.args[0], torch.fx.Node) else None
        added = _residual_add(tree)
        tree_args = _tree_arguments(tree)
        if found is None or added is None or tree_args is None:
            continue
        (call, norm), (add, dropout, residual) = found, added
        x, weight, bias = norm.operands(call.args[0])
        # fff::tree_sublayer's norm takes parameters of x's dtype, not the
        # f32 ones of a mixed-type norm.
        if any(p is not None and getattr(_value(p), "dtype", None) != getattr(_value(x), "dtype", None)
               for p in (weight, bias)):
            continue
        values = [_value(n) for n in (x, residual, add, tree.args[0], tree)]
        if not all(isinstance(n, torch.fx.Node) for n in (x, residual)) or not _alike(values):
            continue
        region = next(r for r in report.regions if r.kind == "fff::region" and r.index == call.args[1])
        names = ["w_in", "b_in", "w_out", "b_out"] if op_name(tree) == "tree_ffn" else \
            ["node_w", "node_b", "w1", "b1", "w2", "b2"]
        arguments = (x, residual, norm.kind, weight, bias, norm.eps, op_name(tree),
                     [tree_args[name] for name in names], tree_args["depth"], tree_args["activation"], "pre")
        report.untake(region)
        chain = [n for n in (tree, dropout, add) if n is not None]
        report.take("fff::tree_sublayer", [norm.kind, op_name(tree)], region.ops + chain, pipeline=pipeline)
        with gm.graph.inserting_before(add):
            sublayer = gm.graph.call_function(torch.ops.fff.tree_sublayer.default, arguments)
        sublayer.meta["example_value"] = _value(add)
        add.replace_all_uses_with(sublayer)
        for node in (add, dropout, tree, tree.args[0], call):
            if node is not None:
                gm.graph.erase_node(node)
        taken = True
    if taken:
        gm.graph.lint()
        gm.recompile()

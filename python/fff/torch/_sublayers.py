"""Pre-LN tree sublayers, `residual + tree(norm(x))`, where the tree is one
of fff's custom ops: each becomes one call of fff::tree_sublayer, which fff
compiles as one fused unit."""

import inspect

import torch

from ._nodes import FLOATS as _FLOATS, TREE_OPS, example_value as _value, op_name, writes_unseen


def _is_eval_dropout(node):
    """A dropout that is the identity: eval mode, or p = 0."""
    if op_name(node) != "dropout" or node.op != "call_function":
        return False
    bound = _bound(node, inspect.signature(torch.nn.functional.dropout))
    return bound is not None and (bound["training"] is False or bound["p"] == 0) and not bound["inplace"]


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
    it (a pre-LN FFN sublayer, `residual + tree(norm(x))`, with an eval-mode
    dropout after the tree or not): its arguments, and the nodes it stands
    for; None where they are not such a sublayer."""
    norm, users = tree.args[0], list(tree.users)
    if not isinstance(norm, torch.fx.Node) or norm.target not in _SUBLAYER_NORMS or \
            len(norm.users) != 1 or len(users) != 1:
        return None
    add, dropout = users[0], None
    if _is_eval_dropout(add) and len(add.users) == 1:
        # ViT's `residual + dropout(ffn(...))`, as eval mode runs it.
        dropout, add = add, next(iter(add.users))
    ffn = dropout or tree
    if op_name(add) not in ("add", "iadd") or len(add.args) != 2 or add.kwargs or ffn not in add.args:
        return None
    residual = add.args[1] if add.args[0] is ffn else add.args[0]
    if op_name(add) == "iadd" and add.args[0] is residual and not writes_unseen(add):
        return None  # `residual += ...` writes into a tensor someone else holds
    norm_args = _bound(norm, _NORM_SIGNATURES[_SUBLAYER_NORMS[norm.target]])
    tree_args = _bound(tree, _schema_signature(tree.target))
    if norm_args is None or tree_args is None or \
            not all(isinstance(n, torch.fx.Node) for n in (residual, norm_args["input"])):
        return None
    x, result = _value(norm_args["input"]), _value(add)
    eps = norm_args["eps"]
    if eps is None and isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
        # rms_norm's default: the machine epsilon of the type torch computes
        # x's dtype in (f32 for f16 and bf16, as ATen's opmath_type).
        eps = torch.finfo(torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype).eps
    if not isinstance(eps, (int, float)):
        return None
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
                 float(eps), op_name(tree), [tree_args[name] for name in names], tree_args["depth"],
                 tree_args["activation"])
    return arguments, tuple(n for n in (norm, tree, dropout, add) if n is not None)


def take_tree_sublayers(gm, report):
    """Puts fff::tree_sublayer, one fff call, in place of each pre-LN FFN
    sublayer whose FFN is a tree op: its norm, layer and residual add then
    run as one fused unit, and torch runs nothing between them."""
    taken = False
    for tree in [n for n in gm.graph.nodes if op_name(n) in TREE_OPS.values()]:
        found = _tree_sublayer(tree)
        if found is None:
            continue
        taken = True
        arguments, nodes = found
        norm, add = nodes[0], nodes[-1]
        report.take("fff::tree_sublayer", [_SUBLAYER_NORMS[norm.target], op_name(tree)], nodes)
        with gm.graph.inserting_before(add):
            call = gm.graph.call_function(torch.ops.fff.tree_sublayer.default, arguments)
        call.meta["example_value"] = _value(add)
        add.replace_all_uses_with(call)
        for node in reversed(nodes):
            gm.graph.erase_node(node)
    if taken:
        gm.graph.lint()
        gm.recompile()

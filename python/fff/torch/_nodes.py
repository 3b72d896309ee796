"""Dynamo's graph nodes as the backend sees them: the names the report
gives them, their example values, fff's own calls among them."""

import torch

FLOATS = (torch.float32, torch.float16, torch.bfloat16)

# fff's own custom ops, by the name the report gives them.
TREE_OPS = {"fff.tree_ffn.default": "tree_ffn", "fff.leaf_tree_ffn.default": "leaf_tree_ffn"}
SUBLAYER_OP = "fff.tree_sublayer.default"
REGION_OP = "fff.region.default"
FFF_CALLS = {*TREE_OPS, SUBLAYER_OP, REGION_OP}


def op_name(node):
    """A node's op as the report names it: `layer_norm`, `add`, `linear`."""
    if node.op == "call_method":
        return node.target
    if node.op == "call_module":
        return f"module {node.target}"
    if isinstance(node.target, torch._ops.OpOverload):
        if str(node.target) == SUBLAYER_OP:
            return "tree_sublayer"
        if str(node.target) == REGION_OP:
            return "region"
        return TREE_OPS.get(str(node.target), str(node.target))
    return getattr(node.target, "__name__", str(node.target)).lstrip("_")


def is_fff_call(node):
    return node.op == "call_function" and str(node.target) in FFF_CALLS


def example_value(node):
    """The value Dynamo traced `node` with (a fake tensor, a SymInt...)."""
    return node.meta.get("example_value", node.meta.get("val"))

"""fff's own custom ops (fff::tree_ffn, fff::leaf_tree_ffn,
fff::tree_sublayer) in an inference graph whose code runs on the GPU
pipeline: each becomes an fff::region call whose entry runs the op's code
at the graph's placement (_devices.py). On CUDA that is what the ops
would do on their own (for the tree layers) or could not (the sublayer,
which eager torch runs on the CPU); under emulate_cuda, where the graph's
tensors are on the CPU, it is how the ops reach the emulator."""

import dataclasses
import operator

import torch

from ._layers import leaf_tree_ffn_on, tree_ffn_on, tree_sublayer_on
from ._nodes import TREE_OPS, custom_op_arguments, example_value, op_name
from ._regions import register

_RUN_ON = {"tree_ffn": tree_ffn_on, "leaf_tree_ffn": leaf_tree_ffn_on, "tree_sublayer": tree_sublayer_on}


@dataclasses.dataclass(frozen=True)
class _Input:
    """Where the region's input `index` goes in the op's arguments."""

    index: int


def _bind(template, inputs):
    if isinstance(template, _Input):
        return inputs[template.index]
    if isinstance(template, (list, tuple)):
        return type(template)(_bind(t, inputs) for t in template)
    if isinstance(template, dict):
        return {k: _bind(v, inputs) for k, v in template.items()}
    return template


@dataclasses.dataclass(frozen=True)
class PlacedOp:
    """An fff::region entry: the custom op `op` on arguments `args` and
    `kwargs`, whose tensors are the region's inputs (_Input), run at
    `placement`."""

    op: object  # the custom op, as the graph calls it: its fake
    name: str
    args: tuple
    kwargs: dict
    placement: object
    norm = None  # not a trained norm (_regions.exact_norm)

    def module(self, *inputs):
        return [self.op(*_bind(self.args, inputs), **_bind(self.kwargs, inputs))]

    def __call__(self, inputs):
        return [_RUN_ON[self.name](self.placement, *_bind(self.args, inputs), **_bind(self.kwargs, inputs))]


def _template(value, inputs):
    """`value` (a node's argument) with each node in it an _Input, the node
    appended to `inputs`."""
    if isinstance(value, torch.fx.Node):
        inputs.append(value)
        return _Input(len(inputs) - 1)
    if isinstance(value, (list, tuple)):
        return type(value)(_template(v, inputs) for v in value)
    if isinstance(value, dict):
        return {k: _template(v, inputs) for k, v in value.items()}
    return value


def place_fff_ops(gm, placement, report):
    """Puts an fff::region call running at `placement` in place of each call
    of fff's own ops in `gm`; the tree layers are reported here (the
    sublayers were when they were taken)."""
    placed = False
    ops = {*TREE_OPS.values(), "tree_sublayer"}
    for node in [n for n in gm.graph.nodes if n.op == "call_function" and op_name(n) in ops]:
        name = op_name(node)
        if name in TREE_OPS.values():
            report.take(f"fff::{name}", [name], [node], pipeline=placement.pipeline)
        inputs = []
        # By name, as the ops' schemas give them (Dynamo's graph holds them
        # as the model passed them); the placement says where the op runs,
        # whatever its emulate_cuda.
        keywords = {k: v for k, v in custom_op_arguments(node).items() if k != "emulate_cuda"}
        kwargs = _template(keywords, inputs)
        index = register(PlacedOp(node.target, name, (), kwargs, placement))
        with gm.graph.inserting_before(node):
            call = gm.graph.call_function(torch.ops.fff.region.default, (inputs, index))
            result = gm.graph.call_function(operator.getitem, (call, 0))
        result.meta["example_value"] = example_value(node)
        node.replace_all_uses_with(result)
        gm.graph.erase_node(node)
        placed = True
    if placed:
        gm.graph.lint()
        gm.recompile()

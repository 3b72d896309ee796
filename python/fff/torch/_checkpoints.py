"""torch.utils.checkpoint in Dynamo's graphs. Dynamo traces each
checkpointed call into a subgraph of its own, called through
torch.ops.higher_order.tag_activation_checkpoint; AOTAutograd inlines it
and tags its nodes to be recomputed in the backward. The backend's passes
see one graph's nodes, so they reach a checkpointed block's norms only
through these two functions."""

import operator

import torch

_CHECKPOINT = getattr(torch.ops.higher_order, "tag_activation_checkpoint", None)


def _checkpoint_calls(gm):
    """(call, body) for each checkpointed call in `gm`."""
    for node in list(gm.graph.find_nodes(op="call_function", target=_CHECKPOINT)) if _CHECKPOINT else ():
        body = node.args[0]
        if isinstance(body, torch.fx.Node) and body.op == "get_attr":
            yield node, getattr(gm, body.target)


def checkpointed_bodies(gm):
    """The subgraphs (GraphModules) that `gm`'s checkpointed calls run. A
    training graph's norms in them become trained ops there: AOTAutograd
    then recomputes fff's forward call in the backward, as it recomputes
    the block's other ops."""
    return [body for _, body in _checkpoint_calls(gm)]


def inline_checkpoints(gm):
    """Puts each checkpointed call's body in place of the call, where
    nothing needs a gradient (an inference graph): checkpointing then
    only runs the body. A call whose result is read whole, or whose body
    reads attributes of its own (a nested subgraph), stays a call."""
    changed = False
    for call, body in _checkpoint_calls(gm):
        taken_apart = all(u.op == "call_function" and u.target is operator.getitem for u in call.users)
        if not taken_apart or any(n.op == "get_attr" for n in body.graph.nodes):
            continue
        values = dict(zip(body.graph.find_nodes(op="placeholder"), call.args[1:]))
        with gm.graph.inserting_before(call):
            results = gm.graph.graph_copy(body.graph, values)
        results = results if isinstance(results, (tuple, list)) else (results,)
        for user in list(call.users):
            user.replace_all_uses_with(results[user.args[1]])
            gm.graph.erase_node(user)
        attribute = call.args[0]
        gm.graph.erase_node(call)
        if not attribute.users:
            gm.graph.erase_node(attribute)
            delattr(gm, attribute.target)
        changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()

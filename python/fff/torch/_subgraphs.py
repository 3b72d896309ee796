"""Subgraphs that Dynamo calls through higher-order ops: a checkpointed
call (torch.utils.checkpoint, through tag_activation_checkpoint) and a
nested compile region (torch.compiler.nested_compile_region, through
invoke_subgraph, one subgraph for every call of one function). AOTAutograd
inlines a checkpointed call, tagging its nodes to be recomputed in the
backward, and differentiates a nested region once for all its calls. The
backend's passes see one graph's nodes, so they reach the norms in these
subgraphs only through the two functions here."""

import operator

import torch

# Each higher-order op, with the index of its first operand: invoke_subgraph
# takes an identifier after its subgraph.
_FIRST_OPERAND = {getattr(torch.ops.higher_order, name): index
                  for name, index in (("tag_activation_checkpoint", 1), ("invoke_subgraph", 2))
                  if hasattr(torch.ops.higher_order, name)}


def _subgraph_calls(gm):
    """(call, subgraph) for each call of a subgraph in `gm`."""
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in _FIRST_OPERAND:
            body = node.args[0]
            if isinstance(body, torch.fx.Node) and body.op == "get_attr":
                yield node, getattr(gm, body.target)


def called_subgraphs(gm, found=None):
    """The subgraphs (GraphModules) that `gm` calls, and those they call,
    each once. A training graph's norms in them become trained ops there:
    AOTAutograd then recomputes a checkpointed block's fff calls in the
    backward, as it recomputes the block's other ops."""
    found = {} if found is None else found
    for _, body in _subgraph_calls(gm):
        if id(body) not in found:
            found[id(body)] = body
            called_subgraphs(body, found)
    return list(found.values())


def inline_subgraphs(gm):
    """Puts each subgraph call's body in place of the call, where nothing
    needs a gradient (an inference graph): a checkpointed call then only
    runs its body, and a nested region's calls each run theirs. A call
    whose result is read whole, or whose body reads attributes of its own
    (other than the subgraphs it calls, inlined first), stays a call."""
    changed = False
    for call, body in _subgraph_calls(gm):
        inline_subgraphs(body)
        taken_apart = all(u.op == "call_function" and u.target is operator.getitem for u in call.users)
        if not taken_apart or any(n.op == "get_attr" for n in body.graph.nodes):
            continue
        operands = call.args[_FIRST_OPERAND[call.target]:]
        values = dict(zip(body.graph.find_nodes(op="placeholder"), operands))
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
            if not any(n.op == "get_attr" and n.target == attribute.target for n in gm.graph.nodes):
                delattr(gm, attribute.target)
        changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()

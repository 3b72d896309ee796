"""Fusion in training graphs' backward: the residual stream's gradient that
the backward graph adds to a trained norm's dx (a pre-LN block's
dh = dresidual + dx) is added by fff's backward kernel as it writes dx, so
that dx is never stored and read back.

AOTAutograd traces the trained norms' backward ops (_training.py) into the
backward graph as opaque calls; Inductor then runs this pass over the graph
after its own post-grad passes (config.post_grad_custom_post_pass), where
the graph is ATen ops. A call whose dx has one user, an aten.add of a
tensor of dx's shape, dtype and device, becomes one call with that tensor
as its `residual_grad`. The add is exact in one rounding either way, so
the result has the bits of the unfused ops."""

import hashlib
import operator

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

_BACKWARD_OPS = ("layer_norm_train_backward", "rms_norm_train_backward")


def _backward_ops():
    return {getattr(torch.ops.fff, name).default for name in _BACKWARD_OPS}


def _value(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _alike(a, b):
    """Whether tensors a and b (fake values) are of one shape, dtype and
    device."""
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and \
        a.dtype == b.dtype and a.device == b.device


def _residual_add(dx):
    """(the add, the other addend) where `dx`'s one user adds to it a tensor
    like it, with alpha 1; None otherwise."""
    if len(dx.users) != 1:
        return None
    add = next(iter(dx.users))
    if add.op != "call_function" or add.target is not torch.ops.aten.add.Tensor or add.kwargs.get("alpha", 1) != 1 \
            or len(add.args) != 2 or add.args[0] is add.args[1]:
        return None
    other = add.args[1] if add.args[0] is dx else add.args[0]
    if not _alike(_value(other), _value(dx)) or not _alike(_value(add), _value(dx)):
        return None
    return add, other


def _keywords(call):
    """The arguments of the op `call` makes, all by name: the graph may pass
    any of them by position (emulate_cuda, after residual_grad)."""
    names = [argument.name for argument in call.target._schema.arguments]
    return {**dict(zip(names, call.args)), **call.kwargs}


def _with_residual_grad(call, residual_grad):
    """The arguments of `call` with `residual_grad` given: in its place
    where the call passes arguments after it by position (emulate_cuda),
    else as a keyword, so that the call keeps the form Inductor saw."""
    names = [argument.name for argument in call.target._schema.arguments]
    index = names.index("residual_grad")
    if len(call.args) > index:
        return call.args[:index] + (residual_grad,) + call.args[index + 1:], dict(call.kwargs)
    return call.args, {**call.kwargs, "residual_grad": residual_grad}


def fuse_residual_grads(graph):
    """Gives each trained norm's backward call in `graph` the residual
    gradient added to its dx, where there is one; returns how many it
    fused."""
    ops, fused = _backward_ops(), 0
    order = {node: i for i, node in enumerate(graph.nodes)}
    for call in list(graph.nodes):
        if call.op != "call_function" or call.target not in ops or _keywords(call).get("residual_grad") is not None:
            continue
        getters = [u for u in call.users if u.op == "call_function" and u.target is operator.getitem]
        if len(getters) != len(call.users):
            continue
        dx = next((g for g in getters if g.args[1] == 0), None)
        found = _residual_add(dx) if dx is not None else None
        if found is None:
            continue
        add, other = found
        # The call moves to where both it and the other addend are defined;
        # its other results' users must all come after that.
        anchor = other if order[other] > order[call] else call
        readers = [user for getter in getters for user in getter.users if user is not add]
        if any(order[user] <= order[anchor] for user in readers):
            continue
        with graph.inserting_after(anchor):
            accumulating = graph.call_function(call.target, *_with_residual_grad(call, other))
        accumulating.meta.update(call.meta)
        last = accumulating
        for getter in getters:
            with graph.inserting_after(last):
                replacement = graph.call_function(operator.getitem, (accumulating, getter.args[1]))
            replacement.meta.update(getter.meta)
            getter.replace_all_uses_with(replacement)
            last = replacement
        # The add's users now read the call's first result, dh.
        dh = next(u for u in accumulating.users if u.args[1] == 0)
        add.replace_all_uses_with(dh)
        graph.erase_node(add)
        for getter in getters:
            graph.erase_node(getter)
        graph.erase_node(call)
        fused += 1
        order = {node: i for i, node in enumerate(graph.nodes)}
    if fused:
        graph.lint()
    return fused


class ResidualGradFusion(CustomGraphPass):
    """fuse_residual_grads as Inductor's post-grad custom pass; its uuid is
    this file's, so that Inductor's graph cache holds what it compiled."""

    def __call__(self, graph):
        fuse_residual_grads(graph)

    def uuid(self):
        with open(__file__, "rb") as source:
            return hashlib.sha256(source.read()).hexdigest()


def with_backward_fusion(patches):
    """Inductor's config `patches` with ResidualGradFusion run after any
    post-grad pass of the user's own."""
    patches = dict(patches)
    user = patches.get("post_grad_custom_post_pass")
    ours = ResidualGradFusion()
    if user is None:
        patches["post_grad_custom_post_pass"] = ours
    else:
        patches["post_grad_custom_post_pass"] = [*user, ours] if isinstance(user, (list, tuple)) else [user, ours]
    return patches

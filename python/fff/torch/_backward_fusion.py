"""Fusion in training graphs' backward: the pointwise work next to a trained
norm's backward joins fff's kernel, so that its values are never stored and
read back.

- The residual stream's gradient that the backward graph adds to a trained
  norm's dx (a pre-LN block's dh = dresidual + dx) is added by the kernel
  as it writes dx. A call whose dx has one user, an aten.add of a tensor
  of dx's shape, dtype and device, becomes one call with that tensor as
  its `residual_grad`.
- A dropout's backward that computes the norm's dy (dropout(norm(x)):
  BERT's embeddings, T5's final norm), dy = grad * (keep.to(dtype) *
  scale), is applied by the kernel as it reads dy: the call takes `grad`,
  the keep mask as `dy_keep` and the scale as `dy_scale`, where dy has no
  other reader and the mask is a bool tensor of dy's shape.

AOTAutograd traces the trained norms' backward ops (_training.py) into the
backward graph as opaque calls; Inductor then runs this pass over the graph
after its own post-grad passes (config.post_grad_custom_post_pass), where
the graph is ATen ops. Either fusion computes what Inductor's code for the
unfused ops does (the add in one rounding; the mask's product in f32, then
one rounding to dy's dtype), so the result has the unfused ops' bits."""

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


def _scalar(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _product(node):
    """The two factors of `node` where it is an aten.mul of two values;
    None otherwise."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function" or \
            node.target is not torch.ops.aten.mul.Tensor or len(node.args) != 2 or node.kwargs:
        return None
    return node.args


def _keep_factor(node, like):
    """(mask, scale) where `node` is mask.to(like's dtype) * scale (in
    either order, or the converted mask alone, scale 1) and the mask is a
    bool tensor of like's shape and device; None otherwise."""
    factors = _product(node)
    scale = 1.0
    if factors is not None:
        converted, scale = factors if _scalar(factors[1]) else factors[::-1]
        if not _scalar(scale):
            return None
    else:
        converted = node
    if not isinstance(converted, torch.fx.Node) or converted.op != "call_function" or \
            converted.target is not torch.ops.prims.convert_element_type.default or \
            converted.args[1:] != (_value(like).dtype,):
        return None
    mask, value = converted.args[0], _value(converted.args[0])
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool or value.shape != _value(like).shape or \
            value.device != _value(like).device:
        return None
    return mask, float(scale)


def _masked(dy):
    """(grad, mask, scale) where `dy`, read by one node, is grad * (mask's
    keep factor) (_keep_factor) with grad like dy; None otherwise."""
    factors = _product(dy)
    if factors is None or len(dy.users) != 1:
        return None
    for grad, factor in (factors, factors[::-1]):
        keep = _keep_factor(factor, dy) if isinstance(grad, torch.fx.Node) else None
        if keep is not None and _alike(_value(grad), _value(dy)):
            return (grad, *keep)
    return None


def _prepared(call, scale):
    """Whether fff runs the backward of `call` with a dropout's mask by
    `scale` on dy: compiled and checked now, so that the fused graph never
    calls what fff refuses."""
    from ._training import Unsupported, prepare_masked_dy

    arguments = _keywords(call)
    kind = "layer_norm" if call.target is torch.ops.fff.layer_norm_train_backward.default else "rms_norm"
    try:
        prepare_masked_dy(kind, _value(arguments["x"]), _value(arguments["weight"]),
                          bool(arguments.get("has_bias", False)), arguments["normalized_ndim"], arguments["eps"],
                          bool(arguments.get("emulate_cuda", False)), scale)
    except Unsupported:
        return False
    return True


def _erase_if_unused(graph, nodes):
    for node in nodes:
        if isinstance(node, torch.fx.Node) and not node.users:
            graph.erase_node(node)


def fuse_dropout_masks(graph):
    """Gives each trained norm's backward call in `graph` whose dy is a
    dropout's backward (_masked) that dropout's grad, mask and scale;
    returns how many it fused."""
    ops, fused = _backward_ops(), 0
    for call in list(graph.nodes):
        if call.op != "call_function" or call.target not in ops:
            continue
        arguments = _keywords(call)
        dy = arguments["dy"]
        if arguments.get("dy_keep") is not None:
            continue
        found = _masked(dy) if isinstance(dy, torch.fx.Node) else None
        if found is None or not _prepared(call, found[2]):
            continue
        grad, mask, scale = found
        factor = next(a for a in dy.args if a is not grad)
        if call.args:
            call.args = (grad,) + call.args[1:]
        call.kwargs = {**call.kwargs, **({"dy": grad} if "dy" in call.kwargs else {}), "dy_keep": mask,
                       "dy_scale": scale}
        graph.erase_node(dy)
        _erase_if_unused(graph, [factor, *(factor.args if _product(factor) else ())])
        fused += 1
    if fused:
        graph.lint()
    return fused


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


class NormBackwardFusion(CustomGraphPass):
    """fuse_dropout_masks, then fuse_residual_grads, as Inductor's post-grad
    custom pass; its uuid is this file's, so that Inductor's graph cache
    holds what it compiled."""

    def __call__(self, graph):
        fuse_dropout_masks(graph)
        fuse_residual_grads(graph)

    def uuid(self):
        with open(__file__, "rb") as source:
            return hashlib.sha256(source.read()).hexdigest()


def with_backward_fusion(patches):
    """Inductor's config `patches` with NormBackwardFusion run after any
    post-grad pass of the user's own."""
    patches = dict(patches)
    user = patches.get("post_grad_custom_post_pass")
    ours = NormBackwardFusion()
    if user is None:
        patches["post_grad_custom_post_pass"] = ours
    else:
        patches["post_grad_custom_post_pass"] = [*user, ours] if isinstance(user, (list, tuple)) else [user, ours]
    return patches

"""Training graphs: each norm becomes a call of its trained op
(fff::layer_norm_train, fff::rms_norm_train; _training.py), whose backward
runs on fff's kernels. The fallback then compiles the graph, forward and
backward (Inductor through AOTAutograd), with these calls opaque in both."""

import operator

import torch

from ._devices import CPU
from ._dynamic_floats import restart_with_constant_floats
from ._nodes import FLOATS, bound_arguments, example_value, static_extents
from ._sublayers import _NORM_SIGNATURES, _SUBLAYER_NORMS
from ._training import Unsupported, executable, parameter_dtype, train_op

_TRAINED_OPS = {"fff.layer_norm_train.default", "fff.rms_norm_train.default"}


def is_trained_norm(node):
    """A call of a trained norm's op, or the getitem that takes its y."""
    if node.op == "call_function" and node.target is operator.getitem:
        node = node.args[0]
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and str(node.target) in _TRAINED_OPS


def _parameter_fits(parameter, x, normalized_shape, mixed=False):
    """Whether `parameter` (a node, or None) is one fff's trained norm of x
    takes: of the normalized shape, and of x's dtype, or, where `mixed`, f32
    for an f16 or bf16 x (torch's mixed-type norms: _training._mixed)."""
    if parameter is None:
        return True
    value = example_value(parameter) if isinstance(parameter, torch.fx.Node) else parameter
    dtypes = (x.dtype, torch.float32) if mixed and x.dtype in (torch.float16, torch.bfloat16) else (x.dtype,)
    return isinstance(parameter, torch.fx.Node) and isinstance(value, torch.Tensor) and \
        value.dtype in dtypes and tuple(value.shape) == normalized_shape


def replace_with_trained_norm(gm, node, results, kind, x, weight, bias, normalized_ndim, eps, ops, report,
                              placement=CPU, mixed=False):
    """Puts the trained op of a `kind` norm of `x`, its code run at
    `placement`, in place of `node`, whose results (`results`: the node
    itself, or the getitems that take its one result) it gives; False, with
    the reason reported for `ops`, where fff does not train it. `mixed`
    says that `node` computes an f16 or bf16 norm with f32 parameters as
    torch's mixed-type norms do (in f32, y rounded once), so that f32
    parameters of such an x are taken as they are."""
    value, result = example_value(x), example_value(results[0])
    normalized_shape = static_extents(value.shape[value.dim() - normalized_ndim:]) \
        if isinstance(value, torch.Tensor) else None
    reason = None
    if not isinstance(value, torch.Tensor) or value.dtype not in FLOATS:
        reason = "it normalizes a value that is not an f32, f16 or bf16 tensor"
    elif not isinstance(result, torch.Tensor) or result.dtype != value.dtype:
        # CUDA's autocast runs norms in f32 whatever their input; fff's ops
        # give x's dtype, and autocast does not cast custom ops.
        reason = (f"it gives {getattr(result, 'dtype', result)} for a {value.dtype} input (autocast's cast), and "
                  f"fff's trained norms give their input's dtype")
    elif normalized_shape is None:
        reason = "its normalized extents are dynamic"
    elif not all(_parameter_fits(p, value, normalized_shape, mixed) for p in (weight, bias)):
        reason = "its weight or bias is not of its normalized shape, or of its input's dtype" + \
            (" or f32" if mixed else "")
    else:
        try:
            # The ops' own rule for the parameters' dtype (one for both, a
            # weight where it is not x's), then the executable's.
            parameters = [None if p is None else example_value(p) for p in (weight, bias)]
            executable(kind, value.dtype, normalized_shape, weight is not None, bias is not None, eps, placement,
                       parameter_dtype(value, *parameters))
        except (Unsupported, ValueError) as refusal:
            reason = str(refusal)
    if reason:
        for n in ops:
            report.leave(n, f"its norm was not trained by fff: {reason}")
        return False
    arguments = (x, weight, bias, normalized_ndim, eps) if kind == "layer_norm" else (x, weight, normalized_ndim, eps)
    emulated = {"emulate_cuda": True} if placement.kind == "emulated" else {}
    with gm.graph.inserting_before(node):
        call = gm.graph.call_function(train_op(kind), arguments, emulated)
        y = gm.graph.call_function(operator.getitem, (call, 0)) if kind == "layer_norm" else call
    y.meta["example_value"] = result
    for replaced in results:
        replaced.replace_all_uses_with(y)
        if replaced is not node:
            gm.graph.erase_node(replaced)
    gm.graph.erase_node(node)
    report.take(f"fff::{kind}_train", [kind], ops, pipeline=placement.pipeline)
    report.take_backward(f"fff::{kind}_train_backward", [f"{kind}_grad"], ops, pipeline=placement.pipeline)
    return True


def _explicit_norm(node):
    """(kind, x, weight, bias, normalized_ndim, eps) of a call of
    F.layer_norm, F.rms_norm or torch.rms_norm whose arguments fff's
    trained ops take; None otherwise."""
    kind = _SUBLAYER_NORMS.get(node.target) if node.op == "call_function" else None
    arguments = bound_arguments(node, _NORM_SIGNATURES[kind]) if kind else None
    if arguments is None or not isinstance(arguments["input"], torch.fx.Node):
        return None
    x = example_value(arguments["input"])
    shape = static_extents(arguments["normalized_shape"])
    if not isinstance(x, torch.Tensor) or x.dtype not in FLOATS or not shape or len(shape) > x.dim() or \
            tuple(x.shape[x.dim() - len(shape):]) != shape:
        return None
    eps = arguments["eps"]
    if eps is None:
        # rms_norm's default: the machine epsilon of the type torch computes
        # x's dtype in (f32 for f16 and bf16).
        eps = torch.finfo(torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype).eps
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        restart_with_constant_floats([eps])
        return None
    weight, bias = arguments["weight"], arguments.get("bias")
    if not (_parameter_fits(weight, x, shape, mixed=True) and _parameter_fits(bias, x, shape, mixed=True)):
        return None
    return kind, arguments["input"], weight, bias, len(shape), float(eps)


def take_trained_norms(gm, report, placement=CPU):
    """Puts the trained op, its code run at `placement`, in place of each
    call of a norm function that fff trains; returns the calls it left,
    each reported with its reason."""
    changed, refused = False, set()
    for node in list(gm.graph.nodes):
        if not (node.op == "call_function" and node.target in _SUBLAYER_NORMS):
            continue
        found = _explicit_norm(node)
        if found is None:
            report.leave(node, "its norm was not trained by fff: its arguments are not ones fff's norms take "
                         "(an f32, f16 or bf16 input, static normalized extents, parameters like it or f32 "
                         "ones, a constant eps)")
            refused.add(node)
            continue
        kind, x, weight, bias, normalized_ndim, eps = found
        if replace_with_trained_norm(gm, node, [node], kind, x, weight, bias, normalized_ndim, eps, [node], report,
                                     placement, mixed=True):
            changed = True
        else:
            refused.add(node)
    if changed:
        gm.graph.lint()
        gm.recompile()
    return refused

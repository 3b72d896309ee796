"""What the tree layers' torch ops require of their arguments: one-line
ValueErrors for wrong shapes, dtypes, depths and activations, checked
before any code is compiled, forward and backward alike (the fake kernels
check the same)."""

import torch

from ._kernels import ELEMENT

ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "silu", "identity")


def check_element(name, tensor, like):
    if tensor.dtype != like.dtype:
        raise ValueError(f"{name} is {tensor.dtype}, but x is {like.dtype}: a tree layer's tensors share one dtype")
    if tensor.device != like.device:
        raise ValueError(f"{name} is on {tensor.device}, but x is on {like.device}")


# The deepest tree the dialect takes (kMaxTreeDepth in FFFOps.cpp).
MAX_DEPTH = 20


def check_depth(op, depth, min_depth):
    if not min_depth <= depth <= MAX_DEPTH:
        raise ValueError(f"{op}'s depth must be in [{min_depth}, {MAX_DEPTH}], got {depth}")


def check_extents(op, **extents):
    """The extents a tree layer needs at least one of (the dialect's shape
    contract: an input row, an output row, a tree, a leaf's hidden unit)."""
    for name, extent in extents.items():
        if extent < 1:
            raise ValueError(f"{op}'s {name} is {extent}: it must be at least 1")


def check_common(op, x, depth, activation, min_depth):
    """What both tree ops require of x's dtype, the depth and the activation."""
    if x.dtype not in ELEMENT and x.dtype != torch.float64:
        raise ValueError(f"{op} takes f32, f16, bf16 or f64 tensors, not {x.dtype}")
    activation_name(activation)
    check_depth(op, depth, min_depth)


def check_tree(x, w_in, b_in, w_out, b_out, depth, activation, zero_goes_right=False):
    check_common("fff::tree_ffn", x, depth, activation, min_depth=0)
    if not isinstance(zero_goes_right, bool):
        raise ValueError(f"fff::tree_ffn's zero_goes_right must be True or False, not {zero_goes_right!r}")
    nodes = 2 ** (depth + 1) - 1
    if x.dim() < 1 or w_in.dim() != 3 or w_out.dim() != 3:
        raise ValueError("fff::tree_ffn takes x [..., Din], w_in [K, N, Din] and w_out [K, N, Dout]")
    trees, din = w_in.shape[0], w_in.shape[2]
    check_extents("fff::tree_ffn", **{"tree count K": trees, "input width Din": din,
                                       "output width Dout": w_out.shape[2]})
    if tuple(w_in.shape[:2]) != (trees, nodes) or tuple(w_out.shape[:2]) != (trees, nodes):
        raise ValueError(f"a depth-{depth} tree has {nodes} nodes: w_in is {list(w_in.shape)} and w_out is "
                         f"{list(w_out.shape)}, expected [K, {nodes}, ...]")
    if x.shape[-1] != din:
        raise ValueError(f"x rows are {x.shape[-1]} wide, but w_in takes {din}")
    if b_in is not None and tuple(b_in.shape) != (trees, nodes):
        raise ValueError(f"b_in is {list(b_in.shape)}, expected [{trees}, {nodes}]")
    if b_out is not None and tuple(b_out.shape) != (w_out.shape[2],):
        raise ValueError(f"b_out is {list(b_out.shape)}, expected [{w_out.shape[2]}]")
    for name, t in (("w_in", w_in), ("b_in", b_in), ("w_out", w_out), ("b_out", b_out)):
        if t is not None:
            check_element(name, t, x)


def check_leaf(x, node_w, node_b, w1, b1, w2, b2, depth, activation):
    check_common("fff::leaf_tree_ffn", x, depth, activation, min_depth=1)
    if x.dim() < 1 or w1.dim() != 3 or w2.dim() != 3:
        raise ValueError("fff::leaf_tree_ffn takes x [..., Din], w1 [L, Din, W] and w2 [L, W, Dout]")
    leaves, din = 2 ** depth, x.shape[-1]
    width, dout = w1.shape[-1], w2.shape[-1]
    check_extents("fff::leaf_tree_ffn", **{"input width Din": din, "leaf width W": width, "output width Dout": dout})
    expected = {"node_w": (leaves - 1, din), "node_b": (leaves - 1,), "w1": (leaves, din, width),
                "b1": (leaves, width), "w2": (leaves, width, dout), "b2": (leaves, dout)}
    for name, t in (("node_w", node_w), ("node_b", node_b), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)):
        if tuple(t.shape) != expected[name]:
            raise ValueError(f"a depth-{depth} leaf tree over rows {din} wide takes {name} "
                             f"{list(expected[name])}, got {list(t.shape)}")
        check_element(name, t, x)


def check_sublayer(x, residual, norm, norm_weight, norm_bias, layer, weights, depth, activation, order):
    """What fff::tree_sublayer requires: the tree op's own checks on x (or
    the normalized x), a norm's parameters of its rows' width, a residual
    shaped like the layer's result."""
    if x.dtype not in ELEMENT:
        raise ValueError(f"fff::tree_sublayer takes f32, f16 or bf16 tensors, not {x.dtype}")
    if order not in ("pre", "post"):
        raise ValueError(f"fff::tree_sublayer's order is 'pre' or 'post', not '{order}'")
    if norm not in ("layer_norm", "rms_norm"):
        raise ValueError(f"fff::tree_sublayer's norm is layer_norm or rms_norm, not '{norm}'")
    if norm == "rms_norm" and norm_bias is not None:
        raise ValueError("rms_norm takes no bias")
    counts = {"tree_ffn": 4, "leaf_tree_ffn": 6}
    if layer not in counts:
        raise ValueError(f"fff::tree_sublayer's layer is tree_ffn or leaf_tree_ffn, not '{layer}'")
    if len(weights) != counts[layer]:
        raise ValueError(f"{layer} takes {counts[layer]} weights, got {len(weights)}")
    if layer == "tree_ffn":
        check_tree(x, *weights, depth, activation)
        dout = weights[2].shape[2]
    else:
        check_leaf(x, *weights, depth, activation)
        dout = weights[4].shape[-1]
    width = x.shape[-1] if order == "pre" else dout  # of the rows the norm reads
    for name, t in (("norm_weight", norm_weight), ("norm_bias", norm_bias)):
        if t is not None and (tuple(t.shape) != (width,) or t.dtype != x.dtype):
            raise ValueError(f"{name} is {list(t.shape)} {t.dtype}, expected [{width}] {x.dtype}")
    if tuple(residual.shape) != (*x.shape[:-1], dout) or residual.dtype != x.dtype:
        raise ValueError(f"the residual is {list(residual.shape)} {residual.dtype}, expected "
                         f"{[*x.shape[:-1], dout]} {x.dtype}")
    return dout


def check_output_grad(op, dy, x, shape):
    """What a tree op's backward `op` requires of dy: the forward's output's
    shape, dtype and device."""
    if tuple(dy.shape) != tuple(shape) or dy.dtype != x.dtype or dy.device != x.device:
        raise ValueError(f"{op}'s dy is {list(dy.shape)} {dy.dtype} on {dy.device}, expected {list(shape)} "
                         f"{x.dtype} on {x.device} (the forward's output)")


def activation_name(activation):
    """fff's name for an activation given as a torch module, its class or a
    function."""
    if isinstance(activation, str):
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation '{activation}': expected one of {', '.join(ACTIVATIONS)}")
        return activation
    module = activation() if isinstance(activation, type) else activation
    kind = type(module).__name__ if isinstance(module, torch.nn.Module) else getattr(module, "__name__", "")
    if kind == "GELU":
        return "gelu_tanh" if getattr(module, "approximate", "none") == "tanh" else "gelu"
    names = {"ReLU": "relu", "relu": "relu", "SiLU": "silu", "silu": "silu", "Identity": "identity", "gelu": "gelu"}
    if kind not in names:
        raise ValueError(f"fff has no activation for {kind or module!r}: it takes {', '.join(ACTIVATIONS)}")
    return names[kind]

"""Tree layers in PyTorch: the custom ops fff::tree_ffn,
fff::leaf_tree_ffn and fff::tree_sublayer, run on fff's kernels (CPU JIT,
or CUDA; `*_on` runs them at any _devices.Placement), their
nn.Modules, and converters from the FFF authors' own layers."""

import math

import torch

from .._fff import FFFError
from ._devices import CPU, placement_of_device
from ._ops import direct_op, refuse_forward_mode
from ._kernels import ELEMENT, run_rows, tensor_type, tree_attributes
from ._tree_checks import activation_name, check_depth, check_extents, check_leaf, check_sublayer, check_tree
from ._tree_training import (leaf_tree_ffn_autograd, leaf_tree_ffn_forward, setup_leaf_tree_context,
                             setup_tree_context, setup_tree_sublayer_context, tree_ffn_autograd, tree_ffn_forward,
                             tree_sublayer_autograd)


def _tree_op(element, din, trees, nodes, dout, depth, activation, bias_in, bias_out, zero_goes_right, x="%x"):
    """tree_ffn on the value `x`: (its weights' parameters, the op)."""
    xt, wit, wot = (tensor_type(s, element) for s in [(None, din), (trees, nodes, din), (trees, nodes, dout)])
    bi, bo = (tensor_type(s, element) for s in [(trees, nodes), (dout,)])
    params = [f"%wi: {wit}"] + ([f"%bi: {bi}"] if bias_in else []) + [f"%wo: {wot}"] + \
        ([f"%bo: {bo}"] if bias_out else [])
    operand_in = f"%wi bias(%bi : {bi})" if bias_in else "%wi"
    operand_out = f"%wo bias(%bo : {bo})" if bias_out else "%wo"
    attributes = tree_attributes(depth, activation, zero_goes_right)
    return params, f"fff.tree_ffn {x}, {operand_in}, {operand_out} {attributes} : {xt}, {wit}, {wot}"


def _leaf_op(element, din, width, dout, depth, activation, x="%x"):
    """leaf_tree_ffn on the value `x`: (its weights' parameters, the op)."""
    leaves = 2 ** depth
    shapes = [(leaves - 1, din), (leaves - 1,), (leaves, din, width), (leaves, width), (leaves, width, dout),
              (leaves, dout)]
    names = ["nw", "nb", "w1", "b1", "w2", "b2"]
    types = [tensor_type(s, element) for s in shapes]
    xt = tensor_type((None, din), element)
    return [f"%{n}: {t}" for n, t in zip(names, types)], (
        f"fff.leaf_tree_ffn {x}, {', '.join('%' + n for n in names)} "
        f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>}} : {xt}, {', '.join(types)}")


def _function(name, params, body, result):
    return f"func.func @{name}({', '.join(params)}) -> {result} {{\n{body}  return %y : {result}\n}}\n"


def _tree_text(element, din, trees, nodes, dout, depth, activation, bias_in, bias_out, zero_goes_right):
    params, op = _tree_op(element, din, trees, nodes, dout, depth, activation, bias_in, bias_out, zero_goes_right)
    return _function("tree", [f"%x: {tensor_type((None, din), element)}"] + params, f"  %y = {op}\n",
                     tensor_type((None, dout), element))


def _leaf_text(element, din, width, dout, depth, activation):
    params, op = _leaf_op(element, din, width, dout, depth, activation)
    return _function("leaf", [f"%x: {tensor_type((None, din), element)}"] + params, f"  %y = {op}\n",
                     tensor_type((None, dout), element))


def tree_ffn_on(placement, x, w_in, b_in, w_out, b_out, depth, activation="gelu", zero_goes_right=False):
    """fff::tree_ffn, its code compiled for and run at `placement` (f64
    tensors: in torch ops, on their device)."""
    check_tree(x, w_in, b_in, w_out, b_out, depth, activation, zero_goes_right)
    if x.dtype not in ELEMENT:
        return tree_ffn_forward(x, w_in, b_in, w_out, b_out, depth, activation, zero_goes_right)
    trees, nodes, din = w_in.shape
    dout = w_out.shape[2]
    text = _tree_text(ELEMENT[x.dtype], din, trees, nodes, dout, depth, activation,
                      b_in is not None, b_out is not None, zero_goes_right)
    operands = [t for t in (w_in, b_in, w_out, b_out) if t is not None]
    return run_rows(placement, text, "tree", x, operands, dout)


@direct_op("fff::tree_ffn")
def tree_ffn(x: torch.Tensor, w_in: torch.Tensor, b_in: torch.Tensor | None, w_out: torch.Tensor,
             b_out: torch.Tensor | None, depth: int, activation: str = "gelu",
             emulate_cuda: bool = False, zero_goes_right: bool = False) -> torch.Tensor:
    """UltraFastBERT's tree layer (fff.tree_ffn) on x [..., Din]. With
    `emulate_cuda`, CPU tensors run the GPU's code on fff's PTX emulator
    (the backend's option of that name), forward and backward. With
    `zero_goes_right`, a logit of exactly 0 sends a row right, as the FFF
    authors' inference code does (their training layer, and the default,
    send it left)."""
    return tree_ffn_on(placement_of_device(x.device, emulate_cuda), x, w_in, b_in, w_out, b_out, depth, activation,
                       zero_goes_right)


@tree_ffn.register_fake
def _(x, w_in, b_in, w_out, b_out, depth, activation="gelu", emulate_cuda=False, zero_goes_right=False):
    check_tree(x, w_in, b_in, w_out, b_out, depth, activation, zero_goes_right)
    return x.new_empty((*x.shape[:-1], w_out.shape[2]))


@direct_op("fff::leaf_tree_ffn")
def leaf_tree_ffn(x: torch.Tensor, node_w: torch.Tensor, node_b: torch.Tensor, w1: torch.Tensor,
                  b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor, depth: int,
                  activation: str = "relu", emulate_cuda: bool = False) -> torch.Tensor:
    """The original FFF (fff.leaf_tree_ffn) on x [..., Din]; `emulate_cuda`
    as for tree_ffn (its backward is in torch ops, on any device)."""
    return leaf_tree_ffn_on(placement_of_device(x.device, emulate_cuda), x, node_w, node_b, w1, b1, w2, b2, depth,
                            activation)


def leaf_tree_ffn_on(placement, x, node_w, node_b, w1, b1, w2, b2, depth, activation="relu"):
    """fff::leaf_tree_ffn, its code compiled for and run at `placement`
    (f64 tensors: in torch ops, on their device)."""
    check_leaf(x, node_w, node_b, w1, b1, w2, b2, depth, activation)
    if x.dtype not in ELEMENT:
        return leaf_tree_ffn_forward(x, node_w, node_b, w1, b1, w2, b2, depth, activation)
    dout = w2.shape[-1]
    text = _leaf_text(ELEMENT[x.dtype], x.shape[-1], w1.shape[-1], dout, depth, activation)
    return run_rows(placement, text, "leaf", x, [node_w, node_b, w1, b1, w2, b2], dout)


@leaf_tree_ffn.register_fake
def _(x, node_w, node_b, w1, b1, w2, b2, depth, activation="relu", emulate_cuda=False):
    check_leaf(x, node_w, node_b, w1, b1, w2, b2, depth, activation)
    return x.new_empty((*x.shape[:-1], w2.shape[-1]))


@direct_op("fff::tree_sublayer")
def tree_sublayer(x: torch.Tensor, residual: torch.Tensor, norm: str, norm_weight: torch.Tensor | None,
                  norm_bias: torch.Tensor | None, eps: float, layer: str, weights: list[torch.Tensor | None],
                  depth: int, activation: str, order: str = "pre") -> torch.Tensor:
    """An FFN sublayer whose norm is "layer_norm" or "rms_norm" (no bias)
    and whose FFN is a tree layer (`layer`: "tree_ffn", with weights [w_in,
    b_in, w_out, b_out], or "leaf_tree_ffn", with [node_w, node_b, w1, b1,
    w2, b2]), as one fff call on the CPU:
    - order "pre": residual + layer(norm(x)), one fused unit, the add
      applied as the layer writes each row;
    - order "post": norm(residual + layer(x)), the add read by the norm as
      it loads each row.
    What the torch.compile backend puts in place of the three ops (which
    on a GPU runs it as its own call, _placed_ops.py)."""
    if x.device.type != "cpu" or residual.device.type != "cpu":
        raise FFFError("fff::tree_sublayer runs on the CPU")
    return tree_sublayer_on(CPU, x, residual, norm, norm_weight, norm_bias, eps, layer, weights, depth, activation,
                            order)


def tree_sublayer_on(placement, x, residual, norm, norm_weight, norm_bias, eps, layer, weights, depth, activation,
                     order="pre"):
    """fff::tree_sublayer, its code compiled for and run at `placement`."""
    dout = check_sublayer(x, residual, norm, norm_weight, norm_bias, layer, weights, depth, activation, order)
    element, din = ELEMENT[x.dtype], x.shape[-1]
    tree_input = "%n" if order == "pre" else "%x"
    if layer == "tree_ffn":
        w_in, b_in, w_out, b_out = weights
        params, op = _tree_op(element, din, w_in.shape[0], w_in.shape[1], dout, depth, activation,
                              b_in is not None, b_out is not None, zero_goes_right=False, x=tree_input)
    else:
        params, op = _leaf_op(element, din, weights[2].shape[-1], dout, depth, activation, x=tree_input)
    xt, rt = (tensor_type(s, element) for s in [(None, din), (None, dout)])
    vt = tensor_type((din if order == "pre" else dout,), element)
    norm_params = [f"%norm_g: {vt}"] * (norm_weight is not None) + [f"%norm_b: {vt}"] * (norm_bias is not None)
    affine = (f" scale(%norm_g : {vt})" if norm_weight is not None else "") + \
        (f" bias(%norm_b : {vt})" if norm_bias is not None else "")
    epsilon = f"{{epsilon = {eps:.9e} : f32}}"
    if order == "pre":
        body = (f"  %n = fff.{norm} %x{affine} {epsilon} : {xt}\n"
                f"  %l = {op}\n"
                f"  %y = arith.addf %r, %l : {rt}\n")
    else:
        body = (f"  %l = {op}\n"
                f"  %s = arith.addf %r, %l : {rt}\n"
                f"  %y = fff.{norm} %s{affine} {epsilon} : {rt}\n")
    text = _function("sublayer", [f"%x: {xt}", f"%r: {rt}"] + norm_params + params, body, rt)
    operands = [residual.reshape(-1, dout)] + [t for t in (norm_weight, norm_bias, *weights) if t is not None]
    return run_rows(placement, text, "sublayer", x, operands, dout)


@tree_sublayer.register_fake
def _(x, residual, norm, norm_weight, norm_bias, eps, layer, weights, depth, activation, order="pre"):
    check_sublayer(x, residual, norm, norm_weight, norm_bias, layer, weights, depth, activation, order)
    return residual.new_empty(residual.shape)


tree_ffn.register_autograd(tree_ffn_autograd, setup_context=setup_tree_context)
leaf_tree_ffn.register_autograd(leaf_tree_ffn_autograd, setup_context=setup_leaf_tree_context)
tree_sublayer.register_autograd(tree_sublayer_autograd, setup_context=setup_tree_sublayer_context)


class TreeFFN(torch.nn.Module):
    """UltraFastBERT's fast feedforward layer: K trees of depth+1 levels; each
    row walks one path per tree, and its output is the sum of the visited
    neurons' act(x . w_in[k, n] + b_in[k, n]) * w_out[k, n], plus b_out. Its
    forward is the custom op fff::tree_ffn, on fff's kernels; its gradient,
    UltraFastBERT's hard-routed one, is computed in torch ops along each
    row's path (_tree_training.py)."""

    def __init__(self, input_width, output_width, depth, trees=1, activation="gelu", bias=True,
                 device=None, dtype=None, output_bias=None):
        """`bias` gives the nodes biases (b_in) and the output one (b_out);
        `output_bias`, where given, decides b_out alone (UltraFastBERT's
        layer has b_in and no b_out)."""
        super().__init__()
        check_depth("fff::tree_ffn", depth, min_depth=0)
        check_extents("TreeFFN", input_width=input_width, output_width=output_width, trees=trees)
        nodes = 2 ** (depth + 1) - 1
        factory = {"device": device, "dtype": dtype}
        self.depth, self.activation = depth, activation_name(activation)
        self.w_in = torch.nn.Parameter(torch.empty(trees, nodes, input_width, **factory))
        self.b_in = torch.nn.Parameter(torch.empty(trees, nodes, **factory)) if bias else None
        self.w_out = torch.nn.Parameter(torch.empty(trees, nodes, output_width, **factory))
        output_bias = bias if output_bias is None else output_bias
        self.b_out = torch.nn.Parameter(torch.empty(output_width, **factory)) if output_bias else None
        self.reset_parameters()

    def reset_parameters(self):
        # UltraFastBERT's initialization: U(+-1/sqrt(Din)) in, U(+-1/sqrt(K * (depth+1)))
        # out, one over the root of the neurons each row uses.
        bound_in = 1 / math.sqrt(self.w_in.shape[2])
        bound_out = 1 / math.sqrt(self.w_in.shape[0] * (self.depth + 1))
        with torch.no_grad():
            for p, bound in ((self.w_in, bound_in), (self.b_in, bound_in), (self.w_out, bound_out)):
                if p is not None:
                    p.uniform_(-bound, bound)
            if self.b_out is not None:
                self.b_out.zero_()

    def forward(self, x):
        refuse_forward_mode("fff's TreeFFN", (x,))
        return torch.ops.fff.tree_ffn(x, self.w_in, self.b_in, self.w_out, self.b_out, self.depth,
                                      self.activation)

    def extra_repr(self):
        trees, nodes, din = self.w_in.shape
        return (f"input_width={din}, output_width={self.w_out.shape[2]}, depth={self.depth}, trees={trees}, "
                f"activation={self.activation}")

    @classmethod
    def from_ultrafastbert(cls, layer):
        """The same layer as UltraFastBERT's FFF module (`linear_in`: [K*N, Din]
        with bias, `linear_out`: [Dout, K*N], `depth`, `parallel_size`,
        `activation`), with its weights copied."""
        trees, depth = layer.parallel_size, layer.depth
        nodes = 2 ** (depth + 1) - 1
        w_in, w_out = layer.linear_in.weight, layer.linear_out.weight
        if tuple(w_in.shape[:1]) != (trees * nodes,) or w_out.shape[1] != trees * nodes:
            raise ValueError(f"linear_in {list(w_in.shape)} and linear_out {list(w_out.shape)} do not hold "
                             f"{trees} trees of depth {depth} ({nodes} nodes each)")
        has_bias_out = getattr(layer.linear_out, "bias", None) is not None
        tree = cls(w_in.shape[1], w_out.shape[0], depth, trees, activation_name(getattr(layer, "activation", "gelu")),
                   device=w_in.device, dtype=w_in.dtype, output_bias=has_bias_out)
        with torch.no_grad():
            tree.w_in.copy_(w_in.reshape(trees, nodes, -1))
            tree.b_in.copy_(layer.linear_in.bias.reshape(trees, nodes))
            # Row n of w_out is neuron n's output weights: linear_out's column.
            tree.w_out.copy_(w_out.t().reshape(trees, nodes, -1))
            if has_bias_out:
                tree.b_out.copy_(layer.linear_out.bias)
        return tree

    def to_ultrafastbert(self, layer_class=None):
        """UltraFastBERT's layer with this layer's weights: the authors' FFF
        class where it is passed as `layer_class` (built as
        layer_class(input_width, output_width, depth, parallel_size,
        activation_class)), else fff.torch.MaskedTreeFFN, the same layer in
        fff's code. It has no output bias: b_out must be absent or zero."""
        from ._ultrafastbert import to_ultrafastbert
        return to_ultrafastbert(self, layer_class)


class LeafTreeFFN(torch.nn.Module):
    """The original fast feedforward layer (Belcak & Wattenhofer 2023): depth
    routing hyperplanes choose one small MLP leaf per row, which computes
    act(x @ w1 + b1) @ w2 + b2. Its forward is the custom op
    fff::leaf_tree_ffn; its gradient is the hard-routed one (the chosen
    leaf's weights and x; the routing nodes get zero), in torch ops over the
    rows grouped by leaf (_tree_training.py). Routing nodes learn only under
    the fastfeedforward package's soft mixture: train there and convert
    (from_fastfeedforward) to train the routing."""

    def __init__(self, input_width, leaf_width, output_width, depth, activation="relu", device=None, dtype=None):
        super().__init__()
        check_depth("fff::leaf_tree_ffn", depth, min_depth=1)
        check_extents("LeafTreeFFN", input_width=input_width, leaf_width=leaf_width, output_width=output_width)
        leaves = 2 ** depth
        factory = {"device": device, "dtype": dtype}
        self.depth, self.activation = depth, activation_name(activation)
        self.node_w = torch.nn.Parameter(torch.empty(leaves - 1, input_width, **factory))
        self.node_b = torch.nn.Parameter(torch.empty(leaves - 1, **factory))
        self.w1 = torch.nn.Parameter(torch.empty(leaves, input_width, leaf_width, **factory))
        self.b1 = torch.nn.Parameter(torch.empty(leaves, leaf_width, **factory))
        self.w2 = torch.nn.Parameter(torch.empty(leaves, leaf_width, output_width, **factory))
        self.b2 = torch.nn.Parameter(torch.empty(leaves, output_width, **factory))
        self.reset_parameters()

    def reset_parameters(self):
        bound_in, bound_out = 1 / math.sqrt(self.w1.shape[1]), 1 / math.sqrt(self.w1.shape[2])
        with torch.no_grad():
            for p, bound in ((self.node_w, bound_in), (self.node_b, bound_in), (self.w1, bound_in),
                             (self.b1, bound_in), (self.w2, bound_out), (self.b2, bound_out)):
                p.uniform_(-bound, bound)

    def forward(self, x):
        refuse_forward_mode("fff's LeafTreeFFN", (x,))
        return torch.ops.fff.leaf_tree_ffn(x, self.node_w, self.node_b, self.w1, self.b1, self.w2, self.b2,
                                           self.depth, self.activation)

    def extra_repr(self):
        leaves, din, width = self.w1.shape
        return (f"input_width={din}, leaf_width={width}, output_width={self.w2.shape[2]}, depth={self.depth}, "
                f"activation={self.activation}")

    @classmethod
    def from_fastfeedforward(cls, layer):
        """The same layer as the `fastfeedforward` package's FFF module in
        eval mode, with its weights copied. Its eval forward adds no leaf
        output bias (`b2s` is used in training only), so b2 is zero here."""
        depth = int(layer.depth.item()) if torch.is_tensor(layer.depth) else int(layer.depth)
        w1 = layer.w1s
        leaf = cls(layer.input_width, layer.leaf_width, layer.output_width, depth,
                   activation_name(layer.activation), device=w1.device, dtype=w1.dtype)
        with torch.no_grad():
            leaf.node_w.copy_(layer.node_weights)
            leaf.node_b.copy_(layer.node_biases.reshape(-1))
            leaf.w1.copy_(layer.w1s)
            leaf.b1.copy_(layer.b1s)
            leaf.w2.copy_(layer.w2s)
            leaf.b2.zero_()
        return leaf

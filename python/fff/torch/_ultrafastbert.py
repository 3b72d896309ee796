"""UltraFastBERT both ways: its training layer, converters between it and
fff.torch.TreeFFN, and BERT-style encoders whose feedforwards are tree
layers, as UltraFastBERT builds them."""

import functools

import torch

from ._layers import TreeFFN
from ._tree_checks import activation_name

# The activation classes UltraFastBERT's layer takes (it calls the class).
_ACTIVATION_CLASSES = {"gelu": torch.nn.GELU, "gelu_tanh": functools.partial(torch.nn.GELU, approximate="tanh"),
                       "relu": torch.nn.ReLU, "silu": torch.nn.SiLU, "identity": torch.nn.Identity}


class MaskedTreeFFN(torch.nn.Module):
    """UltraFastBERT's training layer (training/cramming/architectures/fff.py
    in its repository), in fff's words: the same constructor, parameters
    (`linear_in` [K*N, Din] with a bias, `linear_out` [Dout, K*N] without)
    and values. It computes every node's logit and activation, then keeps
    each row's path with a 0/1 mask built under no_grad: the arithmetic of
    the whole tree for the values of one path, and, through autograd, the
    hard-routed gradient that fff::tree_ffn's backward gives. What
    TreeFFN.to_ultrafastbert() returns where the authors' class is not
    passed, and the baseline of fff's tree training benchmarks."""

    def __init__(self, input_width, output_width, depth, parallel_size=1, activation=torch.nn.GELU):
        super().__init__()
        self.input_width, self.output_width = input_width, output_width
        self.depth, self.parallel_size = depth, parallel_size
        self.n_nodes = 2 ** (depth + 1) - 1
        self.linear_in = torch.nn.Linear(input_width, parallel_size * self.n_nodes, bias=True)
        self.linear_out = torch.nn.Linear(parallel_size * self.n_nodes, output_width, bias=False)
        self.activation = activation()

    def forward(self, x):
        rows = x.reshape(-1, self.input_width)
        logits = self.linear_in(rows).view(rows.shape[0], self.parallel_size, self.n_nodes)
        hidden = (self.activation(logits) * path_mask(logits, self.depth)).flatten(1)
        return self.linear_out(hidden).reshape(*x.shape[:-1], self.output_width)


def path_mask(logits, depth, zero_goes_right=False):
    """The 0/1 mask of each row's path through logits [B, K, N] of K trees
    of `depth` (a logit of exactly 0 goes left, or right with
    `zero_goes_right`), built without gradient: UltraFastBERT's hard
    routing."""
    with torch.no_grad():
        on_path = torch.zeros_like(logits)
        node = torch.zeros(*logits.shape[:2], 1, dtype=torch.int64, device=logits.device)
        for _ in range(depth + 1):
            on_path.scatter_(2, node, 1.0)
            logit = logits.gather(2, node)
            node = 2 * node + 1 + ((logit >= 0) if zero_goes_right else (logit > 0)).to(torch.int64)
    return on_path


def to_ultrafastbert(tree, layer_class=None):
    """UltraFastBERT's layer holding `tree`'s weights, on its device and in
    its dtype. `layer_class` is the authors' FFF class, built as
    layer_class(input_width, output_width, depth, parallel_size,
    activation_class); MaskedTreeFFN where it is None."""
    trees, nodes, din = tree.w_in.shape
    dout = tree.w_out.shape[2]
    if tree.b_out is not None and bool(tree.b_out.any()):
        raise ValueError("UltraFastBERT's layer has no output bias, and this TreeFFN's b_out is not zero")
    if layer_class is not None and din != dout:
        raise ValueError(f"UltraFastBERT's layer gives its output its input's shape: this TreeFFN maps {din} "
                         f"to {dout} wide rows")
    layer = (layer_class or MaskedTreeFFN)(din, dout, tree.depth, trees, _ACTIVATION_CLASSES[tree.activation])
    layer = layer.to(device=tree.w_in.device, dtype=tree.w_in.dtype)
    with torch.no_grad():
        layer.linear_in.weight.copy_(tree.w_in.reshape(trees * nodes, din))
        layer.linear_in.bias.copy_(tree.b_in.reshape(-1) if tree.b_in is not None else 0)
        # linear_out's column j is neuron j's output weights, w_out's row.
        layer.linear_out.weight.copy_(tree.w_out.reshape(trees * nodes, dout).t())
    return layer


def _is_ultrafastbert(module):
    return all(hasattr(module, name) for name in ("linear_in", "linear_out", "depth", "parallel_size"))


def convert_tree_layers(model, to, layer_class=None):
    """Replaces, in place, every tree layer of `model`: to="ultrafastbert"
    turns each fff.torch.TreeFFN into UltraFastBERT's layer
    (to_ultrafastbert, with `layer_class`); to="fff" turns each
    UltraFastBERT layer (a module with linear_in, linear_out, depth and
    parallel_size) into a TreeFFN. Returns the model and the number of
    layers replaced."""
    if to not in ("ultrafastbert", "fff"):
        raise ValueError(f"convert_tree_layers converts to 'ultrafastbert' or 'fff', not '{to}'")
    found = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if (isinstance(child, TreeFFN) if to == "ultrafastbert" else _is_ultrafastbert(child))]
    for parent, name, child in found:
        setattr(parent, name, to_ultrafastbert(child, layer_class) if to == "ultrafastbert"
                else TreeFFN.from_ultrafastbert(child))
    return model, len(found)


def use_tree_feedforwards(model, depth, trees=1, activation="gelu"):
    """Gives each BERT-style layer of `model` (one with an `intermediate`
    dense + activation and an `output` whose `dense` feeds a dropout, the
    residual add and a LayerNorm: BERT, RoBERTa, ELECTRA and their kin in
    transformers) UltraFastBERT's feedforward, in place: `intermediate`
    becomes a TreeFFN of `depth` (K = `trees`) from the hidden width to the
    hidden width, with node biases and no output bias (UltraFastBERT's
    layer), `output.dense` the identity, so that the dropout, the
    residual and the LayerNorm stay. Returns the model; raises ValueError
    where no layer has that shape."""
    activation = activation_name(activation)
    layers = [m for m in model.modules()
              if isinstance(getattr(m, "intermediate", None), torch.nn.Module)
              and isinstance(getattr(getattr(m, "output", None), "dense", None), torch.nn.Linear)
              and isinstance(getattr(m.intermediate, "dense", None), torch.nn.Linear)]
    if not layers:
        raise ValueError("use_tree_feedforwards found no BERT-style layer (intermediate.dense, output.dense) "
                         "in the model")
    for layer in layers:
        dense = layer.intermediate.dense
        hidden = dense.in_features
        if layer.output.dense.out_features != hidden:
            raise ValueError(f"a layer's feedforward maps {hidden} to {layer.output.dense.out_features} wide "
                             "rows; a tree feedforward here keeps the hidden width")
        layer.intermediate = TreeFFN(hidden, hidden, depth, trees, activation, device=dense.weight.device,
                                     dtype=dense.weight.dtype, output_bias=False)
        layer.output.dense = torch.nn.Identity()
    return model

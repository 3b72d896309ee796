"""fff.torch.LeafTreeFFN and fff::tree_sublayer train: the leaf tree's
hard-routed gradient against the fastfeedforward package's training
forward with hard decisions and against a float64 straight-loop reference,
gradcheck in float64, ties at exactly 0; the sublayer's gradient against
torch.autograd through float64 references of its norm and tree; training
eager and under torch.compile with fullgraph."""

import math

import pytest
import torch
import torch.nn.functional as F

import fff.torch
from fff.torch._tree_training import leaf_tree_ffn_backward
from test_torch_tree_training import fit

TOLERANCE = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}
ACTIVATIONS = {"relu": torch.relu, "gelu": F.gelu, "silu": F.silu, "identity": lambda v: v,
               "gelu_tanh": lambda v: F.gelu(v, approximate="tanh")}


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm().clamp_min(1e-30)).item()


def leaf_reference(x, node_w, node_b, w1, b1, w2, b2, depth, activation):
    """The leaf tree as a straight loop over rows for the routing (a score
    >= 0 goes right), then each row's own leaf gathered: differentiable in
    every weight, so autograd gives the hard-routed gradient."""
    leaves = []
    for row in x.detach():
        node = 0
        for _ in range(depth):
            score = float(row.double() @ node_w[node].detach().double() + node_b[node].detach().double())
            node = 2 * node + 1 + (1 if score >= 0 else 0)
        leaves.append(node - (2 ** depth - 1))
    leaf = torch.tensor(leaves, dtype=torch.int64)
    hidden = ACTIVATIONS[activation](torch.einsum("bd,bdw->bw", x, w1[leaf]) + b1[leaf])
    return torch.einsum("bw,bwo->bo", hidden, w2[leaf]) + b2[leaf]


def leaf_tensors(rows, din, width, dout, depth, dtype, generator):
    leaves = 2 ** depth
    make = lambda *shape, scale: (torch.randn(*shape, generator=generator) * scale).to(dtype)  # noqa: E731
    return (make(rows, din, scale=1.0), make(leaves - 1, din, scale=1 / math.sqrt(din)), make(leaves - 1, scale=0.1),
            make(leaves, din, width, scale=1 / math.sqrt(din)), make(leaves, width, scale=0.1),
            make(leaves, width, dout, scale=1 / math.sqrt(width)), make(leaves, dout, scale=0.1))


# Depths 1 to 6 (a leaf tree has at least one routing level), odd widths, every dtype, several activations.
CASES = [(torch.float32, "relu", 3, 16, 8, 12), (torch.float32, "gelu", 1, 7, 3, 5),
         (torch.float32, "silu", 1, 9, 4, 6), (torch.float32, "relu", 6, 33, 5, 17),
         (torch.float16, "relu", 3, 16, 8, 12), (torch.bfloat16, "gelu_tanh", 4, 24, 6, 10)]


@pytest.mark.parametrize("dtype, activation, depth, din, width, dout", CASES)
def test_leaf_gradients_are_the_hard_routed_ones(dtype, activation, depth, din, width, dout):
    generator = torch.Generator().manual_seed(depth * 100 + din)
    inputs = leaf_tensors(53, din, width, dout, depth, dtype, generator)
    dy = torch.randn(53, dout, generator=generator).to(dtype)
    leaves = [t.clone().requires_grad_() for t in inputs]
    y = fff.torch.leaf_tree_ffn(*leaves, depth, activation)
    grads = torch.autograd.grad(y, leaves, dy)

    reference = [t.double().requires_grad_() for t in inputs]
    y_ref = leaf_reference(*reference, depth, activation)
    expected = torch.autograd.grad(y_ref, reference, dy.double(), allow_unused=True)
    assert relative_error(y, y_ref) < TOLERANCE[dtype]
    names = ["x", "node_w", "node_b", "w1", "b1", "w2", "b2"]
    for name, got, want, like in zip(names, grads, expected, inputs):
        assert got.dtype == dtype and got.shape == like.shape, name
        if name.startswith("node"):
            assert want is None and not got.any(), name  # routing gets no gradient
        else:
            assert relative_error(got, want) < TOLERANCE[dtype], name


def fastfeedforward_pair(din, width, dout, depth, activation):
    """A fastfeedforward.FFF in training mode with nonzero b2s, and the
    LeafTreeFFN converted from it (b2 included, which its training forward
    adds and its eval forward does not); skips without the package."""
    fastfeedforward = pytest.importorskip("fastfeedforward", reason="the fastfeedforward package is not installed")
    theirs = fastfeedforward.FFF(din, width, dout, depth=depth, activation=activation).train()
    with torch.no_grad():
        theirs.b2s.uniform_(-1, 1)
    ours = fff.torch.LeafTreeFFN.from_fastfeedforward(theirs)
    with torch.no_grad():
        ours.b2.copy_(theirs.b2s)
    return theirs, ours


def hard_training_gradients(theirs, x, dy):
    """x's and every weight's gradient through fastfeedforward's training
    forward with hard decisions, in LeafTreeFFN's parameter order. Its hard
    decisions round sigmoid(score): only a score of exactly 0 routes
    differently (left there, right in the op)."""
    x = x.clone().requires_grad_()
    return torch.autograd.grad(theirs.training_forward(x, use_hard_decisions=True),
                               [x, theirs.node_weights, theirs.node_biases, theirs.w1s, theirs.b1s, theirs.w2s,
                                theirs.b2s], dy)


def test_leaf_gradients_equal_fastfeedforwards_hard_training_forward():
    torch.manual_seed(4)
    theirs, ours = fastfeedforward_pair(20, 6, 11, 4, torch.nn.ReLU())
    x = torch.randn(97, 20)
    dy = torch.randn(97, 11)
    x_ours = x.clone().requires_grad_()
    got = torch.autograd.grad(ours(x_ours), [x_ours, *ours.parameters()], dy)
    expected = hard_training_gradients(theirs, x, dy)  # no score is exactly 0 here
    for name, g, e in zip(["x", "node_w", "node_b", "w1", "b1", "w2", "b2"], got, expected):
        if name.startswith("node"):
            assert not g.any() and not e.any(), name
        else:
            assert relative_error(g, e) < 2e-5, name


def test_the_kernel_and_the_torch_ops_agree_and_the_kernel_ignores_the_thread_count():
    # CPU f32 takes fff's leaf_tree_ffn_grad kernel; its gradients against
    # the torch-op backward (which f64 and CUDA tensors take), and the same
    # bits on 1 and 2 threads (torch's, which fff's parallel loops use).
    generator = torch.Generator().manual_seed(31)
    depth, rows = 5, 300
    x, node_w, node_b, w1, b1, w2, b2 = leaf_tensors(rows, 96, 12, 80, depth, torch.float32, generator)
    dy = torch.randn(rows, 80, generator=generator)
    assert fff.torch._kernels.takes_leaf_grad(x, w1)
    args = (dy, x, node_w, node_b, w1, b1, w2, b2, depth, "gelu")
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = torch.ops.fff.leaf_tree_ffn_backward(*args)
        torch.set_num_threads(2)
        two = torch.ops.fff.leaf_tree_ffn_backward(*args)
    finally:
        torch.set_num_threads(threads)
    reference = leaf_tree_ffn_backward(*args)
    for name, a, b, r in zip(["x", "node_w", "node_b", "w1", "b1", "w2", "b2"], one, two, reference):
        assert torch.equal(a, b), name
        assert a.dtype == torch.float32 and a.shape == r.shape, name
        assert (relative_error(a, r) < 2e-6) if r.any() else not a.any(), name


def test_leaves_as_wide_as_a_dense_layer_take_the_torch_ops():
    # 1024 rows a leaf of 256 hidden units: dense matrix products, which
    # torch's BLAS runs faster; narrow leaves or few rows take the kernel.
    x, w1 = torch.zeros(4096, 8), torch.zeros(4, 8, 256)
    assert not fff.torch._kernels.takes_leaf_grad(x, w1)
    assert fff.torch._kernels.takes_leaf_grad(x, torch.zeros(4, 8, 64))
    assert fff.torch._kernels.takes_leaf_grad(x[:256], w1)
    # On the GPU (here the emulator) the kernels take leaves of up to 64
    # units, however many rows.
    assert fff.torch._kernels.takes_leaf_grad(x, torch.zeros(4, 8, 64), emulate_cuda=True)
    assert not fff.torch._kernels.takes_leaf_grad(x, torch.zeros(4, 8, 65), emulate_cuda=True)
    assert not fff.torch._kernels.takes_leaf_grad(x.double(), torch.zeros(4, 8, 64).double())
    generator = torch.Generator().manual_seed(32)
    inputs = leaf_tensors(2100, 12, 160, 9, 1, torch.float32, generator)
    leaves = [t.clone().requires_grad_() for t in inputs]
    dy = torch.randn(2100, 9, generator=generator)
    grads = torch.autograd.grad(fff.torch.leaf_tree_ffn(*leaves, 1, "relu"), leaves, dy)
    reference = [t.double().requires_grad_() for t in inputs]
    expected = torch.autograd.grad(leaf_reference(*reference, 1, "relu"), reference, dy.double(), allow_unused=True)
    for name, got, want in zip(["x", "w1", "b1", "w2", "b2"], grads[:1] + grads[3:], expected[:1] + expected[3:]):
        assert relative_error(got, want) < 2e-5, name


def test_a_score_of_exactly_zero_goes_right():
    # x = 0 and zero routing biases: every score is exactly 0, so every row
    # takes the right child at each level and only the last leaf learns.
    depth, din = 3, 8
    x = torch.zeros(6, din, requires_grad=True)
    layer = fff.torch.LeafTreeFFN(din, 4, 5, depth)
    with torch.no_grad():
        layer.node_b.zero_()
    layer(x).pow(2).sum().backward()
    touched = [leaf for leaf in range(2 ** depth) if layer.w2.grad[leaf].any() or layer.b2.grad[leaf].any()]
    assert touched == [2 ** depth - 1]


class HardRoutedLeaves(torch.autograd.Function):
    """leaf_reference's forward with the backward fff::leaf_tree_ffn
    registers, for gradcheck."""

    @staticmethod
    def forward(ctx, *inputs):
        *tensors, depth, activation = inputs
        ctx.save_for_backward(*tensors)
        ctx.depth, ctx.activation = depth, activation
        return leaf_reference(*tensors, depth, activation)

    @staticmethod
    def backward(ctx, dy):
        return (*leaf_tree_ffn_backward(dy, *ctx.saved_tensors, ctx.depth, ctx.activation), None, None)


@pytest.mark.parametrize("activation", ["gelu", "silu", "identity"])
def test_gradcheck_of_the_leaf_backward_in_float64(activation):
    generator = torch.Generator().manual_seed(11)
    inputs = [t.requires_grad_() for t in leaf_tensors(9, 5, 3, 4, 2, torch.float64, generator)]
    assert torch.autograd.gradcheck(lambda *t: HardRoutedLeaves.apply(*t, 2, activation), inputs, eps=1e-6,
                                    atol=1e-7)


def test_a_float64_leaf_tree_runs_in_torch_ops_and_passes_gradcheck_through_the_op():
    """fff compiles no f64: LeafTreeFFN.double() takes the op's torch-op
    form, forward and backward, so gradcheck runs on the op itself; its
    values are the f32 kernel's, to f32 rounding."""
    generator = torch.Generator().manual_seed(13)
    depth = 3
    inputs = leaf_tensors(23, 6, 3, 5, depth, torch.float64, generator)
    y = torch.ops.fff.leaf_tree_ffn(*inputs, depth, "gelu")
    assert y.dtype == torch.float64
    assert relative_error(y, leaf_reference(*inputs, depth, "gelu")) < 1e-13
    kernel = torch.ops.fff.leaf_tree_ffn(*(t.float() for t in inputs), depth, "gelu")
    assert relative_error(kernel, y) < 1e-5
    leaves = [t.clone().requires_grad_() for t in inputs]
    assert torch.autograd.gradcheck(lambda *t: torch.ops.fff.leaf_tree_ffn(*t, depth, "gelu"), leaves, eps=1e-6,
                                    atol=1e-7)


@pytest.mark.parametrize("backend", [None, "inductor", "fff"])
def test_a_leaf_tree_trains(backend):
    torch.manual_seed(0)
    layer, target = fff.torch.LeafTreeFFN(16, 8, 6, depth=3), fff.torch.LeafTreeFFN(16, 8, 6, depth=3)
    losses = fit(layer, target, backend)
    assert losses[-1] < 0.5 * losses[0], losses


# fff::tree_sublayer against float64 references of its parts: torch's own
# norm, the masked tree, the looped leaf tree.

def masked_tree(x, w_in, b_in, w_out, b_out, depth, activation):
    trees, nodes, _ = w_in.shape
    logits = torch.einsum("bd,knd->bkn", x, w_in) + b_in
    with torch.no_grad():
        mask, node = torch.zeros_like(logits), torch.zeros(x.shape[0], trees, dtype=torch.int64)
        for _ in range(depth + 1):
            mask.scatter_(2, node.unsqueeze(-1), 1.0)
            node = 2 * node + 1 + (logits.gather(2, node.unsqueeze(-1)).squeeze(-1) > 0).long()
    return torch.einsum("bkn,kno->bo", ACTIVATIONS[activation](logits) * mask, w_out) + b_out


def sublayer_reference(x, residual, norm, norm_weight, norm_bias, eps, layer, weights, depth, activation, order):
    rows = x.reshape(-1, x.shape[-1])
    normalize = (lambda t: F.layer_norm(t, t.shape[-1:], norm_weight, norm_bias, eps)) if norm == "layer_norm" \
        else (lambda t: F.rms_norm(t, t.shape[-1:], norm_weight, eps))
    tree = (lambda t: masked_tree(t, *weights, depth, activation)) if layer == "tree_ffn" \
        else (lambda t: leaf_reference(t, *weights, depth, activation))
    flat = residual.reshape(rows.shape[0], -1)
    y = flat + tree(normalize(rows)) if order == "pre" else normalize(flat + tree(rows))
    return y.reshape(residual.shape)


@pytest.mark.parametrize("order", ["pre", "post"])
@pytest.mark.parametrize("norm, layer, dtype", [("layer_norm", "tree_ffn", torch.float32),
                                                ("rms_norm", "leaf_tree_ffn", torch.float32),
                                                ("layer_norm", "leaf_tree_ffn", torch.bfloat16),
                                                ("rms_norm", "tree_ffn", torch.float16)])
def test_sublayer_gradients(order, norm, layer, dtype):
    generator = torch.Generator().manual_seed(5)
    width, depth = 20, 3
    if layer == "tree_ffn":
        module = fff.torch.TreeFFN(width, width, depth, trees=2, dtype=dtype)
    else:
        module = fff.torch.LeafTreeFFN(width, 6, width, depth, activation="gelu", dtype=dtype)
    weights = [p.detach().clone() for p in module.parameters()]
    x = torch.randn(3, 7, width, generator=generator).to(dtype)
    residual = torch.randn(3, 7, width, generator=generator).to(dtype)
    norm_weight = (1 + 0.2 * torch.randn(width, generator=generator)).to(dtype)
    norm_bias = (0.1 * torch.randn(width, generator=generator)).to(dtype) if norm == "layer_norm" else None
    dy = torch.randn(3, 7, width, generator=generator).to(dtype)
    inputs = [x, residual, norm_weight] + ([norm_bias] if norm_bias is not None else []) + weights

    def call(tensors, op):
        x, residual, norm_weight, *rest = tensors
        norm_bias = rest.pop(0) if norm == "layer_norm" else None
        return op(x, residual, norm, norm_weight, norm_bias, 1e-5, layer, rest, depth, module.activation, order)

    ours = [t.clone().requires_grad_() for t in inputs]
    y = call(ours, torch.ops.fff.tree_sublayer)
    got = torch.autograd.grad(y, ours, dy)
    theirs = [t.double().requires_grad_() for t in inputs]
    y_ref = call(theirs, sublayer_reference)
    expected = torch.autograd.grad(y_ref, theirs, dy.double(), allow_unused=True)
    assert relative_error(y, y_ref) < TOLERANCE[dtype]
    for index, (g, e, t) in enumerate(zip(got, expected, inputs)):
        assert g.dtype == dtype and g.shape == t.shape, index
        if e is None:  # a leaf tree's routing nodes
            assert not g.any(), index
        else:
            assert relative_error(g, e) < TOLERANCE[dtype], index


def test_a_sublayer_trains_under_compile_and_reports_its_backward():
    torch.manual_seed(2)
    tree, norm = fff.torch.TreeFFN(16, 16, depth=3), torch.nn.LayerNorm(16)
    weights = [tree.w_in, tree.b_in, tree.w_out, tree.b_out]

    def sublayer(h):
        return torch.ops.fff.tree_sublayer(h, h, "layer_norm", norm.weight, norm.bias, 1e-5, "tree_ffn", weights,
                                           3, "gelu", "pre")

    h = torch.randn(8, 16, requires_grad=True)
    eager = torch.autograd.grad(sublayer(h).sum(), [h, norm.weight, *weights])
    compiled = torch.compile(sublayer, backend="fff", fullgraph=True)
    got = torch.autograd.grad(compiled(h).sum(), [h, norm.weight, *weights])
    for g, e in zip(got, eager):
        assert torch.equal(g, e)
    with pytest.raises(RuntimeError, match="tree_sublayer has no double backward"):
        torch.autograd.grad(sublayer(h).square().sum(), h, create_graph=True)[0].sum().backward()

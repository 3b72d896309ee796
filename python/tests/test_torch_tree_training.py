"""fff.torch.TreeFFN trains: fff::tree_ffn's registered gradient against
torch.autograd through UltraFastBERT's masked dense training layer
(transcribed below) in float64, gradcheck of the hard-routed backward in
float64, and training under eager and torch.compile."""

import math

import pytest
import torch

import fff.torch  # noqa: F401  (registers the ops)
from fff.torch._tree_training import tree_ffn_backward, tree_paths

TOLERANCE = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.2e-2}
ACTIVATIONS = {
    "gelu": lambda v: torch.nn.functional.gelu(v),
    "gelu_tanh": lambda v: torch.nn.functional.gelu(v, approximate="tanh"),
    "relu": torch.relu,
    "silu": torch.nn.functional.silu,
    "identity": lambda v: v,
}


def masked_dense(x, w_in, b_in, w_out, b_out, depth, activation, zero_goes_right=False):
    """UltraFastBERT's training forward, written as its authors do: every
    node's logit, a 0/1 mask of each row's path built under no_grad (a
    logit > 0 goes right; >= 0 with `zero_goes_right`), act(logits) * mask,
    then the dense output layer. Its values equal fff::tree_ffn's; its
    gradient is the hard-routed one."""
    trees, nodes, din = w_in.shape
    logits = torch.einsum("bd,knd->bkn", x, w_in)
    if b_in is not None:
        logits = logits + b_in
    with torch.no_grad():
        mask = torch.zeros_like(logits)
        node = torch.zeros(x.shape[0], trees, dtype=torch.int64)
        for _ in range(depth + 1):
            mask.scatter_(2, node.unsqueeze(-1), 1.0)
            chosen = logits.gather(2, node.unsqueeze(-1)).squeeze(-1)
            node = 2 * node + 1 + ((chosen >= 0) if zero_goes_right else (chosen > 0)).long()
    hidden = ACTIVATIONS[activation](logits) * mask
    y = torch.einsum("bkn,kno->bo", hidden, w_out)
    return y + b_out if b_out is not None else y


def tensors(rows, din, dout, depth, trees, dtype, bias=True, generator=None):
    nodes = 2 ** (depth + 1) - 1
    make = lambda *shape, scale=1.0: (torch.randn(*shape, generator=generator) * scale).to(dtype)
    x = make(rows, din)
    w_in = make(trees, nodes, din, scale=1 / math.sqrt(din))
    b_in = make(trees, nodes, scale=0.1) if bias else None
    w_out = make(trees, nodes, dout, scale=0.3)
    b_out = make(dout) if bias else None
    return x, w_in, b_in, w_out, b_out


def relative_error(actual, expected):
    return ((actual.double() - expected).norm() / expected.norm().clamp_min(1e-30)).item()


# Every activation in f32; every dtype; depths 0 to 7, several trees, odd
# widths, no biases. (Each distinct shape compiles an fff kernel.)
CASES = [(torch.float32, activation, 3, 1, 16, 12, True)
         for activation in ("gelu", "gelu_tanh", "relu", "silu", "identity")]
CASES += [(dtype, "gelu", 3, 1, 16, 12, True) for dtype in (torch.float16, torch.bfloat16)]
CASES += [(torch.float32, "relu", 5, 2, 33, 7, False), (torch.float32, "gelu", 0, 1, 5, 9, True),
          (torch.bfloat16, "silu", 7, 3, 24, 40, True)]


@pytest.mark.parametrize("dtype, activation, depth, trees, din, dout, bias", CASES)
def test_gradients_are_those_of_the_authors_masked_dense_layer(dtype, activation, depth, trees, din, dout, bias):
    generator = torch.Generator().manual_seed(depth * 100 + trees * 10 + din)
    inputs = tensors(37, din, dout, depth, trees, dtype, bias, generator)
    dy = torch.randn(37, dout, generator=generator).to(dtype)
    leaves = [t.detach().requires_grad_() if t is not None else None for t in inputs]
    y = fff.torch.tree_ffn(*leaves, depth, activation)
    grads = torch.autograd.grad(y, [t for t in leaves if t is not None], dy)

    reference = [t.detach().double().requires_grad_() if t is not None else None for t in inputs]
    y_ref = masked_dense(*reference, depth, activation)
    expected = torch.autograd.grad(y_ref, [t for t in reference if t is not None], dy.double())
    assert relative_error(y, y_ref) < TOLERANCE[dtype]
    for name, got, want in zip(["x", "w_in", "b_in", "w_out", "b_out"] if bias else ["x", "w_in", "w_out"],
                               grads, expected):
        assert got.dtype == dtype, name
        assert relative_error(got, want) < TOLERANCE[dtype], name


def test_a_logit_of_exactly_zero_goes_left_and_routes_no_gradient():
    # x = 0 and no biases: every logit is exactly 0, so every row takes the
    # left child at each level; only those nodes' weights get gradients.
    depth, din, dout = 3, 8, 4
    x = torch.zeros(5, din, requires_grad=True)
    w_in = torch.randn(1, 2 ** (depth + 1) - 1, din, requires_grad=True)
    w_out = torch.randn(1, 2 ** (depth + 1) - 1, dout, requires_grad=True)
    y = fff.torch.tree_ffn(x, w_in, None, w_out, None, depth, "gelu")
    dx, dw_in, dw_out = torch.autograd.grad(y, (x, w_in, w_out), torch.randn(5, dout))
    left_path = [0, 1, 3, 7]
    touched = dw_in.abs().sum(-1)[0].nonzero().flatten().tolist()
    assert set(touched) <= set(left_path)
    nodes, _ = tree_paths(x.detach(), w_in.detach(), None, depth)
    assert nodes[:, 0].tolist() == [left_path] * 5
    reference = [t.detach().double().requires_grad_() for t in (x, w_in, w_out)]
    assert torch.isfinite(dx).all() and torch.isfinite(dw_out).all()
    expected = torch.autograd.grad(masked_dense(reference[0], reference[1], None, reference[2], None, depth, "gelu"),
                                   reference, torch.ones(5, dout, dtype=torch.float64))
    got = torch.autograd.grad(fff.torch.tree_ffn(x, w_in, None, w_out, None, depth, "gelu"), (x, w_in, w_out),
                              torch.ones(5, dout))
    for g, e in zip(got, expected):
        assert relative_error(g, e) < 2e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_zero_goes_right_routes_ties_right_forward_and_backward(dtype):
    """Rows and routing weights of small integers: logits exact, and exactly
    0 on many paths. With zero_goes_right those rows go right, on fff's
    kernels (f32, bf16) and in torch ops (f64) alike; values and gradients
    are the masked layer's with `>= 0`, and far from those with `> 0`."""
    generator = torch.Generator().manual_seed(3)
    depth, trees, din, dout = 3, 2, 16, 8
    nodes = 2 ** (depth + 1) - 1
    integers = lambda *shape: torch.randint(-1, 2, shape, generator=generator).to(dtype)
    x = integers(40, din) * (torch.rand(40, din, generator=generator) < 0.25).to(dtype)
    inputs = [x, integers(trees, nodes, din), integers(trees, nodes), torch.randn(trees, nodes, dout,
                                                                               generator=generator).to(dtype), None]
    dy = torch.randn(40, dout, generator=generator).to(dtype)
    leaves = [t.clone().requires_grad_() if t is not None else None for t in inputs]
    y = fff.torch.tree_ffn(*leaves, depth, "gelu", zero_goes_right=True)
    grads = torch.autograd.grad(y, leaves[:4], dy)
    for zero_goes_right in (True, False):
        reference = [t.double().requires_grad_() if t is not None else None for t in inputs]
        y_ref = masked_dense(*reference, depth, "gelu", zero_goes_right)
        expected = torch.autograd.grad(y_ref, reference[:4], dy.double())
        errors = [relative_error(y, y_ref)] + [relative_error(g, e) for g, e in zip(grads, expected)]
        if zero_goes_right:
            assert max(errors) < TOLERANCE.get(dtype, 1e-12), errors
        else:
            assert relative_error(y, y_ref) > 0.1, errors


class HardRoutedTree(torch.autograd.Function):
    """The hard-routed tree in float64 (torch ops along each row's path)
    with the backward fff::tree_ffn registers, for gradcheck."""

    @staticmethod
    def forward(ctx, x, w_in, b_in, w_out, b_out, depth, activation):
        ctx.save_for_backward(x, w_in, b_in, w_out, b_out)
        ctx.depth, ctx.activation = depth, activation
        nodes, logits = tree_paths(x, w_in, b_in, depth)
        trees, count = w_in.shape[:2]
        flat = torch.arange(trees).view(1, trees, 1) * count + nodes
        act = ACTIVATIONS[activation](logits)
        rows = w_out.reshape(trees * count, -1)[flat]  # [B, K, L, Dout]
        return torch.einsum("bkl,bklo->bo", act, rows) + b_out

    @staticmethod
    def backward(ctx, dy):
        x, w_in, b_in, w_out, b_out = ctx.saved_tensors
        return (*tree_ffn_backward(dy, x, w_in, b_in, w_out, b_out, ctx.depth, ctx.activation), None, None)


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "silu", "identity"])
def test_gradcheck_of_the_hard_routed_backward_in_float64(activation):
    generator = torch.Generator().manual_seed(7)
    inputs = [t.requires_grad_() for t in tensors(6, 5, 3, 2, 2, torch.float64, True, generator)]
    # Routing is piecewise constant: no logit may sit within gradcheck's
    # step of 0, where the numerical derivative would jump.
    _, logits = tree_paths(inputs[0].detach(), inputs[1].detach(), inputs[2].detach(), 2)
    assert logits.abs().min() > 1e-4
    assert torch.autograd.gradcheck(lambda *t: HardRoutedTree.apply(*t, 2, activation), inputs, eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("trees, depth, bias", [(1, 0, True), (2, 3, True), (3, 2, False)])
def test_a_float64_tree_layer_runs_in_torch_ops_and_passes_gradcheck_through_the_op(trees, depth, bias):
    """fff compiles no f64: TreeFFN.double() takes the op's torch-op form,
    forward and backward, so gradcheck runs on the op itself."""
    generator = torch.Generator().manual_seed(5)
    inputs = tensors(7, 5, 4, depth, trees, torch.float64, bias, generator)
    _, logits = tree_paths(inputs[0], inputs[1], inputs[2], depth)
    assert logits.abs().min() > 1e-4  # no route flips within gradcheck's step
    y = torch.ops.fff.tree_ffn(*inputs, depth, "gelu")
    assert y.dtype == torch.float64
    assert relative_error(y, masked_dense(*inputs, depth, "gelu")) < 1e-13
    leaves = [t.clone().requires_grad_() for t in inputs if t is not None]
    def op(x, w_in, *rest):
        b_in, w_out, b_out = rest if bias else (None, rest[0], None)
        return torch.ops.fff.tree_ffn(x, w_in, b_in, w_out, b_out, depth, "gelu")
    assert torch.autograd.gradcheck(op, leaves, eps=1e-6, atol=1e-7)
    # The module too, with its three-dimensional input.
    layer = fff.torch.TreeFFN(5, 4, depth, trees, bias=bias).double()
    x = torch.randn(2, 3, 5, dtype=torch.float64, generator=generator)
    expected = masked_dense(x.reshape(6, 5), layer.w_in, layer.b_in, layer.w_out, layer.b_out, depth, "gelu")
    assert relative_error(layer(x), expected.reshape(2, 3, 4)) < 1e-13


def test_the_backend_reports_a_float64_tree_op_as_torch_ops():
    torch.manual_seed(3)
    layer = fff.torch.TreeFFN(8, 6, 2).double()
    x = torch.randn(4, 8, dtype=torch.float64)
    report = fff.torch.Report()
    torch._dynamo.reset()
    compiled = torch.compile(layer, backend=lambda gm, example: fff.torch.backend(gm, example, report=report))
    with torch.no_grad():
        assert relative_error(compiled(x), layer(x)) < 1e-15
    assert [(r.kind, r.pipeline) for r in report.regions] == [("fff::tree_ffn", "torch")]


@pytest.mark.parametrize("backend", [None, "inductor", "fff"])
def test_a_tree_layer_trains(backend):
    torch.manual_seed(0)
    layer = fff.torch.TreeFFN(16, 8, depth=3, trees=2)
    target = fff.torch.TreeFFN(16, 8, depth=3, trees=2)
    losses = fit(layer, target, backend)
    assert losses[-1] < 0.5 * losses[0], losses


def fit(layer, target, backend, width=16, steps=30):
    """The losses of `steps` Adam steps fitting `layer` (eager, or compiled
    with `backend` and fullgraph) to `target`'s outputs on random rows
    `width` wide."""
    step = layer if backend is None else torch.compile(layer, backend=backend, fullgraph=True)
    optimizer = torch.optim.Adam(layer.parameters(), lr=1e-2)
    x = torch.randn(256, width)
    with torch.no_grad():
        y = target(x)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = (step(x) - y).pow(2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_compiled_gradients_equal_eager_ones():
    torch.manual_seed(1)
    layer = fff.torch.TreeFFN(24, 12, depth=4, activation="silu")
    x = torch.randn(3, 7, 24, requires_grad=True)
    dy = torch.randn(3, 7, 12)
    eager = torch.autograd.grad(layer(x), [x, *layer.parameters()], dy)
    compiled = torch.compile(layer, fullgraph=True)
    got = torch.autograd.grad(compiled(x), [x, *layer.parameters()], dy)
    for e, g in zip(eager, got):
        assert torch.allclose(e, g, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make", [lambda: fff.torch.TreeFFN(24, 12, depth=4, trees=2),
                                  lambda: fff.torch.LeafTreeFFN(24, 5, 12, depth=3)], ids=["tree", "leaf-tree"])
def test_a_tree_layer_s_result_changed_in_place_trains(make):
    """autograd refuses an in-place change of a view that a custom op's
    Function returned: the tree ops return none, so their result may be
    scaled in place as a model's own tensor may."""
    torch.manual_seed(2)
    layer = make()
    x, scale, dy = torch.randn(3, 7, 24), torch.linspace(0.5, 1.5, 12), torch.randn(3, 7, 12)

    def gradients(in_place):
        leaf = x.clone().requires_grad_()
        y = layer(leaf)
        assert not y._is_view()
        if in_place:
            y *= scale
        else:
            y = y * scale
        return torch.autograd.grad(y, [leaf, *layer.parameters()], dy, allow_unused=True)

    for actual, expected in zip(gradients(in_place=True), gradients(in_place=False)):
        assert (actual is None) == (expected is None) and (actual is None or torch.equal(actual, expected))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
def test_cpu_backward_runs_on_the_fff_kernel_and_matches_the_torch_op_backward(dtype, bias):
    # fff::tree_ffn_backward on CPU tensors is fff's tree_ffn_grad kernel:
    # bitwise its result, run after run, and within rounding of the
    # torch-op backward (which f64 and CUDA tensors take).
    from fff.torch import _devices, _kernels
    generator = torch.Generator().manual_seed(5)
    inputs = tensors(301, 40, 24, 6, 2, dtype, bias, generator)
    dy = torch.randn(301, 24, generator=generator).to(dtype)
    got = torch.ops.fff.tree_ffn_backward(dy, *inputs, 6, "gelu")
    again = torch.ops.fff.tree_ffn_backward(dy, *inputs, 6, "gelu")
    kernel = _kernels.tree_ffn_grad(dy, *inputs, 6, "gelu", _devices.CPU)
    torch_ops = tree_ffn_backward(dy, *inputs, 6, "gelu")
    for g, a, k, t in zip(got, again, kernel, torch_ops):
        if t is None:
            assert g.numel() == 0 and k is None
            continue
        assert torch.equal(g, a) and torch.equal(g, k)
        assert g.dtype == t.dtype and g.shape == t.shape
        assert relative_error(g, t) < TOLERANCE[dtype]


def test_an_empty_batch_gets_zero_weight_gradients():
    layer = fff.torch.TreeFFN(12, 6, depth=3)
    x = torch.randn(0, 12, requires_grad=True)
    layer(x).sum().backward()
    assert x.grad.shape == (0, 12)
    assert all(p.grad is not None and not p.grad.any() for p in layer.parameters())


def test_the_cpu_backward_routes_every_row_as_the_forward_kernel_did():
    # Rows in the null space of every w_in row (64 wide, 63 nodes), nudged
    # by 1e-7: each logit is within f32 rounding of 0, where another order
    # of the sums (float64's, here) routes otherwise. The backward's kernel sums each
    # logit as the forward's does (the same vector accumulators, in the same
    # order), so it walks the forward's paths: the nodes whose weights get a
    # gradient are those the forward visited.
    depth, din = 5, 64
    nodes = 2 ** (depth + 1) - 1
    generator = torch.Generator().manual_seed(3)
    w_in = torch.randn(1, nodes, din, generator=generator, dtype=torch.float64)
    null = torch.linalg.svd(w_in[0]).Vh[-1]
    rows = null + 1e-7 * torch.randn(300, din, generator=generator, dtype=torch.float64)
    x, w_in = rows.float(), w_in.float()
    # The forward's route: identity activation and one-hot output rows put
    # node n's logit in column n when the row visited it, else 0.
    probe = torch.eye(nodes).unsqueeze(0)
    # (A logit of exactly 0 leaves its column 0: those rows' routes are seen
    # in part.)
    visited = fff.torch.tree_ffn(x, w_in, None, probe, None, depth, "identity") != 0
    whole = visited.sum(1).eq(depth + 1)
    assert whole.sum() >= 200
    w_out = torch.randn(1, nodes, 8, generator=generator)
    differs_from_float64 = 0
    for row in range(x.shape[0]):
        dy = torch.randn(1, 8, generator=generator)
        grads = torch.ops.fff.tree_ffn_backward(dy, x[row:row + 1], w_in, None, w_out, None, depth, "identity")
        touched = grads[1][0].abs().sum(-1) != 0
        assert touched.sum() == depth + 1 and (touched | ~visited[row]).all(), row
        if not whole[row]:
            continue
        nodes64, _ = tree_paths(x[row:row + 1].double(), w_in.double(), None, depth)
        differs_from_float64 += not torch.equal(torch.zeros(nodes, dtype=torch.bool).index_fill(0, nodes64[0, 0], True),
                                                visited[row])
    assert differs_from_float64 >= 3  # the case is as hard as meant (17 of 300 here)


@pytest.mark.parametrize("shape, dtype", [((4, 8), torch.float32), ((5, 3), torch.float32), ((5, 8), torch.bfloat16)])
def test_a_backward_of_the_wrong_output_gradient_says_so(shape, dtype):
    w, x = torch.randn(1, 7, 8), torch.randn(5, 8)
    with pytest.raises(ValueError, match=r"fff::tree_ffn_backward's dy is .*expected \[5, 8\] torch.float32"):
        torch.ops.fff.tree_ffn_backward(torch.randn(shape).to(dtype), x, w, None, w, None, 2, "gelu")


def _leaf_weights(depth=2, din=8, width=5, dout=6):
    leaves = 2 ** depth
    return [torch.randn(leaves - 1, din), torch.randn(leaves - 1), torch.randn(leaves, din, width),
            torch.randn(leaves, width), torch.randn(leaves, width, dout), torch.randn(leaves, dout)]


_TREE = [torch.randn(1, 7, 8), torch.randn(1, 7), torch.randn(1, 7, 8), None]


@pytest.mark.parametrize("call, message", [
    # Each backward op checks its arguments as its forward does, before any
    # code is compiled or indexed with a wrong depth.
    (lambda: torch.ops.fff.tree_ffn_backward(torch.randn(4, 8), torch.randn(4, 8), *_TREE, 5, "gelu"),
     r"a depth-5 tree has 63 nodes"),
    (lambda: torch.ops.fff.tree_ffn_backward(torch.randn(4, 8), torch.randn(4, 8), *_TREE, -2, "gelu"),
     r"fff::tree_ffn's depth must be in \[0, 20\], got -2"),
    (lambda: torch.ops.fff.tree_ffn_backward(torch.randn(4, 8), torch.randn(4, 8), *_TREE, 2, "nope"),
     "unknown activation 'nope'"),
    (lambda: torch.ops.fff.tree_ffn_backward(torch.ones(4, 8, dtype=torch.int32), torch.ones(4, 8, dtype=torch.int32),
                                             *_TREE, 2, "gelu"),
     "fff::tree_ffn takes f32, f16, bf16 or f64 tensors, not torch.int32"),
    (lambda: torch.ops.fff.tree_sublayer_backward(torch.randn(4, 8).double(), torch.randn(4, 8).double(),
                                                  torch.randn(4, 8).double(), "rms_norm", None, None, 1e-5,
                                                  "tree_ffn", [t.double() if t is not None else t for t in _TREE],
                                                  2, "gelu", "pre"),
     "fff::tree_sublayer takes f32, f16 or bf16 tensors, not torch.float64"),
    (lambda: torch.ops.fff.leaf_tree_ffn_backward(torch.randn(4, 3), torch.randn(4, 8), *_leaf_weights(), 2, "relu"),
     r"fff::leaf_tree_ffn_backward's dy is \[4, 3\] torch.float32 on cpu, expected \[4, 6\]"),
    (lambda: torch.ops.fff.leaf_tree_ffn_backward(torch.randn(4, 6), torch.randn(4, 8), *_leaf_weights(), 7, "relu"),
     r"a depth-7 leaf tree over rows 8 wide takes node_w \[127, 8\], got \[3, 8\]"),
    (lambda: torch.ops.fff.tree_sublayer_backward(torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8), "rms",
                                                  None, None, 1e-5, "tree_ffn", _TREE, 2, "gelu", "pre"),
     "fff::tree_sublayer's norm is layer_norm or rms_norm, not 'rms'"),
    (lambda: torch.ops.fff.tree_sublayer_backward(torch.randn(4, 3), torch.randn(4, 8), torch.randn(4, 8),
                                                  "rms_norm", None, None, 1e-5, "tree_ffn", _TREE, 2, "gelu", "pre"),
     r"fff::tree_sublayer_backward's dy is \[4, 3\]"),
])
def test_the_backward_ops_refuse_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_transposed_weight_trains_under_inductor():
    """The backward ops' results are contiguous whatever the weights'
    strides, and their fake kernels say so: a fake that kept a transposed
    w_out's strides failed Inductor's check of the real result's."""
    torch.manual_seed(0)
    w_in = torch.randn(1, 15, 16, requires_grad=True)
    b_in = torch.randn(1, 15, requires_grad=True)
    linear_out = torch.randn(8, 15, requires_grad=True)  # a Linear's [Dout, K*N]

    def layer(x):
        return torch.ops.fff.tree_ffn(x, w_in, b_in, linear_out.t().reshape(1, 15, 8), None, 3, "gelu")

    x, dy = torch.randn(6, 16), torch.randn(6, 8)
    grads = []
    for run in (layer, torch.compile(layer, backend="inductor")):
        for t in (w_in, b_in, linear_out):
            t.grad = None
        leaf = x.clone().requires_grad_()
        run(leaf).backward(dy)
        grads.append([leaf.grad, w_in.grad, b_in.grad, linear_out.grad])
    for actual, expected in zip(*grads):
        assert torch.allclose(actual, expected, rtol=1e-5, atol=1e-6)


class _CheckpointedTreeBlocks(torch.nn.Module):
    """Pre-LN blocks under torch.utils.checkpoint: the first's feedforward
    a TreeFFN, the second's the authors' masked dense layer (raised to
    fff::tree_ffn by the backend)."""

    def __init__(self, width=24):
        super().__init__()
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(2))
        self.trees = torch.nn.ModuleList([fff.torch.TreeFFN(width, width, depth=3, trees=2),
                                          fff.torch.MaskedTreeFFN(width, width, 3, 2)])

    def block(self, i, x):
        return x + self.trees[i](self.norms[i](x))

    def forward(self, x):
        for i in range(2):
            x = torch.utils.checkpoint.checkpoint(self.block, i, x, use_reentrant=False)
        return x


@pytest.mark.parametrize("fallback", ["eager", "inductor"])
def test_tree_layers_in_checkpointed_blocks_are_reported_and_train(fallback):
    """Dynamo traces a checkpointed block into a subgraph of its own: the
    tree ops there are fff's (the authors' layer raised) and in the
    report, forward and backward, with eager's gradients."""
    import copy
    import functools
    torch.manual_seed(0)
    model = _CheckpointedTreeBlocks()
    reference = copy.deepcopy(model)
    report = fff.torch.Report()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=functools.partial(fff.torch.backend, report=report, fallback=fallback))
    x, dy = torch.randn(3, 5, 24), torch.randn(3, 5, 24)
    grads = []
    for run, module in ((compiled, model), (reference, reference)):
        leaf = x.clone().requires_grad_()
        run(leaf).backward(dy)
        grads.append([leaf.grad] + [p.grad for p in module.parameters()])
    for actual, expected in zip(*grads):
        assert relative_error(actual, expected.double()) < 1e-5
    assert report.taken["tree_ffn"] == 2 and report.backward_taken["tree_ffn_grad"] == 2, str(report)
    with torch.no_grad():
        report = fff.torch.explain(model, x, options={"fallback": fallback}, print_report=False)
    assert report.taken["tree_ffn"] == 2, str(report)

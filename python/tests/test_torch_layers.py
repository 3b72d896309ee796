"""fff.torch.TreeFFN and LeafTreeFFN: the custom ops fff::tree_ffn and
fff::leaf_tree_ffn on fff's CPU kernels against float64 references and the
FFF authors' own forwards; tracing through torch.compile and torch.export;
their errors."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fff.torch  # noqa: E402
from conftest import TOLERANCE, leaf_tree_ffn, tree_ffn  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def relative_error(actual, expected):
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    return np.linalg.norm(actual - expected) / np.linalg.norm(expected)


def as_float64(t):
    return t.detach().to(torch.float64).numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ["gelu", "silu"])
def test_tree_ffn_against_a_reference(dtype, activation):
    torch.manual_seed(0)
    layer = fff.torch.TreeFFN(40, 24, depth=4, trees=2, activation=activation, dtype=DTYPES[dtype])
    with torch.no_grad():
        layer.b_out.uniform_(-0.5, 0.5)
    x = torch.randn(3, 7, 40).to(DTYPES[dtype])
    y = layer(x)
    assert y.shape == (3, 7, 24) and y.dtype == DTYPES[dtype]
    params = [layer.w_in, layer.b_in, layer.w_out, layer.b_out]
    expected = tree_ffn(as_float64(x).reshape(-1, 40), *map(as_float64, params), 4, activation)
    assert relative_error(as_float64(y).reshape(-1, 24), expected) < TOLERANCE[dtype]


def test_leaf_tree_ffn_against_a_reference():
    torch.manual_seed(1)
    layer = fff.torch.LeafTreeFFN(32, 8, 20, depth=3)
    x = torch.randn(11, 32)
    params = [layer.node_w, layer.node_b, layer.w1, layer.b1, layer.w2, layer.b2]
    expected = leaf_tree_ffn(as_float64(x), *map(as_float64, params), 3)
    assert relative_error(layer(x).detach().numpy(), expected) < TOLERANCE["f32"]


def test_an_empty_batch_and_no_biases():
    layer = fff.torch.TreeFFN(16, 8, depth=2, bias=False)
    assert layer(torch.randn(0, 16)).shape == (0, 8)
    x = torch.randn(5, 16)
    no_bias_in, no_bias_out = np.zeros(layer.w_in.shape[:2]), np.zeros(8)
    expected = tree_ffn(as_float64(x), as_float64(layer.w_in), no_bias_in, as_float64(layer.w_out), no_bias_out, 2)
    assert relative_error(layer(x).detach().numpy(), expected) < TOLERANCE["f32"]


class UltraFastBERTLayer(torch.nn.Module):
    """UltraFastBERT's FFF layer as its authors' training code computes it
    (training/cramming/architectures/fff.py): every node's logit from one
    Linear, hard decisions (logit > 0) along each tree's path, the path's
    activations through a bias-free Linear. Written here from that code's
    structure, since the code is not packaged."""

    def __init__(self, input_width, output_width, depth, parallel_size):
        super().__init__()
        self.input_width, self.output_width = input_width, output_width
        self.depth, self.parallel_size = depth, parallel_size
        self.n_nodes = 2 ** (depth + 1) - 1
        self.linear_in = torch.nn.Linear(input_width, parallel_size * self.n_nodes, bias=True)
        self.linear_out = torch.nn.Linear(parallel_size * self.n_nodes, output_width, bias=False)
        self.activation = torch.nn.GELU()

    def forward(self, oldx):
        x = oldx.reshape(-1, self.input_width)
        batch = x.shape[0]
        logits = self.linear_in(x)
        decisions = (logits > 0).long().view(batch, self.parallel_size, self.n_nodes)
        logits = self.activation(logits).view(batch, self.parallel_size, self.n_nodes)
        with torch.no_grad():
            nodes = torch.zeros((batch, self.parallel_size), dtype=torch.long)
            on_path = torch.zeros_like(logits)
            on_path.scatter_(2, nodes.unsqueeze(-1), 1.0)
            for level in range(self.depth):
                platform, next_platform = 2 ** level - 1, 2 ** (level + 1) - 1
                moves = torch.gather(decisions, 2, nodes.unsqueeze(2)).squeeze(2)
                nodes = (nodes - platform) * 2 + moves + next_platform
                on_path.scatter_(2, nodes.unsqueeze(-1), 1.0)
        y = self.linear_out((logits * on_path).flatten(1, 2))
        return y.reshape(*oldx.shape[:-1], self.output_width)


def test_converted_from_ultrafastbert():
    torch.manual_seed(2)
    theirs = UltraFastBERTLayer(48, 32, depth=5, parallel_size=3).eval()
    ours = fff.torch.TreeFFN.from_ultrafastbert(theirs)
    x = torch.randn(4, 6, 48)
    with torch.no_grad():
        assert relative_error(ours(x).numpy(), theirs(x).numpy()) < TOLERANCE["f32"]


def test_converted_from_fastfeedforward():
    fastfeedforward = pytest.importorskip("fastfeedforward", reason="the fastfeedforward package is not installed")
    torch.manual_seed(3)
    theirs = fastfeedforward.FFF(24, 10, 16, depth=3).eval()
    with torch.no_grad():  # b2s, which eval ignores, must stay ignored.
        theirs.b2s.uniform_(-1, 1)
    ours = fff.torch.LeafTreeFFN.from_fastfeedforward(theirs)
    x = torch.randn(9, 24)
    with torch.no_grad():
        assert relative_error(ours(x).numpy(), theirs(x).numpy()) < TOLERANCE["f32"]


class PreLNTreeBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(32)
        self.ffn = fff.torch.TreeFFN(32, 32, depth=3)

    def forward(self, x):
        return x + self.ffn(self.ln(x))


def test_a_model_whose_ffn_is_a_tree_compiles_with_the_fff_backend():
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")
    torch.manual_seed(4)
    model = PreLNTreeBlock().eval()
    x = torch.randn(2, 5, 32)
    report = fff.torch.explain(model, x, print_report=False)
    assert report.taken == {"layer_norm": 1, "tree_ffn": 1}, str(report)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", fullgraph=True)
    with torch.no_grad():
        assert relative_error(compiled(x).numpy(), model(x).numpy()) < TOLERANCE["f32"]


def test_the_ops_trace_through_torch_export():
    exported = torch.export.export(PreLNTreeBlock().eval(), (torch.randn(3, 32),))
    assert "fff.tree_ffn" in str(exported.graph)


def test_asking_for_a_gradient_says_why_there_is_none():
    layer = fff.torch.TreeFFN(8, 8, depth=1)
    y = layer(torch.randn(2, 8))
    with pytest.raises(RuntimeError, match="no gradient: fff runs tree layers for inference only"):
        y.sum().backward()


@pytest.mark.parametrize("call, message", [
    (lambda: fff.torch.TreeFFN(8, 4, depth=2)(torch.randn(3, 9)), "x rows are 9 wide, but w_in takes 8"),
    (lambda: fff.torch.TreeFFN(8, 4, depth=2)(torch.randn(3, 8, dtype=torch.float64)), "f32, f16 or bf16"),
    (lambda: fff.torch.tree_ffn(torch.randn(2, 8), torch.randn(1, 6, 8), None, torch.randn(1, 6, 4), None, 2),
     "a depth-2 tree has 7 nodes"),
    (lambda: fff.torch.TreeFFN(8, 4, depth=1, activation="tanh"), "unknown activation 'tanh'"),
    (lambda: fff.torch.LeafTreeFFN(8, 4, 4, depth=2)(torch.randn(3, 8).to(torch.float16)),
     "node_w is torch.float32, but x is torch.float16"),
])
def test_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()

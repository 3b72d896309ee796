"""The backend raises UltraFastBERT's own layer (the authors' masked dense
formulation) to fff::tree_ffn, by what it computes
(fff/torch/_masked_trees.py): values and gradients against eager, and the
near misses it must leave alone."""

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")

import fff.torch  # noqa: E402
from test_torch_layers import UltraFastBERTLayer  # noqa: E402


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm()).item()


class TiesGoRight(UltraFastBERTLayer):
    """The authors' inference code's routing (logit >= 0): not fff.tree_ffn
    where a logit is exactly 0."""

    @staticmethod
    def decide(logits):
        return logits >= 0


class ReshapedAsInput(UltraFastBERTLayer):
    """The authors' last reshape as it is: y.reshape_as(x)."""

    def shaped_like(self, y, x):
        return y.reshape_as(x)


class DenseFeedforward(torch.nn.Module):
    """Linear (with bias), GELU, Linear (without): a tree of depth 0 with
    one tree per neuron, which matrix products compute faster."""

    def __init__(self):
        super().__init__()
        self.linear_in = torch.nn.Linear(32, 63)
        self.linear_out = torch.nn.Linear(63, 32, bias=False)

    def forward(self, x):
        return self.linear_out(torch.nn.functional.gelu(self.linear_in(x)))


class PostLNBlock(torch.nn.Module):
    def __init__(self, feedforward, width=32):
        super().__init__()
        self.norm, self.feedforward = torch.nn.LayerNorm(width), feedforward

    def forward(self, h):
        return self.norm(h + self.feedforward(h))


def _layers():
    torch.manual_seed(0)
    return {
        "ultrafastbert d4 K2": UltraFastBERTLayer(32, 32, depth=4, parallel_size=2),
        "ultrafastbert d3 relu": UltraFastBERTLayer(32, 32, depth=3, parallel_size=1, activation=torch.nn.ReLU),
        "ultrafastbert d3 K3 reshaped as input": ReshapedAsInput(32, 32, depth=3, parallel_size=3),
        "masked tree ffn d5": fff.torch.MaskedTreeFFN(32, 32, 5, 1),
    }


@pytest.mark.parametrize("name", list(_layers()))
@pytest.mark.parametrize("training", [False, True])
def test_the_authors_layer_runs_as_tree_ffn(name, training):
    model = PostLNBlock(_layers()[name])
    x = torch.randn(3, 9, 32, requires_grad=training)
    with torch.set_grad_enabled(training):
        report = fff.torch.explain(copy.deepcopy(model), x, backward=training, options={"fallback": "eager"},
                                   print_report=False)
    assert report.taken["tree_ffn"] == 1, str(report)
    assert not any(name == "linear" for (name, _) in report.left), str(report)
    if training:
        assert report.backward_calls["tree_ffn_grad"] == 1, str(report)
    torch._dynamo.reset()
    compiled_model = copy.deepcopy(model)
    compiled = torch.compile(compiled_model, backend="fff")
    for shape in [(3, 9, 32), (5, 7, 32), (2, 11, 32)]:  # the second compiles for a dynamic batch
        x = torch.randn(shape)
        if not training:
            with torch.no_grad():
                assert relative_error(compiled(x), model(x)) < 1e-5
            continue
        leaf, reference = x.clone().requires_grad_(), x.clone().requires_grad_()
        dy = torch.randn(shape)
        compiled_model.zero_grad()
        model.zero_grad()
        compiled(leaf).backward(dy)
        model(reference).backward(dy)
        assert relative_error(leaf.grad, reference.grad) < 1e-5
        for p, q in zip(compiled_model.parameters(), model.parameters()):
            assert relative_error(p.grad, q.grad) < 1e-5


@pytest.mark.parametrize("training", [False, True])
def test_a_batch_of_no_rows_after_one_with_rows(training):
    """Dynamo compiles a batch of 0 rows as a graph of its own (after a
    dynamic one), its reshapes fixed to 0 rows: there the layer is not
    raised (every candidate's values are empty), and the result is eager's,
    not an error."""
    torch.manual_seed(0)
    model = ReshapedAsInput(32, 32, depth=4, parallel_size=2)
    compiled_model = copy.deepcopy(model)
    torch._dynamo.reset()
    compiled = torch.compile(compiled_model, backend="fff")
    for shape in [(3, 9, 32), (5, 7, 32), (0, 4, 32)]:
        x = torch.randn(shape, requires_grad=training)
        with torch.set_grad_enabled(training):
            y = compiled(x)
        assert y.shape == shape
        if training:
            compiled_model.zero_grad()
            y.backward(torch.randn(shape))
            assert x.grad.shape == shape
    if training:  # no rows: every parameter's gradient is 0, as eager's
        model.zero_grad()
        model(torch.randn(0, 4, 32, requires_grad=True)).backward(torch.randn(0, 4, 32))
        for p, q in zip(compiled_model.parameters(), model.parameters()):
            assert torch.equal(p.grad, q.grad)


@pytest.mark.parametrize("make", [lambda: TiesGoRight(32, 32, depth=3, parallel_size=2), DenseFeedforward],
                         ids=["ties go right", "dense feedforward"])
def test_what_is_not_the_authors_layer_is_left_alone(make):
    torch.manual_seed(0)
    model = make()
    with torch.no_grad():
        report = fff.torch.explain(copy.deepcopy(model), torch.randn(4, 32), print_report=False)
        assert "tree_ffn" not in report.taken, str(report)
        torch._dynamo.reset()
        x = torch.randint(-1, 2, (64, 32)).float()  # ties, where TiesGoRight differs
        assert relative_error(torch.compile(copy.deepcopy(model), backend="fff")(x), model(x)) < 1e-6

"""The backend raises UltraFastBERT's own layers (the authors' masked dense
training layer, and the index_select and bmm walk of their inference
benchmarks) to fff::tree_ffn, by what they compute
(fff/torch/_masked_trees.py): values and gradients against eager, in
static and dynamic-batch graphs, and the near misses it must leave
alone."""

import copy
import functools

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")

import fff.torch  # noqa: E402
from test_torch_layers import UltraFastBERTLayer  # noqa: E402


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm()).item()


class TiesGoRight(UltraFastBERTLayer):
    """The authors' inference code's routing (logit >= 0): fff.tree_ffn
    with zero_goes_right."""

    @staticmethod
    def decide(logits):
        return logits >= 0


class OffsetThreshold(UltraFastBERTLayer):
    """Routing on logit > 0.1: no fff.tree_ffn routes so."""

    @staticmethod
    def decide(logits):
        return logits > 0.1


class ReshapedAsInput(UltraFastBERTLayer):
    """The authors' last reshape as it is: y.reshape_as(x)."""

    def shaped_like(self, y, x):
        return y.reshape_as(x)


class WalkedTree(torch.nn.Module):
    """The FFF layer of UltraFastBERT's inference benchmarks
    (benchmark_pytorch/fff/fff_bmm.py, and benchmark_cuda's alike), written
    here from that code's structure: one tree of `w1s` [N, Din] and `w2s`
    [N, Dout], no biases. Each level gathers every row's node weights
    (index_select), takes the logit with a batched product, records node
    and logit in preallocated buffers and moves on (a logit >= 0 goes
    right); then GELU of the logits times the path's gathered w2s rows, in
    one bmm: a result of [B, 1, Dout]."""

    def __init__(self, input_width, depth, output_width):
        super().__init__()
        self.input_width, self.depth, self.output_width = input_width, depth, output_width
        self.n_nodes = 2 ** (depth + 1) - 1
        self.w1s = torch.nn.Parameter(torch.empty(self.n_nodes, input_width).uniform_(-input_width ** -0.5,
                                                                                      input_width ** -0.5))
        self.w2s = torch.nn.Parameter(torch.empty(self.n_nodes, output_width).uniform_(-(depth + 1) ** -0.5,
                                                                                       (depth + 1) ** -0.5))

    def forward(self, x):
        batch = x.shape[0]
        node = torch.zeros((batch,), dtype=torch.long, device=x.device)
        visited = torch.zeros(batch, self.depth + 1, dtype=torch.long, device=x.device)
        logits = torch.empty((batch, self.depth + 1), dtype=torch.float, device=x.device)
        for level in range(self.depth + 1):
            visited[:, level] = node
            plane = self.w1s.index_select(dim=0, index=node)
            logit = torch.bmm(x.unsqueeze(1), plane.unsqueeze(-1)).squeeze(-1).squeeze(-1)
            logits[:, level] = logit
            node = node * 2 + self.decide(logit).long() + 1
        rows_out = self.w2s.index_select(0, index=visited.flatten()).view(batch, self.depth + 1, self.output_width)
        return torch.bmm(torch.nn.functional.gelu(logits).unsqueeze(1), rows_out)

    @staticmethod
    def decide(logit):
        return logit >= 0


class WalkedTiesGoLeft(WalkedTree):
    """The walk with the training layer's decision (logit > 0)."""

    @staticmethod
    def decide(logit):
        return logit > 0


class RowsOf(torch.nn.Module):
    """The walked layer, which takes rows [B, Din], on x [..., Din]: its
    result [B, 1, Dout] as [..., Dout]."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], self.layer.output_width)


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
        "ultrafastbert d3 K2 ties go right": TiesGoRight(32, 32, depth=3, parallel_size=2),
        "masked tree ffn d5": fff.torch.MaskedTreeFFN(32, 32, 5, 1),
        "walked tree d4": RowsOf(WalkedTree(32, 4, 32)),
        "walked tree d3 ties go left": RowsOf(WalkedTiesGoLeft(32, 3, 32)),
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
    assert not any(name in ("linear", "bmm") for (name, _) in report.left), str(report)
    if training:
        assert report.backward_calls["tree_ffn_grad"] == 1, str(report)
    torch._dynamo.reset()
    compiled_model = copy.deepcopy(model)
    report = fff.torch.Report()
    compiled = torch.compile(compiled_model, backend=functools.partial(fff.torch.backend, report=report))
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
    # Both graphs, the dynamic batch's too, run the layer as fff's.
    assert report.graphs == 2 and report.taken["tree_ffn"] == 2, str(report)


@pytest.mark.parametrize("name", ["ultrafastbert d4 K2", "ultrafastbert d3 K2 ties go right", "walked tree d4",
                                  "walked tree d3 ties go left"])
@pytest.mark.parametrize("training", [False, True])
def test_a_raised_layer_routes_ties_as_the_layer_does(name, training):
    """Weights and rows of small integers: logits exact, and exactly 0 on
    many paths. The raised call sends those rows where the layer does (a
    logit of 0 right in the authors' inference code, left in their
    training layer), values and gradients."""
    layer = _layers()[name]
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for weight in (p for n, p in layer.named_parameters() if n.endswith(("linear_in.weight", "bias", "w1s"))):
            weight.copy_(torch.randint(-1, 2, weight.shape, generator=generator))
    x = torch.randint(-1, 2, (64, 32), generator=generator) * (torch.rand(64, 32, generator=generator) < 0.15)
    x, dy = x.float(), torch.randn(64, 32, generator=generator)
    report = fff.torch.Report()
    torch._dynamo.reset()
    compiled_layer = copy.deepcopy(layer)
    compiled = torch.compile(compiled_layer, backend=functools.partial(fff.torch.backend, report=report,
                                                                       fallback="eager"))
    leaves = [x.clone().requires_grad_(training) for _ in range(2)]
    with torch.set_grad_enabled(training):
        actual, expected = compiled(leaves[0]), layer(leaves[1])
    assert report.taken["tree_ffn"] == 1, str(report)
    assert relative_error(actual, expected) < 1e-5
    if training:
        actual.backward(dy)
        expected.backward(dy)
        assert relative_error(leaves[0].grad, leaves[1].grad) < 1e-5
        for p, q in zip(compiled_layer.parameters(), layer.parameters()):
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


@pytest.mark.parametrize("make", [lambda: OffsetThreshold(32, 32, depth=3, parallel_size=2), DenseFeedforward,
                                  lambda: RowsOf(WalkedTree(32, 0, 32))],
                         ids=["offset threshold", "dense feedforward", "walked tree of depth 0"])
def test_what_is_not_the_authors_layer_is_left_alone(make):
    torch.manual_seed(0)
    model = make()
    with torch.no_grad():
        report = fff.torch.explain(copy.deepcopy(model), torch.randn(4, 32), print_report=False)
        assert "tree_ffn" not in report.taken, str(report)
        torch._dynamo.reset()
        x = torch.randint(-1, 2, (64, 32)).float()  # ties, and logits of 0.1 apart
        assert relative_error(torch.compile(copy.deepcopy(model), backend="fff")(x), model(x)) < 1e-6

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

    def __init__(self, input_width, output_width, depth, parallel_size, activation=torch.nn.GELU):
        super().__init__()
        self.input_width, self.output_width = input_width, output_width
        self.depth, self.parallel_size = depth, parallel_size
        self.n_nodes = 2 ** (depth + 1) - 1
        self.linear_in = torch.nn.Linear(input_width, parallel_size * self.n_nodes, bias=True)
        self.linear_out = torch.nn.Linear(parallel_size * self.n_nodes, output_width, bias=False)
        self.activation = activation()

    def forward(self, oldx):
        x = oldx.reshape(-1, self.input_width)
        batch = x.shape[0]
        logits = self.linear_in(x)
        decisions = self.decide(logits).long().view(batch, self.parallel_size, self.n_nodes)
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
        return self.shaped_like(y, oldx)

    def shaped_like(self, y, x):
        """The rows y in x's leading dims. The authors' code reshapes y as
        x (reshape_as), which holds only where the widths agree;
        ReshapedAsInput does so."""
        return y.reshape(*x.shape[:-1], self.output_width)

    @staticmethod
    def decide(logits):
        """Which logits send their row right: theirs is `logits > 0`."""
        return logits > 0


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
    def __init__(self, leaf=False, dtype=torch.float32, residual_from_x=True, norm="layer_norm", eps=1e-6):
        super().__init__()
        if norm == "layer_norm":
            self.ln = torch.nn.LayerNorm(32, dtype=dtype)
        else:
            self.ln = torch.nn.RMSNorm(32, eps=eps, dtype=dtype)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            if getattr(self.ln, "bias", None) is not None:
                self.ln.bias.uniform_(-0.3, 0.3)
        self.ffn = (fff.torch.LeafTreeFFN(32, 8, 32, depth=2) if leaf else
                    fff.torch.TreeFFN(32, 32, depth=3)).to(dtype)
        self.residual_from_x = residual_from_x

    def forward(self, x):
        residual = x if self.residual_from_x else x * 0.5
        return residual + self.ffn(self.ln(x))


@pytest.mark.parametrize("leaf, dtype, residual_from_x, norm", [
    (False, torch.float32, True, "layer_norm"), (True, torch.float32, True, "layer_norm"),
    (False, torch.bfloat16, True, "layer_norm"), (False, torch.float32, False, "layer_norm"),
    (False, torch.float32, True, "rms_norm"), (True, torch.bfloat16, True, "rms_norm")])
def test_a_pre_ln_tree_sublayer_is_one_fff_call_under_the_fff_backend(leaf, dtype, residual_from_x, norm):
    """The norm, the tree layer and the residual add become fff::tree_sublayer
    (one fused unit), whose result matches eager's at two batch shapes."""
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")
    torch.manual_seed(4)
    model = PreLNTreeBlock(leaf, dtype, residual_from_x, norm).eval()
    x = torch.randn(2, 5, 32, dtype=dtype)
    report = fff.torch.explain(model, x, grad=False, fallback="eager", print_report=False)
    layer = "leaf_tree_ffn" if leaf else "tree_ffn"
    assert report.taken == {norm: 1, layer: 1}, str(report)
    assert report.ops_taken == report.ops - (0 if residual_from_x else 1), str(report)
    torch._dynamo.reset()
    graphs = []

    def capture(gm, example_inputs):
        compiled = fff.torch.backend(gm, example_inputs, fallback="eager")
        graphs.append(gm.code)  # the code the backend left to run
        return compiled

    compiled = torch.compile(model, backend=capture, fullgraph=True)
    tolerance = {torch.float32: TOLERANCE["f32"], torch.bfloat16: TOLERANCE["bf16"]}[dtype]
    with torch.no_grad():
        for shape in ((2, 5, 32), (3, 7, 32)):
            x = torch.randn(shape, dtype=dtype)
            assert relative_error(as_float64(compiled(x)), as_float64(model(x))) < tolerance
    assert "fff.tree_sublayer" in graphs[0]


def assert_compiled_matches_eager(model, dtype):
    """torch.compile(model, backend="fff", fullgraph=True) against eager at
    two shapes (the second recompiles with dynamic extents)."""
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", fullgraph=True)
    tolerance = {torch.float32: TOLERANCE["f32"], torch.bfloat16: TOLERANCE["bf16"]}[dtype]
    with torch.no_grad():
        for shape in ((2, 5, 32), (3, 7, 32)):
            x = torch.randn(shape, dtype=dtype)
            assert relative_error(as_float64(compiled(x)), as_float64(model(x))) < tolerance


class PostLNTreeBlock(torch.nn.Module):
    """BERT's FFN sublayer with a tree layer for its two linears:
    norm(h + dropout(ffn(h)))."""

    def __init__(self, leaf=False, dtype=torch.float32, norm="layer_norm"):
        super().__init__()
        self.ffn = (fff.torch.LeafTreeFFN(32, 8, 32, depth=2) if leaf else
                    fff.torch.TreeFFN(32, 32, depth=3)).to(dtype)
        self.dropout = torch.nn.Dropout(0.1)
        self.ln = torch.nn.LayerNorm(32, dtype=dtype) if norm == "layer_norm" else \
            torch.nn.RMSNorm(32, eps=None, dtype=dtype)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            if getattr(self.ln, "bias", None) is not None:
                self.ln.bias.uniform_(-0.3, 0.3)

    def forward(self, h):
        return self.ln(h + self.dropout(self.ffn(h)))


@pytest.mark.parametrize("leaf, dtype, norm", [
    (False, torch.float32, "layer_norm"), (True, torch.float32, "layer_norm"),
    (False, torch.bfloat16, "layer_norm"), (False, torch.float32, "rms_norm"), (True, torch.bfloat16, "rms_norm")])
def test_a_post_ln_tree_sublayer_is_one_fff_call_under_the_fff_backend(leaf, dtype, norm):
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")
    torch.manual_seed(10)
    model = PostLNTreeBlock(leaf, dtype, norm).eval()
    report = fff.torch.explain(model, torch.randn(2, 5, 32, dtype=dtype), grad=False, fallback="eager",
                               print_report=False)
    assert [r.kind for r in report.regions] == ["fff::tree_sublayer"], str(report)
    assert report.taken == {norm: 1, "leaf_tree_ffn" if leaf else "tree_ffn": 1}, str(report)
    assert report.ops_taken == report.ops, str(report)
    assert_compiled_matches_eager(model, dtype)


def test_a_post_ln_sublayer_in_training_mode_keeps_its_dropout():
    """A dropout that drops (train mode) is no part of a sublayer: the tree
    op, the dropout, the add and the norm stay apart."""
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")
    model = PostLNTreeBlock().train()
    report = fff.torch.explain(model, torch.randn(4, 32), grad=False, fallback="eager", print_report=False)
    assert "fff::tree_sublayer" not in [r.kind for r in report.regions], str(report)


class LlamaRMSNorm(torch.nn.Module):
    """LLaMA's RMSNorm as transformers writes it: upcast, pow, mean, rsqrt,
    downcast, weight."""

    def __init__(self, width, dtype):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(width, dtype=dtype).uniform_(0.5, 1.5))

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + 1e-6)).to(dtype)


@pytest.mark.parametrize("leaf, dtype", [(False, torch.float32), (True, torch.float32), (False, torch.bfloat16)])
def test_a_hand_written_rms_norm_before_a_tree_layer_is_part_of_the_sublayer(leaf, dtype):
    """The norm is a region that raising finds to be one rms_norm of the
    region's inputs: with the tree op and the add, one fff::tree_sublayer."""
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")

    class Block(PreLNTreeBlock):
        def __init__(self):
            super().__init__(leaf=leaf, dtype=dtype)
            self.ln = LlamaRMSNorm(32, dtype)

    torch.manual_seed(11)
    model = Block().eval()
    report = fff.torch.explain(model, torch.randn(2, 5, 32, dtype=dtype), grad=False, fallback="eager",
                               print_report=False)
    assert [r.kind for r in report.regions] == ["fff::tree_sublayer"], str(report)
    assert report.taken == {"rms_norm": 1, "leaf_tree_ffn" if leaf else "tree_ffn": 1}, str(report)
    assert_compiled_matches_eager(model, dtype)


def test_a_region_that_is_more_than_a_norm_is_not_part_of_a_sublayer():
    """The region also scales the norm's result by 2 before the tree: not
    one norm of its inputs, so region, tree op and add stay apart."""
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")

    class Scaled(PreLNTreeBlock):
        def __init__(self):
            super().__init__()
            self.ln = LlamaRMSNorm(32, torch.float32)

        def forward(self, x):
            return x + self.ffn(self.ln(x) * 2.0)

    torch.manual_seed(12)
    model = Scaled().eval()
    x = torch.randn(4, 32)
    report = fff.torch.explain(model, x, grad=False, fallback="eager", print_report=False)
    assert [r.kind for r in report.regions] == ["fff::region", "fff::tree_ffn"], str(report)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff")
    with torch.no_grad():
        assert relative_error(as_float64(compiled(x)), as_float64(model(x))) < TOLERANCE["f32"]


def test_an_add_that_broadcasts_the_tree_result_is_not_a_sublayer():
    """The residual has a leading dim the tree's result lacks: the add
    broadcasts, which one fff::tree_sublayer call does not, so the ops stay
    apart and the results match."""
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")

    class Broadcast(PreLNTreeBlock):
        def forward(self, x, residual):
            return residual + self.ffn(self.ln(x))

    torch.manual_seed(13)
    model = Broadcast().eval()
    x, residual = torch.randn(4, 32), torch.randn(2, 4, 32)
    report = fff.torch.explain(model, x, residual, grad=False, fallback="eager", print_report=False)
    assert "fff::tree_sublayer" not in [r.kind for r in report.regions], str(report)
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend="fff")(x, residual)
        assert relative_error(as_float64(got), as_float64(model(x, residual))) < TOLERANCE["f32"]


def test_a_tree_whose_ties_go_right_is_not_a_sublayer():
    """fff::tree_sublayer's tree sends a logit of 0 left: a tree op called
    with zero_goes_right stays apart from its norm (and its routing is the
    op's own: test/Runtime/tree-zero-goes-right.py)."""
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")

    class TiesRight(PreLNTreeBlock):
        def forward(self, x):
            tree = self.ffn
            return x + fff.torch.tree_ffn(self.ln(x), tree.w_in, None, tree.w_out, tree.b_out, tree.depth, "gelu",
                                          zero_goes_right=True)

    torch.manual_seed(6)
    model = TiesRight().eval()
    x = torch.randn(6, 32)
    report = fff.torch.explain(model, x, grad=False, fallback="eager", print_report=False)
    assert "fff::tree_sublayer" not in [r.kind for r in report.regions], str(report)
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend="fff")(x)
        expected = model(x)
        assert relative_error(as_float64(got), as_float64(expected)) < TOLERANCE["f32"]


def test_a_norm_read_twice_is_not_a_sublayer():
    """The norm's result is returned too: the tree op and the norm's region
    stay apart, and the add goes to the fallback."""
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")

    class Both(PreLNTreeBlock):
        def forward(self, x):
            n = self.ln(x)
            return x + self.ffn(n), n

    torch.manual_seed(5)
    model = Both().eval()
    x = torch.randn(4, 32)
    report = fff.torch.explain(model, x, grad=False, fallback="eager", print_report=False)
    assert report.taken == {"layer_norm": 1, "tree_ffn": 1}, str(report)
    assert report.ops_taken == 2, str(report)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", fullgraph=True)
    with torch.no_grad():
        for got, expected in zip(compiled(x), model(x)):
            assert relative_error(as_float64(got), as_float64(expected)) < TOLERANCE["f32"]


def test_a_norm_with_f32_parameters_on_bf16_rows_is_not_a_sublayer():
    """torch's LayerNorm takes f32 parameters on bf16 rows; fff.layer_norm
    does not, so the three ops stay apart, and the results still match."""
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")

    class Mixed(PreLNTreeBlock):
        def __init__(self):
            super().__init__(dtype=torch.bfloat16)
            self.ln = self.ln.float()

    torch.manual_seed(6)
    model = Mixed().eval()
    x = torch.randn(4, 32, dtype=torch.bfloat16)
    report = fff.torch.explain(model, x, grad=False, fallback="eager", print_report=False)
    assert report.ops_taken == 2, str(report)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", fullgraph=True)
    with torch.no_grad():
        assert relative_error(as_float64(compiled(x)), as_float64(model(x))) < TOLERANCE["bf16"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_rms_norm_without_epsilon_takes_its_dtypes_machine_epsilon(dtype):
    """nn.RMSNorm(eps=None) divides by sqrt(mean(x^2) + eps), eps the machine
    epsilon of the type torch computes in (f32 for bf16, not bf16's 2^-7):
    on rows of magnitude 1e-3 a wrong epsilon (1e-5, say) would be off by
    far more than the tolerance."""
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")
    torch.manual_seed(7)
    model = PreLNTreeBlock(norm="rms_norm", eps=None, dtype=dtype).eval()
    torch._dynamo.reset()
    codes = []

    def capture(gm, example_inputs):
        compiled = fff.torch.backend(gm, example_inputs, fallback="eager")
        codes.append(gm.code)
        return compiled

    compiled = torch.compile(model, backend=capture, fullgraph=True)
    tolerance = {torch.float32: TOLERANCE["f32"], torch.bfloat16: TOLERANCE["bf16"]}[dtype]
    with torch.no_grad():
        for rows in (4, 9):
            x = (torch.randn(rows, 32) * 1e-3).to(dtype)
            assert relative_error(as_float64(compiled(x)), as_float64(model(x))) < tolerance
    assert "fff.tree_sublayer" in codes[0]


@pytest.mark.parametrize("in_place", [False, True])
def test_an_eval_dropout_between_the_tree_and_the_add_is_part_of_the_sublayer(in_place):
    """ViT's `residual + dropout(ffn(norm(x)))`, and `h += ...` on a new
    residual, in eval mode: one fff::tree_sublayer."""
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")

    class WithDropout(PreLNTreeBlock):
        def __init__(self):
            super().__init__()
            self.dropout = torch.nn.Dropout(0.1)

        def forward(self, x):
            h = x * 0.5
            if in_place:
                h += self.dropout(self.ffn(self.ln(x)))
                return h
            return h + self.dropout(self.ffn(self.ln(x)))

    torch.manual_seed(8)
    model = WithDropout().eval()
    x = torch.randn(6, 32)
    report = fff.torch.explain(model, x, grad=False, fallback="eager", print_report=False)
    assert [r.kind for r in report.regions] == ["fff::tree_sublayer"], str(report)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", fullgraph=True)
    with torch.no_grad():
        for rows in (6, 11):
            x = torch.randn(rows, 32)
            assert relative_error(as_float64(compiled(x)), as_float64(model(x))) < TOLERANCE["f32"]


def test_an_in_place_add_into_the_callers_residual_is_not_a_sublayer():
    """`x += ffn(norm(x))` writes into the caller's tensor, which one
    fff call would not: the add stays with the fallback, and x is written."""
    pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")

    class IntoInput(PreLNTreeBlock):
        def forward(self, x):
            x += self.ffn(self.ln(x))
            return x

    torch.manual_seed(9)
    model = IntoInput().eval()
    report = fff.torch.explain(model, torch.randn(4, 32), grad=False, fallback="eager", print_report=False)
    assert "fff::tree_sublayer" not in [r.kind for r in report.regions], str(report)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff")
    x = torch.randn(4, 32)
    eager_x, fff_x = x.clone(), x.clone()
    with torch.no_grad():
        model(eager_x)
        compiled(fff_x)
    assert relative_error(as_float64(fff_x), as_float64(eager_x)) < TOLERANCE["f32"]


def test_the_ops_trace_through_torch_export():
    exported = torch.export.export(PreLNTreeBlock().eval(), (torch.randn(3, 32),))
    assert "fff.tree_ffn" in str(exported.graph)


@pytest.mark.parametrize("call, message", [
    (lambda: fff.torch.TreeFFN(8, 4, depth=2)(torch.randn(3, 9)), "x rows are 9 wide, but w_in takes 8"),
    (lambda: fff.torch.TreeFFN(8, 4, depth=2)(torch.randn(3, 8, dtype=torch.float64)),
     "w_in is torch.float32, but x is torch.float64: a tree layer's tensors share one dtype"),
    (lambda: fff.torch.TreeFFN(8, 4, depth=2)(torch.ones(3, 8, dtype=torch.int64)),
     "fff::tree_ffn takes f32, f16, bf16 or f64 tensors, not torch.int64"),
    (lambda: fff.torch.tree_ffn(torch.randn(2, 8), torch.randn(1, 6, 8), None, torch.randn(1, 6, 4), None, 2),
     "a depth-2 tree has 7 nodes"),
    (lambda: fff.torch.TreeFFN(8, 4, depth=1, activation="tanh"), "unknown activation 'tanh'"),
    (lambda: fff.torch.LeafTreeFFN(8, 4, 4, depth=0),
     r"fff::leaf_tree_ffn's depth must be in \[1, 20\], got 0"),
    (lambda: fff.torch.TreeFFN(8, 4, depth=21), r"fff::tree_ffn's depth must be in \[0, 20\], got 21"),
    (lambda: fff.torch.LeafTreeFFN(8, 4, 4, depth=2)(torch.randn(3, 8).to(torch.float16)),
     "node_w is torch.float32, but x is torch.float16"),
    (lambda: torch.ops.fff.tree_sublayer(torch.randn(3, 8), torch.randn(3, 5), "layer_norm", None, None, 1e-5,
                                         "tree_ffn", [torch.randn(1, 3, 8), None, torch.randn(1, 3, 4), None], 1,
                                         "gelu"),
     r"the residual is \[3, 5\] torch.float32, expected \[3, 4\] torch.float32"),
    (lambda: torch.ops.fff.tree_sublayer(torch.randn(3, 8), torch.randn(3, 4), "layer_norm", torch.randn(7), None,
                                         1e-5, "tree_ffn", [torch.randn(1, 3, 8), None, torch.randn(1, 3, 4), None],
                                         1, "gelu"),
     r"norm_weight is \[7\] torch.float32, expected \[8\] torch.float32"),
    (lambda: torch.ops.fff.tree_sublayer(torch.randn(3, 8), torch.randn(3, 4), "layer_norm", None, None, 1e-5,
                                         "mlp", [], 1, "gelu"),
     "fff::tree_sublayer's layer is tree_ffn or leaf_tree_ffn, not 'mlp'"),
    (lambda: torch.ops.fff.tree_sublayer(torch.randn(3, 8), torch.randn(3, 4), "batch_norm", None, None, 1e-5,
                                         "tree_ffn", [], 1, "gelu"),
     "fff::tree_sublayer's norm is layer_norm or rms_norm, not 'batch_norm'"),
    (lambda: torch.ops.fff.tree_sublayer(torch.randn(3, 8), torch.randn(3, 4), "rms_norm", None, torch.randn(8),
                                         1e-5, "tree_ffn", [], 1, "gelu"),
     "rms_norm takes no bias"),
    (lambda: torch.ops.fff.tree_sublayer(torch.randn(3, 8), torch.randn(3, 4), "layer_norm", None, None, 1e-5,
                                         "leaf_tree_ffn", [torch.randn(3, 8)], 1, "relu"),
     "leaf_tree_ffn takes 6 weights, got 1"),
    (lambda: torch.ops.fff.tree_sublayer(torch.randn(3, 8), torch.randn(3, 4), "layer_norm", None, None, 1e-5,
                                         "tree_ffn", [torch.randn(1, 3, 8), None, torch.randn(1, 3, 4), None], 1,
                                         "gelu", "middle"),
     "fff::tree_sublayer's order is 'pre' or 'post', not 'middle'"),
    (lambda: torch.ops.fff.tree_sublayer(torch.randn(3, 8), torch.randn(3, 4), "layer_norm", torch.randn(8), None,
                                         1e-5, "tree_ffn", [torch.randn(1, 3, 8), None, torch.randn(1, 3, 4), None],
                                         1, "gelu", "post"),
     r"norm_weight is \[8\] torch.float32, expected \[4\] torch.float32"),
    (lambda: fff.torch.TreeFFN(0, 4, depth=2), "TreeFFN's input_width is 0: it must be at least 1"),
    (lambda: fff.torch.TreeFFN(8, 4, depth=2, trees=0), "TreeFFN's trees is 0: it must be at least 1"),
    (lambda: fff.torch.LeafTreeFFN(8, 0, 4, depth=2), "LeafTreeFFN's leaf_width is 0: it must be at least 1"),
    (lambda: fff.torch.tree_ffn(torch.randn(2, 8), torch.randn(1, 7, 8), None, torch.randn(1, 7, 0), None, 2),
     "fff::tree_ffn's output width Dout is 0: it must be at least 1"),
    (lambda: torch.ops.fff.leaf_tree_ffn(torch.tensor(1.0), torch.randn(1, 1), torch.randn(1), torch.randn(2, 1, 2),
                                         torch.randn(2, 2), torch.randn(2, 2, 1), torch.randn(2, 1), 1, "relu"),
     r"fff::leaf_tree_ffn takes x \[..., Din\], w1 \[L, Din, W\] and w2 \[L, W, Dout\]"),
])
def test_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()

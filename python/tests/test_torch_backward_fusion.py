"""The residual stream's gradient and a dropout's mask fused into fff's norm
backward (_backward_fusion.py): the trained norms' backward ops with
`residual_grad` and `dy_keep` against the unfused ops, the graph passes on
their matches and near misses, and training graphs under
torch.compile(backend="fff") whose fused backward gives the unfused
backward's bits."""

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")

import fff.torch  # noqa: E402  (registers the backend and the ops)
from fff.torch import _backward_fusion  # noqa: E402
from fff.torch._backward_fusion import fuse_dropout_masks, fuse_residual_grads  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def layer_norm_backward(dy, x, weight, residual_grad=None, **masked):
    _, mean, rstd = torch.ops.fff.layer_norm_train(x, weight, None, 1, 1e-5)
    return torch.ops.fff.layer_norm_train_backward(dy, x, mean, rstd, weight, 1, False, 1e-5,
                                                   residual_grad=residual_grad, **masked)


def rms_norm_backward(dy, x, weight, residual_grad=None, **masked):
    return torch.ops.fff.rms_norm_train_backward(dy, x, weight, 1, 1e-6, residual_grad=residual_grad, **masked)


BACKWARDS = [layer_norm_backward, rms_norm_backward]
# (x's dtype, the weight's): the weight f32 for a half-width x is torch's
# mixed-type norm, whose backward widens x and dy as it reads them.
DTYPE_PAIRS = [(dtype, dtype) for dtype in DTYPES] + [(torch.float16, torch.float32), (torch.bfloat16, torch.float32)]


@pytest.mark.parametrize("dtype, weight_dtype", DTYPE_PAIRS, ids=str)
@pytest.mark.parametrize("backward", BACKWARDS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", [(37, 200), (3, 5, 4096), (1, 3)], ids=str)
def test_residual_grad_gives_the_unfused_ops_bits(backward, dtype, weight_dtype, shape):
    """With residual_grad the op returns residual_grad + dx, as torch's add
    of its own dx would, bit for bit; the parameter gradients are those
    without it."""
    generator = torch.Generator().manual_seed(1)
    x, dy, residual = (torch.randn(shape, generator=generator).to(dtype) for _ in range(3))
    weight = torch.randn(shape[-1:], generator=generator).to(weight_dtype)
    apart = backward(dy, x, weight)
    fused = backward(dy, x, weight, residual)
    assert torch.equal(fused[0], residual + apart[0])
    for a, b in zip(fused[1:], apart[1:]):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype, weight_dtype", DTYPE_PAIRS, ids=str)
@pytest.mark.parametrize("backward", BACKWARDS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", [(37, 200), (3, 5, 4096), (1, 3)], ids=str)
def test_a_dropout_mask_on_dy_gives_the_unfused_ops_bits(backward, dtype, weight_dtype, shape):
    """With dy_keep the op's gradients are those of dy * (keep ? scale : 0),
    as the backward graph computes it once Inductor compiles it (in f32,
    then one rounding), bit for bit, with and without a residual
    gradient; a NaN or inf dropped from dy stays NaN, as torch's product
    with 0 is."""
    generator = torch.Generator().manual_seed(2)
    x, dy, residual = (torch.randn(shape, generator=generator).to(dtype) for _ in range(3))
    weight = torch.randn(shape[-1:], generator=generator).to(weight_dtype)
    keep = torch.rand(shape, generator=generator) > 0.25
    keep.view(-1)[0] = False
    scale = 1 / 0.75
    kept = (dy.float() * (keep.float() * scale)).to(dtype)
    apart = backward(kept, x, weight)
    fused = backward(dy, x, weight, dy_keep=keep, dy_scale=scale)
    for a, b in zip(fused, apart):
        assert torch.equal(a, b)
    accumulated = backward(dy, x, weight, residual, dy_keep=keep, dy_scale=scale)
    assert torch.equal(accumulated[0], residual + apart[0])
    dy.view(-1)[0] = float("inf")
    kept = (dy.float() * (keep.float() * scale)).to(dtype)
    for a, b in zip(backward(dy, x, weight, dy_keep=keep, dy_scale=scale), backward(kept, x, weight)):
        assert torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())


@pytest.mark.parametrize("keep, message", [
    (torch.ones(4, 7, dtype=torch.bool), "dy_keep must be a bool mask of x's shape \\(4, 8\\), got \\(4, 7\\)"),
    (torch.ones(4, 8), "dy_keep must be a bool mask of x's shape .* got \\(4, 8\\) torch.float32"),
])
def test_a_dy_keep_unlike_x_is_a_one_line_error(keep, message):
    with pytest.raises(ValueError, match=message):
        rms_norm_backward(torch.randn(4, 8), torch.randn(4, 8), None, dy_keep=keep, dy_scale=2.0)


@pytest.mark.parametrize("residual, message", [
    (torch.randn(4, 7), "residual_grad must have x's shape \\(4, 8\\) and dtype torch.float32, got \\(4, 7\\)"),
    (torch.randn(4, 8).half(), "residual_grad must have x's shape .* got \\(4, 8\\) torch.float16"),
])
def test_a_residual_grad_unlike_x_is_a_one_line_error(residual, message):
    with pytest.raises(ValueError, match=message):
        rms_norm_backward(torch.randn(4, 8), torch.randn(4, 8), None, residual)


def traced(function, *args):
    """`function` as an ATen graph whose nodes carry fake values, as
    Inductor's post-grad graphs do."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(function, tracing_mode="fake")(*args)


def backward_calls(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and "train_backward" in str(n.target)]


def fused_count_and_result(function, *args):
    gm = traced(function, *args)
    fused = fuse_residual_grads(gm.graph)
    gm.recompile()
    return fused, gm(*args), gm


ARGS = [torch.randn(6, 32), torch.randn(6, 32), torch.randn(32), torch.randn(6, 32)]


def test_the_pass_fuses_the_residual_add_and_keeps_the_values():
    def step(dy, x, weight, residual):
        dx, dweight = rms_norm_backward(dy, x, weight)
        return residual + dx, dweight * 2

    fused, result, gm = fused_count_and_result(step, *ARGS)
    assert fused == 1
    (call,) = backward_calls(gm)
    assert call.kwargs["residual_grad"] is not None
    assert not [n for n in gm.graph.nodes if n.target is torch.ops.aten.add.Tensor]
    expected = step(*ARGS)
    assert all(torch.equal(a, b) for a, b in zip(result, expected))


def test_a_chain_of_pre_ln_blocks_fuses_every_add():
    """dh2 = dresidual + dx2, then dh1 = dh2 + dx1: the second add reads the
    first fused call's result."""
    def step(dy, x, weight, residual):
        dx2, _ = rms_norm_backward(dy, x, weight)
        dh2 = residual + dx2
        dx1, _ = rms_norm_backward(dh2, x, weight)
        return dh2 + dx1

    fused, result, _ = fused_count_and_result(step, *ARGS)
    assert fused == 2
    assert torch.equal(result, step(*ARGS))


@pytest.mark.parametrize("step", [
    # dx has a second reader: the add cannot take it over.
    lambda dy, x, w, r: (lambda g: (r + g[0], g[0] * 3))(rms_norm_backward(dy, x, w)),
    # alpha != 1.
    lambda dy, x, w, r: torch.add(r, rms_norm_backward(dy, x, w)[0], alpha=2),
    # The other addend broadcasts (a row), or has another dtype.
    lambda dy, x, w, r: r[:1] + rms_norm_backward(dy, x, w)[0],
    lambda dy, x, w, r: r.double() + rms_norm_backward(dy, x, w)[0],
    # dx added to itself.
    lambda dy, x, w, r: (lambda dx: dx + dx)(rms_norm_backward(dy, x, w)[0]),
], ids=["dx-read-twice", "alpha", "broadcast", "dtype", "dx-plus-dx"])
def test_near_misses_stay_apart(step):
    fused, result, _ = fused_count_and_result(step, *ARGS)
    assert fused == 0
    expected = step(*ARGS)
    pairs = zip(result, expected) if isinstance(expected, tuple) else [(result, expected)]
    assert all(torch.equal(a, b) for a, b in pairs)


def test_an_addend_computed_after_a_parameter_gradient_is_read_stays_apart():
    """The call would move to where the addend is defined, after a reader
    of dweight: the graph would read dweight before it is computed."""
    def step(dy, x, weight, residual):
        dx, dweight = rms_norm_backward(dy, x, weight)
        late = residual * dweight.sum()
        return late + dx

    fused, result, _ = fused_count_and_result(step, *ARGS)
    assert fused == 0
    assert torch.equal(result, step(*ARGS))


def dropped(grad, mask, scale=1.25):
    """A dropout's backward as Inductor's post-grad graph holds it."""
    return grad * (torch.ops.prims.convert_element_type(mask, grad.dtype) * scale)


MASK_ARGS = ARGS + [torch.rand(6, 32) > 0.2]


@pytest.mark.parametrize("form", [
    lambda g, m: dropped(g, m),
    lambda g, m: (torch.ops.prims.convert_element_type(m, g.dtype) * 1.25) * g,
    lambda g, m: g * (1.25 * torch.ops.prims.convert_element_type(m, g.dtype)),
    lambda g, m: g * torch.ops.prims.convert_element_type(m, g.dtype),
], ids=["grad-times-factor", "factor-times-grad", "scale-first", "no-scale"])
def test_the_pass_fuses_a_dropout_mask_and_keeps_the_values(form):
    def step(dy, x, weight, residual, mask):
        dx, dweight = rms_norm_backward(form(dy, mask), x, weight)
        return residual + dx, dweight

    gm = traced(step, *MASK_ARGS)
    assert fuse_dropout_masks(gm.graph) == 1
    assert fuse_residual_grads(gm.graph) == 1
    gm.recompile()
    (call,) = backward_calls(gm)
    assert call.kwargs["dy_keep"] is not None and call.kwargs["residual_grad"] is not None
    assert not [n for n in gm.graph.nodes if n.target is torch.ops.aten.mul.Tensor]
    assert all(torch.equal(a, b) for a, b in zip(gm(*MASK_ARGS), step(*MASK_ARGS)))


@pytest.mark.parametrize("step", [
    # dy has a second reader.
    lambda dy, x, w, r, m: (lambda d: (rms_norm_backward(d, x, w)[0], d * 2))(dropped(dy, m)),
    # The mask broadcasts (a row), is not bool, or the grad has another
    # shape than dy (a broadcast row).
    lambda dy, x, w, r, m: rms_norm_backward(dropped(dy, m[:1]), x, w)[0],
    lambda dy, x, w, r, m: rms_norm_backward(dy * (m.float() * 1.25), x, w)[0],
    lambda dy, x, w, r, m: rms_norm_backward(dropped(dy[:1], m), x, w)[0],
    # A tensor scale, a mask of another dtype's conversion.
    lambda dy, x, w, r, m: rms_norm_backward(dy * (torch.ops.prims.convert_element_type(m, dy.dtype) * r), x, w)[0],
    lambda dy, x, w, r, m: rms_norm_backward(
        dy * torch.ops.prims.convert_element_type(m, torch.float64).float(), x, w)[0],
], ids=["dy-read-twice", "broadcast-mask", "float-mask", "broadcast-grad", "tensor-scale", "other-dtype"])
def test_dropout_near_misses_stay_apart(step):
    gm = traced(step, *MASK_ARGS)
    assert fuse_dropout_masks(gm.graph) == 0
    gm.recompile()
    expected = step(*MASK_ARGS)
    result = gm(*MASK_ARGS)
    pairs = zip(result, expected) if isinstance(expected, tuple) else [(result, expected)]
    assert all(torch.equal(a, b) for a, b in pairs)


def test_a_masked_backward_fff_refuses_is_left_to_the_graph(monkeypatch):
    """The pass compiles the masked backward before it fuses: where fff
    refuses it, the graph keeps its own product."""
    from fff.torch import _training

    def refuse(*args):
        raise _training.Unsupported("it did not compile: refused for this test")

    monkeypatch.setattr(_training, "prepare_masked_dy", refuse)

    def step(dy, x, weight, residual, mask):
        return rms_norm_backward(dropped(dy, mask), x, weight)[0]

    gm = traced(step, *MASK_ARGS)
    assert fuse_dropout_masks(gm.graph) == 0
    gm.recompile()
    assert torch.equal(gm(*MASK_ARGS), step(*MASK_ARGS))


class DroppedNorm(torch.nn.Module):
    """dropout(norm(h)) then a product, as BERT's embeddings: the norm's dy
    is the dropout's backward."""

    def __init__(self, width, dtype, norm):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width, dtype=dtype) if norm == "layer_norm" else \
            torch.nn.RMSNorm(width, eps=1e-6, dtype=dtype)
        self.drop = torch.nn.Dropout(0.2)
        self.out = torch.nn.Linear(width, width, dtype=dtype)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)

    def forward(self, h):
        h = h * 1.5
        return self.out(h + self.drop(self.norm(h)))


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_training_graphs_fuse_dropout_masks_and_keep_the_bits(dtype, norm, monkeypatch):
    """Under the Inductor fallback a train-mode dropout's backward after a
    norm joins fff's norm backward call (and the residual gradient with
    it); the gradients have the bits of the same run with the mask
    applied by Inductor's own code (the same seed draws the same mask)."""
    torch.manual_seed(0)
    model = DroppedNorm(96, dtype, norm).train()
    x = torch.randn(4, 9, 96, dtype=dtype)
    grads = {}
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(_backward_fusion, "fuse_dropout_masks", lambda graph: 0)
        torch._dynamo.reset()
        trained = copy.deepcopy(model)
        leaf = x.clone().requires_grad_()
        torch.manual_seed(7)
        out = torch.compile(trained, backend="fff")(leaf)
        out.float().square().sum().backward()
        grads[fused] = [out, leaf.grad] + [p.grad for p in trained.parameters()]
    for a, b in zip(grads[True], grads[False]):
        assert torch.equal(a, b)
    monkeypatch.undo()
    torch.manual_seed(7)
    report = fff.torch.explain(copy.deepcopy(model), x.clone().requires_grad_(), backward=True, print_report=False)
    assert dict(report.backward_dy_masks) == {f"{norm}_grad": 1}, str(report)
    assert dict(report.backward_residual_grads) == {f"{norm}_grad": 1}, str(report)
    assert "applied a dropout's mask to dy" in str(report)


class ResidualNorms(torch.nn.Module):
    """Two pre-LN residual steps around norms alone: the backward is fff's
    norm backward calls and adds, nothing that Inductor could compute with
    other bits than eager."""

    def __init__(self, width, dtype):
        super().__init__()
        self.first = torch.nn.LayerNorm(width, dtype=dtype)
        self.second = torch.nn.RMSNorm(width, eps=1e-6, dtype=dtype)
        with torch.no_grad():
            for p in self.parameters():
                p.uniform_(0.5, 1.5)

    def forward(self, h):
        h = h + self.first(h)
        return h + self.second(h)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_training_graphs_fuse_the_residual_adds_and_keep_the_bits(dtype):
    """Under the Inductor fallback the backward's residual adds join fff's
    norm backward calls; the gradients have the bits of the eager fallback,
    whose adds are torch's own."""
    torch.manual_seed(0)
    model = ResidualNorms(96, dtype)
    x = torch.randn(4, 9, 96, dtype=dtype)
    dy = torch.randn(4, 9, 96, dtype=dtype)
    grads = {}
    for fallback in ("inductor", "eager"):
        torch._dynamo.reset()
        trained = copy.deepcopy(model)
        leaf = x.clone().requires_grad_()
        torch.compile(trained, backend="fff", options={"fallback": fallback})(leaf).backward(dy)
        grads[fallback] = [leaf.grad] + [p.grad for p in trained.parameters()]
    for fused, apart in zip(grads["inductor"], grads["eager"]):
        assert torch.equal(fused, apart)
    report = fff.torch.explain(copy.deepcopy(model), x.clone().requires_grad_(), backward=True, print_report=False)
    assert dict(report.backward_residual_grads) == {"layer_norm_grad": 1, "rms_norm_grad": 1}, str(report)
    assert "added the residual stream's gradient to dx" in str(report)


def test_a_llama_training_step_fuses_its_residual_adds():
    """Every decoder layer's two RMSNorms are pre-LN: each backward gets the
    residual gradient; the final norm's input has no other reader."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    model = transformers.LlamaForCausalLM(config)
    ids = torch.randint(0, 64, (2, 16))
    report = fff.torch.explain(model, ids, backward=True, print_report=False)
    assert report.backward_calls["rms_norm_grad"] == 5, str(report)
    assert report.backward_residual_grads["rms_norm_grad"] == 4, str(report)

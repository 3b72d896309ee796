"""Training through fff: the trained norms' ops (fff::layer_norm_train,
fff::rms_norm_train and their backward ops) against torch.autograd, and
torch.compile(backend="fff") training transformers' LLaMA and BERT models
(small configs, random weights) step for step with eager."""

import copy
import functools

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import fff.torch  # noqa: E402  (registers the backend and the ops)

# f32 arithmetic in fff and in torch, then one rounding to the type.
TOLERANCE = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm().clamp_min(1e-30)).item()


def torch_grads(kind, x, weight, bias, normalized_ndim, eps, dy):
    """torch's norm and its autograd gradients in float64."""
    leaves = [None if t is None else t.detach().double().requires_grad_() for t in (x, weight, bias)]
    shape = x.shape[x.dim() - normalized_ndim:]
    if kind == "layer_norm":
        y = torch.nn.functional.layer_norm(leaves[0], shape, leaves[1], leaves[2], eps)
    else:
        y = torch.nn.functional.rms_norm(leaves[0], shape, leaves[1], eps)
    y.backward(dy.double())
    return [y] + [None if t is None else t.grad for t in leaves]


def fff_grads(kind, x, weight, bias, normalized_ndim, eps, dy):
    leaves = [None if t is None else t.detach().clone().requires_grad_() for t in (x, weight, bias)]
    if kind == "layer_norm":
        y = torch.ops.fff.layer_norm_train(leaves[0], leaves[1], leaves[2], normalized_ndim, eps)[0]
    else:
        y = torch.ops.fff.rms_norm_train(leaves[0], leaves[1], normalized_ndim, eps)
    y.backward(dy)
    return [y] + [None if t is None else t.grad for t in leaves]


CASES = [
    # (kind, input shape, normalized dims, weight, bias)
    ("layer_norm", (37, 768), 1, True, True),
    ("layer_norm", (5, 7, 127), 1, True, False),
    ("layer_norm", (3, 4, 33), 2, False, True),
    ("layer_norm", (1, 3), 1, False, False),
    ("layer_norm", (130, 64), 1, True, True),  # more rows than row blocks
    ("rms_norm", (37, 1000), 1, True, False),
    ("rms_norm", (2, 9, 65), 1, False, False),
    ("rms_norm", (4, 6, 20), 2, True, False),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kind, shape, normalized_ndim, has_weight, has_bias", CASES)
def test_trained_norm_gradients_match_torch_autograd(kind, shape, normalized_ndim, has_weight, has_bias, dtype):
    generator = torch.Generator().manual_seed(sum(shape) + normalized_ndim)
    normalized = shape[len(shape) - normalized_ndim:]
    x = (torch.randn(shape, generator=generator) * 3 + 1).to(dtype)
    dy = torch.randn(shape, generator=generator).to(dtype)
    weight = torch.randn(normalized, generator=generator).to(dtype) if has_weight else None
    bias = torch.randn(normalized, generator=generator).to(dtype) if has_bias and kind == "layer_norm" else None
    eps = 1e-5 if kind == "layer_norm" else 1e-6
    expected = torch_grads(kind, x, weight, bias, normalized_ndim, eps, dy)
    actual = fff_grads(kind, x, weight, bias, normalized_ndim, eps, dy)
    for name, a, e in zip(("y", "dx", "dweight", "dbias"), actual, expected):
        if e is None:
            assert a is None, name
            continue
        assert a.dtype == dtype and a.shape == e.shape, name
        assert relative_error(a, e) < TOLERANCE[dtype], f"{name}: {relative_error(a, e):.2e}"


class _FFFBackward(torch.autograd.Function):
    """torch's own norm forward in float64, fff's backward (f32 arithmetic):
    gradcheck compares fff's gradients with finite differences of the true
    function."""

    @staticmethod
    def forward(ctx, kind, x, weight, bias, eps):
        ctx.save_for_backward(x, weight, bias)
        ctx.kind, ctx.eps = kind, eps
        if kind == "layer_norm":
            return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps)
        return torch.nn.functional.rms_norm(x, x.shape[-1:], weight, eps)

    @staticmethod
    def backward(ctx, dy):
        x, weight, bias = ctx.saved_tensors
        f32 = [t.float() for t in (dy, x, weight)]
        if ctx.kind == "layer_norm":
            _, mean, rstd = torch.ops.fff.layer_norm_train(f32[1], f32[2], bias.float(), 1, ctx.eps)
            dx, dweight, dbias = torch.ops.fff.layer_norm_train_backward(f32[0], f32[1], mean, rstd, f32[2], 1,
                                                                          True, ctx.eps)
            return None, dx.double(), dweight.double(), dbias.double(), None
        dx, dweight = torch.ops.fff.rms_norm_train_backward(f32[0], f32[1], f32[2], 1, ctx.eps)
        return None, dx.double(), dweight.double(), None, None


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_gradcheck_of_the_backward_ops_in_float64(kind):
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(6, 11, dtype=torch.float64, generator=generator, requires_grad=True)
    weight = torch.randn(11, dtype=torch.float64, generator=generator, requires_grad=True)
    bias = torch.randn(11, dtype=torch.float64, generator=generator, requires_grad=kind == "layer_norm")
    # fff's gradients are f32: atol and rtol at f32's accuracy.
    assert torch.autograd.gradcheck(lambda *t: _FFFBackward.apply(kind, *t, 1e-5), (x, weight, bias),
                                    atol=1e-4, rtol=1e-3)


def llama():
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=4, attn_implementation="eager")
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():  # RMSNorm weights start at 1: make them tell.
        for module in model.modules():
            if type(module).__name__ == "LlamaRMSNorm":
                module.weight.uniform_(0.5, 1.5)
    return model


def bert():
    # No dropout: eager and compiled runs draw different masks.
    config = transformers.BertConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return transformers.BertForMaskedLM(config)


# (model, the norms fff must train in it)
MODELS = [(llama, {"rms_norm": 5}), (bert, {"layer_norm": 6})]


def batches(steps, seed=3):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 128, (4, 16), generator=generator) for _ in range(steps)]


def train(model, optimizer, steps, compiled=None):
    """Losses of `steps` training steps."""
    run = model if compiled is None else compiled
    losses = []
    for ids in batches(steps):
        loss = run(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.detach())
    return losses


@pytest.mark.parametrize("make, norms", MODELS, ids=lambda m: getattr(m, "__name__", ""))
def test_explain_reports_the_backward(make, norms):
    torch.manual_seed(0)
    report = fff.torch.explain(make(), batches(1)[0], backward=True, options={"fallback": "eager"},
                               print_report=False)
    assert dict(report.taken) == norms, str(report)
    grads = {f"{name}_grad": count for name, count in norms.items()}
    assert dict(report.backward_taken) == grads and dict(report.backward_calls) == grads, str(report)
    assert "backward:" in str(report) and next(iter(grads)) in str(report)


@pytest.mark.parametrize("fallback", ["eager", "inductor"])
@pytest.mark.parametrize("make, norms", MODELS, ids=lambda m: getattr(m, "__name__", ""))
def test_adamw_steps_give_eager_losses(make, norms, fallback):
    torch.manual_seed(0)
    model = make()
    reference = copy.deepcopy(model)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", options={"fallback": fallback})
    steps = 20 if fallback == "eager" else 5  # Inductor compiles for a minute
    losses = train(model, torch.optim.AdamW(model.parameters(), lr=1e-3), steps, compiled)
    expected = train(reference, torch.optim.AdamW(reference.parameters(), lr=1e-3), steps)
    for step, (loss, eager) in enumerate(zip(losses, expected)):
        assert abs(loss.item() - eager.item()) <= 1e-5 * abs(eager.item()), f"step {step}: {loss} vs {eager}"


@pytest.mark.parametrize("make, norms", MODELS, ids=lambda m: getattr(m, "__name__", ""))
def test_sgd_parameters_match_eager_and_two_runs_match_bitwise(make, norms):
    torch.manual_seed(0)
    initial = make()
    runs = []
    for _ in range(2):
        model = copy.deepcopy(initial)
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="fff", options={"fallback": "eager"})
        train(model, torch.optim.SGD(model.parameters(), lr=0.1), 10, compiled)
        runs.append(model)
    reference = copy.deepcopy(initial)
    train(reference, torch.optim.SGD(reference.parameters(), lr=0.1), 10)
    for (name, p), q, r in zip(runs[0].named_parameters(), runs[1].parameters(), reference.parameters()):
        assert torch.equal(p, q), f"{name} differs between two fff runs"
        # Relative to the parameter, or to 1e-3 per element where it is
        # rounding noise: a key bias's gradient is 0 in exact arithmetic
        # (softmax does not see a constant added to a row's logits).
        scale = max(r.double().norm().item(), 1e-3 * r.numel() ** 0.5)
        error = (p.double() - r.double()).norm().item() / scale
        assert error < 1e-5, f"{name}: {error:.2e}"


def test_a_second_batch_size_recompiles_once_forward_and_backward():
    torch.manual_seed(0)
    report = fff.torch.Report()
    model = bert()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=functools.partial(fff.torch.backend, report=report, fallback="eager"))
    for batch in (4, 5, 7, 3):
        ids = torch.randint(0, 128, (batch, 16))
        compiled(input_ids=ids, labels=ids).loss.backward()
    # The first batch size, then one graph with a dynamic batch for the rest.
    assert report.graphs == 2 and report.taken["layer_norm"] == 12, str(report)


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_requires_grad_leaves_the_forward_as_it_is(kind):
    torch.manual_seed(0)
    norm = torch.nn.LayerNorm(96) if kind == "layer_norm" else torch.nn.RMSNorm(96)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(10, 96)
    torch._dynamo.reset()
    compiled = torch.compile(norm, backend="fff", options={"fallback": "eager"})
    with torch.no_grad():
        inference = compiled(x)
    training = compiled(x.clone().requires_grad_())
    assert torch.equal(inference, training.detach())


class _JitteredNorm(torch.nn.Module):
    """A norm whose result is changed in place before its next use, as
    Switch Transformers' router multiplies it by noise in training."""

    def __init__(self, kind, width=40, graph_break=False):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width) if kind == "layer_norm" else torch.nn.RMSNorm(width)
        self.linear = torch.nn.Linear(width, 8)
        self.graph_break = graph_break

    def forward(self, x):
        y = self.norm(x)
        if self.graph_break:
            torch._dynamo.graph_break()
        y *= torch.linspace(0.5, 1.5, y.shape[-1])
        return self.linear(y)


@pytest.mark.parametrize("graph_break", [False, True], ids=["one-graph", "graph-break"])
@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_a_trained_norm_s_result_changed_in_place_trains_as_eager(kind, graph_break):
    """autograd refuses an in-place change of a view that a custom op's
    Function returned: fff's ops return none."""
    torch.manual_seed(0)
    model = _JitteredNorm(kind, graph_break=graph_break)
    with torch.no_grad():
        model.norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 5, 40)
    expected = torch.autograd.grad(model(x.clone().requires_grad_()).square().sum(),
                                   list(model.parameters()))
    compiled, report = _compiled_with_report(model, "eager")
    actual = torch.autograd.grad(compiled(x.clone().requires_grad_()).square().sum(), list(model.parameters()))
    assert report.taken[kind] == 1 and report.backward_taken[f"{kind}_grad"] == 1, str(report)
    for name, a, e in zip([n for n, _ in model.named_parameters()], actual, expected):
        assert relative_error(a, e) < 1e-5, name


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_the_trained_ops_results_are_not_views(kind):
    torch.manual_seed(0)
    x, weight, dy = torch.randn(2, 3, 16), torch.rand(16) + 0.5, torch.randn(2, 3, 16)
    leaf = x.clone().requires_grad_()
    if kind == "layer_norm":
        results = torch.ops.fff.layer_norm_train(leaf, weight, None, 1, 1e-5)
    else:
        results = (torch.ops.fff.rms_norm_train(leaf, weight, 1, 1e-5),)
    assert not any(r._is_view() for r in results)
    y = results[0]
    y *= 2  # raised "Output 0 of GeneratedBackwardFor_fff_..._train_default is a view" before
    y.backward(dy)
    expected = torch_grads(kind, x, weight, None, 1, 1e-5, 2 * dy)[1]
    assert relative_error(leaf.grad, expected) < TOLERANCE[torch.float32]


def test_a_norm_fff_does_not_train_stays_with_the_fallback_and_says_why():
    torch.manual_seed(0)
    norm = torch.nn.LayerNorm(16).double()
    x = torch.randn(4, 16, dtype=torch.float64, requires_grad=True)
    report = fff.torch.explain(norm, x, backward=True, options={"fallback": "eager"}, print_report=False)
    assert not report.taken and any("not trained by fff" in reason for (_, reason) in report.left), str(report)
    torch._dynamo.reset()
    compiled = torch.compile(norm, backend="fff", options={"fallback": "eager"})
    x, reference = (x.detach().clone().requires_grad_() for _ in range(2))
    dy = torch.randn(4, 16, dtype=torch.float64)
    compiled(x).backward(dy)
    norm(reference).backward(dy)
    assert relative_error(x.grad, reference.grad) < 1e-12


class NormsOfExtentsReadOffTheInput(torch.nn.Module):
    """Norms whose normalized_shape is read off their input (x.shape[-1:]),
    one before a tree layer: under dynamic=True the shape is a node of the
    graph, not ints."""

    def __init__(self, width):
        super().__init__()
        self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(width))
        self.bias = torch.nn.Parameter(0.1 * torch.randn(width))
        self.tree = fff.torch.TreeFFN(width, width, depth=2)

    def forward(self, x):
        h = torch.nn.functional.layer_norm(x, x.shape[-1:], self.weight, self.bias)
        h = torch.nn.functional.rms_norm(h, (h.shape[-1],), self.weight) * 2
        return h + self.tree(torch.nn.functional.layer_norm(h, h.shape[-1:]))


def test_norms_of_extents_read_off_a_dynamic_input_are_taken_where_guards_fix_them():
    """fff's passes raised TypeError ('Node' object is not iterable) on such
    a shape. They now read it as the value Dynamo traced: the parameters fix
    the width, so fff takes the norms, in inference and training."""
    torch.manual_seed(0)
    model = NormsOfExtentsReadOffTheInput(16)
    for grad in (False, True):
        compiled, report = _compiled_with_every_extent_dynamic(model)
        for shape in ((3, 5, 16), (4, 7, 16)):
            _assert_matches_eager(compiled, model, shape, grad)
        assert report.graphs == 1 and dict(report.taken) == {"layer_norm": 2, "rms_norm": 1, "tree_ffn": 1}, \
            str(report)


def _norm_of_any_width(x):
    return torch.nn.functional.layer_norm(x, x.shape[-1:]) * 2


def test_a_norm_whose_width_stays_dynamic_is_the_fallbacks():
    compiled, report = _compiled_with_every_extent_dynamic(_norm_of_any_width)
    for shape in ((3, 5, 16), (4, 7, 24)):
        x = torch.randn(shape)
        assert relative_error(compiled(x), _norm_of_any_width(x)) < TOLERANCE[torch.float32]
    assert report.graphs == 1 and not report.taken, str(report)


def _compiled_with_every_extent_dynamic(model):
    """torch.compile(model, dynamic=True) on fff, and the report it fills."""
    torch._dynamo.reset()
    report = fff.torch.Report()
    return torch.compile(model, dynamic=True,
                         backend=lambda gm, example: fff.torch.backend(gm, example, report=report)), report


def _assert_matches_eager(compiled, model, shape, grad):
    """`compiled` gives `model`'s result on a random f32 input of `shape`
    and, with `grad`, its gradients for the input and every parameter."""
    x, dy = torch.randn(shape, requires_grad=grad), torch.randn(shape)
    with torch.set_grad_enabled(grad):
        y, expected = compiled(x), model(x)
    assert relative_error(y, expected) < TOLERANCE[torch.float32]
    if grad:
        grads = [torch.autograd.grad(out, [x, *model.parameters()], dy) for out in (y, expected)]
        for actual, reference in zip(*grads):
            assert relative_error(actual, reference) < TOLERANCE[torch.float32]


class NormsOfFloatAttributes(torch.nn.Module):
    """LLaMA's hand-written RMSNorm, its eps a float attribute, then a
    LayerNorm: under dynamic=True Dynamo makes both floats graph inputs."""

    def __init__(self, width):
        super().__init__()
        self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(width))
        self.variance_epsilon = 1e-6
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.norm((self.weight * h).to(x.dtype))


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
def test_norms_whose_eps_dynamo_made_dynamic_are_taken_as_constants(grad):
    """Such an eps reached fff as a SymFloat, and fff left its norm to the
    fallback. fff now has Dynamo trace the frame again with the float a
    constant, guarded on its value, so that a changed eps recompiles."""
    torch.manual_seed(0)
    model = NormsOfFloatAttributes(16)
    compiled, report = _compiled_with_every_extent_dynamic(model)
    for eps, shape in ((1e-6, (3, 5, 16)), (0.5, (4, 7, 16)), (0.5, (2, 3, 16))):
        model.variance_epsilon = model.norm.eps = eps
        _assert_matches_eager(compiled, model, shape, grad)
    # One graph for each eps: the batch and sequence extents stay dynamic.
    assert report.graphs == 2 and dict(report.taken) == {"rms_norm": 2, "layer_norm": 2}, str(report)


class RMSNormOfAnEpsPassedIn(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(width))

    def forward(self, x, eps):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight


def test_an_eps_the_caller_passes_in_stays_dynamic():
    """An argument may change at every call, and as a constant each value
    would compile again: its norm stays with the fallback, in one graph."""
    torch.manual_seed(0)
    model = RMSNormOfAnEpsPassedIn(16)
    compiled, report = _compiled_with_every_extent_dynamic(model)
    for eps in (1e-6, 0.25, 0.5):
        x = torch.randn(3, 5, 16)
        with torch.no_grad():
            assert relative_error(compiled(x, eps), model(x, eps)) < TOLERANCE[torch.float32]
    assert report.graphs == 1 and not report.taken, str(report)
    assert any("a float that Dynamo keeps dynamic" in reason for (_, reason) in report.left), str(report)


def test_explain_backward_needs_grad():
    with pytest.raises(ValueError, match="needs grad"):
        fff.torch.explain(torch.nn.LayerNorm(4), torch.randn(2, 4), backward=True, grad=False)


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_a_double_backward_is_torch_s(kind):
    """backward(create_graph=True), a gradient penalty's: the trained ops'
    gradients are then differentiable (torch's ops compute them)."""
    torch.manual_seed(0)
    norm = torch.nn.LayerNorm(24) if kind == "layer_norm" else torch.nn.RMSNorm(24, eps=1e-6)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    torch._dynamo.reset()
    compiled = torch.compile(norm, backend="fff", options={"fallback": "eager"})
    x = torch.randn(5, 24)
    penalties = []
    for run in (compiled, norm):
        leaf = x.clone().requires_grad_()
        y = run(leaf)
        (grad,) = torch.autograd.grad((y * y).sum(), leaf, create_graph=True)
        norm.zero_grad()
        grad.square().sum().backward()
        penalties.append((grad.detach(), norm.weight.grad.clone()))
    for actual, expected in zip(*penalties):
        assert relative_error(actual, expected) < 1e-5


@pytest.mark.parametrize("call, error, message", [
    (lambda: torch.ops.fff.layer_norm_train(torch.randn(4, 8), torch.randn(7), None, 1, 1e-5),
     Exception, "argument #1 has shape \\[7\\] but the function takes \\[8\\]"),
    (lambda: torch.ops.fff.layer_norm_train(torch.randn(4, 8), None, None, 3, 1e-5),
     ValueError, "normalized_ndim must be in \\[1, 2\\]"),
    (lambda: torch.ops.fff.rms_norm_train(torch.randn(4, 8).double(), None, 1, 1e-5),
     Exception, "f32, f16 and bf16, not torch.float64"),
    (lambda: torch.ops.fff.layer_norm_train(torch.randn(4, 8), None, None, 1, -1.0),
     Exception, "epsilon must be finite and non-negative"),
    (lambda: torch.ops.fff.layer_norm_train_backward(torch.randn(4, 8), torch.randn(4, 8), torch.randn(3, 1),
                                                     torch.randn(4, 1), None, 1, False, 1e-5),
     Exception, "mean dim 0 \\(R0\\) does not match input dim 0"),
])
def test_bad_calls_of_the_trained_ops_are_one_line_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_norm_whose_weight_is_computed_trains_on_fff():
    """Gemma's RMSNorm scales by (1 + weight): torch computes 1 + weight,
    and its gradient, and fff's trained norm takes it as its weight."""
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm

    torch.manual_seed(0)
    norm = GemmaRMSNorm(48, eps=1e-6)
    with torch.no_grad():
        norm.weight.uniform_(-0.5, 0.5)
    x = torch.randn(6, 48)
    dy = torch.randn(6, 48)
    report = fff.torch.explain(copy.deepcopy(norm), x.clone().requires_grad_(), backward=True,
                               options={"fallback": "eager"}, print_report=False)
    assert dict(report.taken) == {"rms_norm": 1} and dict(report.backward_calls) == {"rms_norm_grad": 1}, \
        str(report)
    torch._dynamo.reset()
    trained = copy.deepcopy(norm)
    compiled = torch.compile(trained, backend="fff", options={"fallback": "eager"})
    leaf, reference = x.clone().requires_grad_(), x.clone().requires_grad_()
    compiled(leaf).backward(dy)
    norm(reference).backward(dy)
    assert relative_error(leaf.grad, reference.grad) < 1e-5
    assert relative_error(trained.weight.grad, norm.weight.grad) < 1e-5


def _widened_norms():
    """Norms that compute in f32 on a half-width x and weight and narrow
    the result once: (weight.float() * norm(x.float())).to(x.dtype)."""
    from transformers.models.cohere.modeling_cohere import CohereLayerNorm
    from transformers.models.helium.modeling_helium import HeliumRMSNorm

    return {"cohere_layer_norm": (lambda: CohereLayerNorm(48, eps=1e-5), "layer_norm"),
            "helium_rms_norm": (lambda: HeliumRMSNorm(48, eps=1e-6), "rms_norm")}


def _trained_step(norm, x, dy):
    """(y, dx, dweight) of one backward of `norm`."""
    leaf = x.clone().requires_grad_()
    norm.zero_grad()
    y = norm(leaf)
    y.backward(dy)
    return y.detach(), leaf.grad, norm.weight.grad


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", ["cohere_layer_norm", "helium_rms_norm"])
def test_a_norm_computed_in_f32_on_half_width_tensors_trains_on_fff(name, dtype):
    """Cohere's and Helium's norms widen x and the weight to f32 and narrow
    the result: the trained op in x's dtype computes exactly that (f32
    arithmetic, one rounding), and takes the weight before its widening."""
    make, kind = _widened_norms()[name]
    torch.manual_seed(0)
    norm = make().to(dtype)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    report = fff.torch.explain(copy.deepcopy(norm), torch.randn(2, 5, 48).to(dtype).requires_grad_(),
                               backward=True, options={"fallback": "eager"}, print_report=False)
    assert dict(report.taken) == {kind: 1} and dict(report.backward_calls) == {f"{kind}_grad": 1}, str(report)
    torch._dynamo.reset()
    trained = copy.deepcopy(norm)
    compiled = torch.compile(trained, backend="fff", options={"fallback": "eager"})
    for shape in [(2, 5, 48), (3, 7, 48)]:
        x, dy = torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)
        # The f32 reference of what eager rounds.
        expected = _trained_step(copy.deepcopy(norm).float(), x.float(), dy.float())
        actual = _trained_step(compiled, x, dy)
        eager = _trained_step(norm, x, dy)
        for a, e, f in zip(actual, eager, expected):
            assert a.dtype == e.dtype == dtype
            # fff's bits are eager's or closer to the f32 reference.
            assert relative_error(a, f) <= relative_error(e, f) + 1e-3, (relative_error(a, f), relative_error(e, f))


@pytest.mark.parametrize("name", ["cohere_layer_norm", "helium_rms_norm"])
def test_a_widened_norm_with_f32_master_weights_trains_as_a_mixed_type_norm(name):
    """bf16 activations and an f32 weight that is not widened from bf16:
    the trained op takes the weight as it is (f32 parameters of a bf16
    norm, which computes in f32 and rounds y and dx once, as the widened
    norm does), and its weight gradient is f32."""
    make, kind = _widened_norms()[name]
    torch.manual_seed(0)
    norm = make()
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(2, 5, 48).to(torch.bfloat16)
    report = fff.torch.explain(copy.deepcopy(norm), x.clone().requires_grad_(), backward=True,
                               options={"fallback": "eager"}, print_report=False)
    assert dict(report.taken) == {kind: 1} and dict(report.backward_calls) == {f"{kind}_grad": 1}, str(report)
    torch._dynamo.reset()
    compiled = torch.compile(copy.deepcopy(norm), backend="fff", options={"fallback": "eager"})
    dy = torch.randn(2, 5, 48).to(torch.bfloat16)
    expected = _trained_step(copy.deepcopy(norm), x.float(), dy.float())
    actual, eager = _trained_step(compiled, x, dy), _trained_step(norm, x, dy)
    for a, e, f in zip(actual, eager, expected):
        assert a.dtype == e.dtype
        assert relative_error(a, f) <= relative_error(e, f) + 1e-3, (relative_error(a, f), relative_error(e, f))


MIXED_CASES = [
    # (kind, input shape, bias)
    ("layer_norm", (37, 768), True),
    ("layer_norm", (3, 5, 127), False),
    ("rms_norm", (37, 1000), False),
    ("rms_norm", (2, 9, 65), False),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kind, shape, has_bias", MIXED_CASES)
def test_mixed_type_norms_train_as_torch_s(kind, shape, has_bias, dtype):
    """A half-width x with f32 parameters, as torch's mixed-type norms take
    them (an f32 norm module fed bf16 activations, under CPU autocast or
    not): y and dx in x's dtype, within one rounding of float64 autograd,
    and the parameter gradients in f32, as close as f32 arithmetic gets."""
    generator = torch.Generator().manual_seed(sum(shape))
    x = (torch.randn(shape, generator=generator) * 3 + 1).to(dtype)
    dy = torch.randn(shape, generator=generator).to(dtype)
    weight = torch.randn(shape[-1:], generator=generator)
    bias = torch.randn(shape[-1:], generator=generator) if has_bias else None
    eps = 1e-5 if kind == "layer_norm" else 1e-6
    expected = torch_grads(kind, x, weight, bias, 1, eps, dy)
    actual = fff_grads(kind, x, weight, bias, 1, eps, dy)
    for name, a, e, type_ in zip(("y", "dx", "dweight", "dbias"), actual, expected,
                                 (dtype, dtype, torch.float32, torch.float32)):
        if e is None:
            assert a is None, name
            continue
        assert a.dtype == type_ and a.shape == e.shape, name
        tolerance = TOLERANCE[dtype] if type_ == dtype else TOLERANCE[torch.float32]
        assert relative_error(a, e) < tolerance, f"{name}: {relative_error(a, e):.2e}"


class AutocastBlock(torch.nn.Module):
    """A linear, a norm and a linear, in f32: under CPU autocast the norm
    takes the first linear's bf16 (or f16) result with its f32 parameters."""

    def __init__(self, kind, width=64):
        super().__init__()
        self.into, self.out = torch.nn.Linear(width, width), torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width) if kind == "layer_norm" else torch.nn.RMSNorm(width, eps=1e-6)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            if kind == "layer_norm":
                self.norm.bias.normal_()

    def forward(self, x):
        return self.out(self.norm(self.into(x)))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_norms_under_cpu_autocast_train_on_fff(kind, dtype):
    """Mixed-precision training: under torch.autocast the norm is fff's,
    forward and backward, and every gradient is eager's within one
    rounding to the autocast dtype, at two batch sizes."""
    torch.manual_seed(0)
    model = AutocastBlock(kind)
    x = torch.randn(6, 64)
    with torch.autocast("cpu", dtype=dtype):
        report = fff.torch.explain(copy.deepcopy(model), x, backward=True, options={"fallback": "eager"},
                                   print_report=False)
    assert dict(report.taken) == {kind: 1} and dict(report.backward_calls) == {f"{kind}_grad": 1}, str(report)
    torch._dynamo.reset()
    trained = copy.deepcopy(model)
    compiled = torch.compile(trained, backend="fff", options={"fallback": "eager"})
    for rows in (6, 11):
        x = torch.randn(rows, 64)
        outputs = []
        for run, module in ((compiled, trained), (model, model)):
            module.zero_grad()
            with torch.autocast("cpu", dtype=dtype):
                y = run(x)
            y.float().square().sum().backward()
            outputs.append([y] + [p.grad for p in module.parameters()])
        for a, e in zip(*outputs):
            assert a.dtype == e.dtype
            assert relative_error(a, e) < TOLERANCE[dtype], relative_error(a, e)


def test_a_norm_traced_to_another_dtype_than_its_input_s_stays_with_the_fallback():
    """Under CUDA's autocast a norm of a bf16 x gives f32 (autocast casts
    its input); fff's trained ops give x's dtype, and autocast does not
    cast custom ops, so such a norm stays with the fallback, with the
    reason. The graph is built by hand as Dynamo traces it there."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fff.torch._report import Report
    from fff.torch._trained_norms import take_trained_norms

    graph = torch.fx.Graph()
    x, weight, bias = (graph.placeholder(name) for name in ("x", "weight", "bias"))
    y = graph.call_function(torch.nn.functional.layer_norm, (x, (16,), weight, bias, 1e-5))
    graph.output(y)
    with FakeTensorMode():
        x.meta["example_value"] = torch.empty(4, 16, dtype=torch.bfloat16)
        weight.meta["example_value"], bias.meta["example_value"] = torch.empty(16), torch.empty(16)
        y.meta["example_value"] = torch.empty(4, 16)
    report = Report()
    assert take_trained_norms(torch.fx.GraphModule(torch.nn.Module(), graph), report) == {y}
    assert not report.taken and any("autocast's cast" in reason for _, reason in report.left), str(report)


@pytest.mark.parametrize("call, message", [
    (lambda: torch.ops.fff.layer_norm_train(torch.randn(4, 8).bfloat16(), torch.randn(8),
                                            torch.randn(8).bfloat16(), 1, 1e-5),
     "weight and bias must have one dtype"),
    (lambda: torch.ops.fff.layer_norm_train(torch.randn(4, 8).bfloat16(), None, torch.randn(8), 1, 1e-5),
     "needs a weight of that dtype too"),
    (lambda: torch.ops.fff.rms_norm_train(torch.randn(4, 8), torch.randn(8).bfloat16(), 1, 1e-5),
     "or f32 ones for f16 and bf16 inputs, not torch.bfloat16 ones for a torch.float32 input"),
])
def test_parameters_of_another_dtype_are_one_line_errors(call, message):
    with pytest.raises(Exception, match=message) as raised:
        call()
    assert "\n" not in str(raised.value).strip()


# One training step of two norms, in a fresh process: which threads run
# fff's blocks is fixed per process, at its first parallel loop.
_THREADS_SCRIPT = """
import sys, torch, fff.torch
if sys.argv[2] == "1":
    torch.set_num_threads(1)
torch.manual_seed(0)
layer_norm, rms_norm = torch.nn.LayerNorm(1024), torch.nn.RMSNorm(1024)
with torch.no_grad():
    layer_norm.weight.uniform_(0.5, 1.5)
    layer_norm.bias.normal_()
    rms_norm.weight.uniform_(0.5, 1.5)
x = torch.randn(1100, 1024, requires_grad=True)
report = fff.torch.explain(lambda x: rms_norm(x + layer_norm(x)), x, backward=True,
                           options={"fallback": "eager"}, print_report=False)
compiled = torch.compile(lambda x: rms_norm(x + layer_norm(x)), backend="fff", options={"fallback": "eager"})
y = compiled(x)
y.backward(torch.randn(y.shape))
torch.save({"runtime": fff.parallel_runtime(), "calls": dict(report.backward_calls), "y": y.detach(),
            "dx": x.grad, "parameters": [p.grad for p in (*layer_norm.parameters(), *rms_norm.parameters())]},
           sys.argv[1])
"""


def test_openmp_teams_and_fff_threads_give_the_same_bits(tmp_path):
    """Under torch, fff's blocks run on teams of torch's OpenMP threads
    (torch.set_num_threads applies); with FFF_OPENMP=0, on fff's own: the
    same bits either way, and for one thread."""
    import os
    import subprocess
    import sys

    runs = {}
    for name, environment, threads in (("openmp", {}, "0"), ("one thread", {}, "1"),
                                       ("fff's threads", {"FFF_OPENMP": "0"}, "0")):
        out = tmp_path / f"{name}.pt"
        subprocess.run([sys.executable, "-c", _THREADS_SCRIPT, str(out), threads], check=True, timeout=300,
                       env=dict(os.environ, **environment))
        runs[name] = torch.load(out)
    cores = len(os.sched_getaffinity(0))
    assert runs["openmp"]["runtime"] == ("openmp", torch.get_num_threads())
    assert runs["one thread"]["runtime"] == ("openmp", 1)
    assert runs["fff's threads"]["runtime"] == ("fff", cores)
    assert runs["openmp"]["calls"] == {"layer_norm_grad": 1, "rms_norm_grad": 1}, runs["openmp"]["calls"]
    reference = runs["openmp"]
    for name, run in runs.items():
        for key in ("y", "dx"):
            assert torch.equal(run[key], reference[key]), f"{key} with {name}"
        assert all(torch.equal(a, b) for a, b in zip(run["parameters"], reference["parameters"])), name


def _compiled_with_report(model, fallback):
    report = fff.torch.Report()
    torch._dynamo.reset()
    return torch.compile(model, backend=functools.partial(fff.torch.backend, report=report, fallback=fallback)), report


def _assert_gradients_match(model, actual, expected):
    """`actual` and `expected`: the input's gradient, then the parameters'."""
    for (name, _), a, e in zip([("x", None)] + list(model.named_parameters()), actual, expected):
        assert relative_error(a, e) < 1e-5, name


def _assert_inference_takes(model, x, fallback, taken):
    """Without grad, subgraphs' nodes join the graph: `taken` are all the
    model's norms."""
    compiled, report = _compiled_with_report(model, fallback)
    with torch.no_grad():
        assert relative_error(compiled(x), model(x)) < 1e-6
    assert dict(report.taken) == taken, str(report)


class _CheckpointedBlocks(torch.nn.Module):
    """Pre-norm blocks run under torch.utils.checkpoint: a LayerNorm
    module and LLaMA's RMSNorm written out in ops (x * rsqrt(mean(x^2) +
    eps) * w, in f32), then a final norm outside any block."""

    def __init__(self, width=48, blocks=3, reentrant=False):
        super().__init__()
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(blocks))
        self.scales = torch.nn.ParameterList(torch.nn.Parameter(torch.rand(width) + 0.5) for _ in range(blocks))
        self.mlps = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(2 * blocks))
        self.final = torch.nn.LayerNorm(width)
        self.reentrant = reentrant

    def block(self, i, x):
        x = x + self.mlps[2 * i](self.norms[i](x)).relu()
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return x + self.mlps[2 * i + 1](self.scales[i] * h.to(x.dtype))

    def forward(self, x):
        for i in range(len(self.norms)):
            x = torch.utils.checkpoint.checkpoint(functools.partial(self.block, i), x, use_reentrant=self.reentrant)
        return self.final(x)


@pytest.fixture
def fff_norm_calls(monkeypatch):
    """The trained norms' kernels run, call by call: the kind of norm for a
    forward kernel, with "_grad" for a backward one."""
    from fff.torch import _training

    calls = []
    executable = _training.executable

    def counted(kind, *args, **kwargs):
        exe = executable(kind, *args, **kwargs)

        class Counted:
            def __getattr__(self, name):
                return getattr(exe, name)

            def forward(self, *inputs):
                calls.append(kind)
                return exe.forward(*inputs)

            def backward(self, *inputs, **options):
                calls.append(kind + "_grad")
                return exe.backward(*inputs, **options)
        return Counted()

    monkeypatch.setattr(_training, "executable", counted)
    return calls


@pytest.mark.parametrize("fallback", ["eager", "inductor"])
@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
def test_norms_in_checkpointed_blocks_train_on_fff_and_are_recomputed(fallback, reentrant, fff_norm_calls):
    """Dynamo traces each checkpointed call into a subgraph of its own: its
    norms were left to the fallback. They train on fff now, and fff's
    forward calls in the blocks run again in the backward, as
    checkpointing recomputes the block."""
    calls = fff_norm_calls
    torch.manual_seed(0)
    model = _CheckpointedBlocks(reentrant=reentrant)
    reference = copy.deepcopy(model)
    compiled, report = _compiled_with_report(model, fallback)
    for batch in (4, 7):
        x = torch.randn(batch, 5, 48)
        weights = torch.randn(batch, 5, 48)
        grads = []
        for run, module in ((compiled, model), (compiled, model), (reference, reference)):
            module.zero_grad()
            del calls[:]  # this run's calls alone
            leaf = x.clone().requires_grad_()
            output = run(leaf)
            forward_calls = calls[:]
            (output * weights).sum().backward()
            backward_calls = calls[len(forward_calls):]
            grads.append([leaf.grad] + [p.grad for p in module.parameters()])
            if module is model:
                # The final norm is outside the blocks: it is not recomputed.
                assert sorted(forward_calls) == ["layer_norm"] * 4 + ["rms_norm"] * 3, forward_calls
                assert sorted(backward_calls) == sorted(["layer_norm"] * 3 + ["rms_norm"] * 3 + ["layer_norm_grad"] * 4
                                                        + ["rms_norm_grad"] * 3), backward_calls
            else:
                assert not calls
        _assert_gradients_match(model, grads[1], grads[2])
    assert report.taken["layer_norm"] == 8 and report.taken["rms_norm"] == 6, str(report)
    _assert_inference_takes(model, x, fallback, {"layer_norm": 4, "rms_norm": 3})


class _NestedRegionBlocks(torch.nn.Module):
    """Pre-LN blocks whose forward is a torch.compiler.nested_compile_region:
    Dynamo traces it once, into one subgraph that every block calls. Each
    ends in a checkpointed norm: a subgraph within the subgraph."""

    class Block(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.norm = torch.nn.LayerNorm(width)
            self.mlp = torch.nn.Linear(width, width)
            self.post = torch.nn.LayerNorm(width)

        @torch.compiler.nested_compile_region
        def forward(self, x):
            x = x + torch.nn.functional.gelu(self.mlp(self.norm(x)))
            return torch.utils.checkpoint.checkpoint(self.post, x, use_reentrant=False)

    def __init__(self, width=48, blocks=3):
        super().__init__()
        self.blocks = torch.nn.ModuleList(self.Block(width) for _ in range(blocks))
        self.final = torch.nn.RMSNorm(width)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.final(x)


@pytest.mark.parametrize("fallback", ["eager", "inductor"])
def test_norms_in_nested_compile_regions_are_fff_s(fallback, fff_norm_calls):
    """A nested compile region's subgraph is one for all its calls: its
    norms, the checkpointed one in it too, train on fff in every block (one
    site each in the report), and without grad the blocks' nodes join the
    graph."""
    torch.manual_seed(0)
    model = _NestedRegionBlocks()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    reference = copy.deepcopy(model)
    compiled, report = _compiled_with_report(model, fallback)
    x, weights = torch.randn(4, 5, 48), torch.randn(4, 5, 48)
    grads = []
    for run, module in ((compiled, model), (compiled, model), (reference, reference)):
        module.zero_grad()
        del fff_norm_calls[:]
        leaf = x.clone().requires_grad_()
        (run(leaf) * weights).sum().backward()
        grads.append([leaf.grad] + [p.grad for p in module.parameters()])
        if len(grads) == 2:  # compiled, its compiling and checks done
            # Six LayerNorms, the three checkpointed ones again in the
            # backward, and every norm's gradient.
            assert sorted(fff_norm_calls) == ["layer_norm"] * 9 + ["layer_norm_grad"] * 6 + ["rms_norm",
                                                                                             "rms_norm_grad"]
    _assert_gradients_match(model, grads[1], grads[2])
    assert report.taken["layer_norm"] == 2 and report.taken["rms_norm"] == 1, str(report)
    _assert_inference_takes(model, x, fallback, {"layer_norm": 6, "rms_norm": 1})

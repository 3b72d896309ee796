"""torch.compile(model, backend="fff") on transformers' own layers (BERT,
GPT-2, LLaMA) built from small configs with random weights, against their
eager outputs; what fff took from each; gradients; a second batch size."""

import functools

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import fff.torch  # noqa: E402  (registers the backend)

HIDDEN, HEADS, INTERMEDIATE = 64, 4, 128


def first(output):
    return output[0] if isinstance(output, tuple) else output


class Bert(torch.nn.Module):
    def __init__(self):
        super().__init__()
        from transformers.models.bert.modeling_bert import BertLayer
        self.layer = BertLayer(transformers.BertConfig(hidden_size=HIDDEN, num_attention_heads=HEADS,
                                                       intermediate_size=INTERMEDIATE,
                                                       attn_implementation="eager"))

    def forward(self, x):
        return first(self.layer(x))


class GPT2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        from transformers.models.gpt2.modeling_gpt2 import GPT2Block
        config = transformers.GPT2Config(n_embd=HIDDEN, n_head=HEADS, n_inner=INTERMEDIATE,
                                         attn_implementation="eager")
        self.block = GPT2Block(config, layer_idx=0)
        self.ln_f = torch.nn.LayerNorm(HIDDEN, eps=config.layer_norm_epsilon)

    def forward(self, x):
        return self.ln_f(first(self.block(x)))


class Llama(torch.nn.Module):
    def __init__(self):
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding
        config = transformers.LlamaConfig(hidden_size=HIDDEN, num_attention_heads=HEADS,
                                          num_key_value_heads=HEADS, intermediate_size=INTERMEDIATE,
                                          attn_implementation="eager")
        self.layer = LlamaDecoderLayer(config, layer_idx=0)
        self.rope = LlamaRotaryEmbedding(config)
        with torch.no_grad():  # RMSNorm weights start at 1: make them tell.
            for norm in (self.layer.input_layernorm, self.layer.post_attention_layernorm):
                norm.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        positions = torch.arange(x.shape[1]).unsqueeze(0)
        return first(self.layer(x, position_embeddings=self.rope(x, positions)))


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm()).item()


# (model, the norms fff must take from it: each graph's raised ops).
MODELS = [(Bert, {"layer_norm": 2}), (GPT2, {"layer_norm": 3}), (Llama, {"rms_norm": 2})]


@pytest.mark.parametrize("make, norms", MODELS, ids=lambda m: getattr(m, "__name__", ""))
def test_transformers_layers_with_eager_fallback(make, norms):
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(2, 8, HIDDEN)
    report = fff.torch.explain(model, x, print_report=False)
    assert dict(report.taken) == norms, str(report)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", options={"fallback": "eager"})
    with torch.no_grad():
        for shape in [(2, 8, HIDDEN), (3, 8, HIDDEN), (5, 8, HIDDEN)]:
            x = torch.randn(shape)
            assert relative_error(compiled(x), model(x)) < 1e-5


def test_a_dynamic_batch_compiles_once():
    report = fff.torch.Report()
    torch._dynamo.reset()
    compiled = torch.compile(Bert().eval(), backend=functools.partial(fff.torch.backend, report=report,
                                                                      fallback="eager"))
    with torch.no_grad():
        for batch in [2, 3, 5, 7, 3]:
            compiled(torch.randn(batch, 8, HIDDEN))
    # The first batch size, then one graph with a dynamic batch for all others.
    assert report.graphs == 2 and report.taken["layer_norm"] == 4


def test_default_fallback_is_inductor():
    torch.manual_seed(1)
    model = GPT2().eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff")
    x = torch.randn(2, 8, HIDDEN)
    with torch.no_grad():
        assert relative_error(compiled(x), model(x)) < 1e-5


def test_the_report_names_what_fff_left_and_why():
    report = fff.torch.explain(Bert().eval(), torch.randn(2, 8, HIDDEN), print_report=False)
    reasons = {name: reason for (name, reason) in report.left}
    assert "matrix products" in reasons["linear"]
    assert 0 < report.ops_taken < report.ops
    text = str(report)
    assert "layer_norm x2" in text and "linear" in text


def test_a_graph_that_needs_gradients_goes_to_the_fallback():
    torch.manual_seed(2)
    model = GPT2()  # training mode, parameters that require grad
    model.eval()
    report = fff.torch.Report()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=functools.partial(fff.torch.backend, report=report,
                                                              fallback="eager"))
    x = torch.randn(2, 8, HIDDEN, requires_grad=True)
    y = compiled(x)
    y.sum().backward()
    reference = x.detach().clone().requires_grad_()
    model(reference).sum().backward()
    assert relative_error(x.grad, reference.grad) < 1e-5
    assert not report.taken and any("gradients" in reason for (_, reason) in report.left)


def test_norm_in_bf16():
    torch.manual_seed(3)
    model = Llama().to(torch.bfloat16).eval()
    x = torch.randn(2, 8, HIDDEN).to(torch.bfloat16)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", options={"fallback": "eager"})
    with torch.no_grad():
        assert relative_error(compiled(x), model(x)) < 2e-2


class MeanOfX(torch.nn.Module):
    """Looks like a norm to the partitioner (a mean and an rsqrt) but is
    not one: the mean is of x, not of x squared."""

    def forward(self, x):
        return x * torch.rsqrt(x.mean(-1, keepdim=True).abs() + 1.0)


def test_a_region_without_a_norm_stays_with_the_fallback_and_says_why():
    model = MeanOfX()
    x = torch.randn(4, 16)
    report = fff.torch.explain(model, x, print_report=False)
    assert not report.taken and report.ops_taken == 0
    assert any("fff found no norm in it" in reason for (_, reason) in report.left), str(report)
    torch._dynamo.reset()
    with torch.no_grad():
        assert relative_error(torch.compile(model, backend="fff")(x), model(x)) < 1e-5


def test_a_graph_off_the_cpu_goes_to_the_fallback_and_says_why():
    gm = torch.fx.symbolic_trace(torch.nn.LayerNorm(8))
    report = fff.torch.Report()
    compiled = fff.torch.backend(gm, [torch.empty(2, 8, device="meta")], fallback="eager", report=report)
    assert not report.taken
    assert all("the graph runs on meta" in reason for (_, reason) in report.left), str(report)
    x = torch.randn(2, 8)
    assert torch.equal(compiled(x), gm(x))

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
    report = fff.torch.explain(model, x, grad=False, fallback="eager", print_report=False)
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
    report = fff.torch.explain(Bert().eval(), torch.randn(2, 8, HIDDEN), grad=False, fallback="eager", print_report=False)
    reasons = {name: reason for (name, reason) in report.left}
    assert "matrix products" in reasons["linear"]
    assert 0 < report.ops_taken < report.ops
    text = str(report)
    assert "layer_norm x2" in text and "linear" in text


def test_a_graph_that_needs_gradients_trains_its_norms_on_fff():
    torch.manual_seed(2)
    model = GPT2()  # training mode, parameters that require grad
    model.eval()
    report = fff.torch.Report()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=functools.partial(fff.torch.backend, report=report,
                                                              fallback="eager"))
    x = torch.randn(2, 8, HIDDEN, requires_grad=True)
    dy = torch.randn(2, 8, HIDDEN)
    compiled(x).backward(dy)
    reference = x.detach().clone().requires_grad_()
    model(reference).backward(dy)
    assert relative_error(x.grad, reference.grad) < 1e-5
    # Its three LayerNorms, forward and backward; the rest stays with eager.
    assert dict(report.taken) == {"layer_norm": 3} and dict(report.backward_taken) == {"layer_norm_grad": 3}
    assert report.training and str(report).count("fff::layer_norm_train_backward") == 3


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
    report = fff.torch.explain(model, x, grad=False, fallback="eager", print_report=False)
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
    assert all("the graph's tensors are on meta, and fff's code runs on CPU and CUDA tensors" in reason
               for (_, reason) in report.left), str(report)
    x = torch.randn(2, 8)
    assert torch.equal(compiled(x), gm(x))


class InPlaceOnARegionValue(torch.nn.Module):
    """Falcon's `mlp_output += attention_output`: an in-place add on a value
    the region reads, whose results are also the graph's outputs."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)
        self.ln = torch.nn.LayerNorm(16)

    def forward(self, x, a):
        h = self.fc(x)
        h += a
        out = x + h
        return self.ln(out), out


class InPlaceOnAGraphInput(torch.nn.Module):
    """`x += 1` writes into the caller's tensor: fff's region would not."""

    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(16)

    def forward(self, x):
        x += 1.0
        return self.ln(x)


class InPlaceOnASharedValue(torch.nn.Module):
    """`h` is read again after the in-place add: the add must stay where it
    writes into `h`."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)
        self.ln = torch.nn.LayerNorm(16)

    def forward(self, x):
        h = self.fc(x)
        g = h.view(-1)  # shares h's storage
        h += x
        return self.ln(h), g * 2


@pytest.mark.parametrize("fallback", ["eager", "inductor"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_in_place_ops_on_region_values_give_eager_results(fallback, dtype):
    torch.manual_seed(4)
    model = InPlaceOnARegionValue().to(dtype).eval()
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", options={"fallback": fallback})
    with torch.no_grad():
        for rows in (4, 7):
            x, a = torch.randn(rows, 16).to(dtype), torch.randn(rows, 16).to(dtype)
            for actual, expected in zip(compiled(x, a), model(x, a)):
                assert relative_error(actual, expected) < tolerance
    report = fff.torch.explain(model, x, a, grad=False, print_report=False)
    assert report.taken["layer_norm"] == 1 and any("iadd" in r.ops for r in report.regions), str(report)


@pytest.mark.parametrize("make", [InPlaceOnAGraphInput, InPlaceOnASharedValue], ids=lambda m: m.__name__)
def test_in_place_ops_whose_writes_are_seen_stay_with_the_fallback(make):
    torch.manual_seed(5)
    model = make().eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff")
    with torch.no_grad():
        x = torch.randn(4, 16)
        x_eager, x_fff = x.clone(), x.clone()
        expected, actual = model(x_eager), compiled(x_fff)
    expected, actual = (expected if isinstance(expected, tuple) else (expected,)), \
        (actual if isinstance(actual, tuple) else (actual,))
    for a, e in zip(actual, expected):
        assert relative_error(a, e) < 1e-5
    assert torch.equal(x_fff, x_eager)  # the caller's tensor, written as eager writes it
    report = fff.torch.explain(make().eval(), torch.randn(4, 16), grad=False, print_report=False)
    assert all("iadd" not in r.ops for r in report.regions), str(report)


class TransposedNorm(torch.nn.Module):
    """A hand-written RMSNorm fed a transposed input, and a norm whose
    result is sliced (generate()'s logits_to_keep): results whose strides
    torch's own ops would choose otherwise."""

    def forward(self, x):
        t = x.transpose(1, 2)
        y = t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6)
        return y[:, -1:, :] * 2.0, torch.nn.functional.layer_norm(t, (t.shape[-1],))


@pytest.mark.parametrize("fallback", ["eager", "inductor"])
def test_results_are_right_whatever_strides_torch_would_give(fallback):
    model = TransposedNorm()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", options={"fallback": fallback})
    with torch.no_grad():
        for shape in [(2, 16, 8), (3, 16, 5)]:
            x = torch.randn(shape)
            for actual, expected in zip(compiled(x), model(x)):
                assert relative_error(actual, expected) < 1e-5
    assert fff.torch.explain(model, x, grad=False, print_report=False).calls >= 1


class WholeSliceOfNorm(torch.nn.Module):
    """A causal LM's final norm and logits_to_keep=0: h[:, 0:, :]."""

    def forward(self, h):
        return torch.nn.functional.rms_norm(h, (h.shape[-1],), eps=1e-6)[:, 0:, :] * 2.0


def test_a_whole_slice_of_a_region_traces_without_a_meta_failure(caplog):
    """Traced on symbolic sizes, the slice became a slice_copy whose meta
    kernel failed: torch logged the failure, with its traceback, at every
    recompilation for a new batch size, before it fell back."""
    model = WholeSliceOfNorm()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff")
    with torch.no_grad(), caplog.at_level("ERROR"):
        for shape in [(2, 16, 8), (3, 24, 8)]:
            x = torch.randn(shape)
            assert relative_error(compiled(x), model(x)) < 1e-5
    assert not [r for r in caplog.records if "failed while attempting to run meta" in r.getMessage()], caplog.text
    report = fff.torch.explain(model, x, grad=False, print_report=False)
    assert dict(report.taken) == {"rms_norm": 1}, str(report)


class SlicesOfNorms(torch.nn.Module):
    """A decoder's last position of its final norm, and half a norm's
    columns beside the other half of its input (partial rotary)."""

    def forward(self, h):
        last = torch.nn.functional.rms_norm(h, (8,), eps=1e-6)[:, -1:, :] * 2.0
        mixed = torch.cat([torch.nn.functional.layer_norm(h, (8,))[..., :4], h[..., 4:]], -1)
        return last, mixed


def test_regions_that_slice_a_norm_on_symbolic_sizes_are_taken(caplog):
    """Views in a region stay views in its graph: functionalized into
    slice_copy on symbolic sizes, they failed in torch's slice kernel
    (storage_offset() of a symbolic tensor), which torch logged with a
    traceback of its own before fff left the region to the fallback."""
    model = SlicesOfNorms()
    torch._dynamo.reset()
    report = fff.torch.Report()
    compiled = torch.compile(model, backend=lambda gm, example: fff.torch.backend(gm, example, report=report))
    with torch.no_grad(), caplog.at_level("ERROR"):
        # The second recompiles with symbolic batch and sequence sizes.
        for shape in [(2, 5, 8), (3, 7, 8)]:
            x = torch.randn(shape)
            for actual, expected in zip(compiled(x), model(x)):
                assert relative_error(actual, expected) < 1e-5
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
    # Both graphs, the static and the symbolic one, take both norms.
    assert dict(report.taken) == {"rms_norm": 2, "layer_norm (no affine)": 2}, str(report)


def test_torch_mlirs_errors_are_the_regions_reason_not_lines_on_stderr(capfd):
    """torch-mlir prints an op it cannot lower as "error: ..." on the
    process's stderr; fff keeps the diagnostic as the refusal's reason."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from fff.torch import _regions

    graph = make_fx(lambda x: x.median(-1)[0])(torch.randn(4, 8))
    with pytest.raises(Exception, match=r"^torch-mlir: failed to legalize operation 'torch.operator'"):
        _regions._linalg(graph)
    assert "error:" not in capfd.readouterr().err


@pytest.mark.parametrize("index", [-1, 10 ** 6])
def test_fff_region_of_an_index_no_region_has_is_a_one_line_error(index):
    with pytest.raises(ValueError, match=rf"fff::region {index} names no region compiled in this process"):
        torch.ops.fff.region([torch.randn(3)], index)


def test_unrelated_pointwise_work_stays_out_of_regions():
    class Rotary(torch.nn.Module):
        def forward(self, x, q):
            return torch.nn.functional.layer_norm(x, (8,)), torch.cat([-q[..., 4:], q[..., :4]], -1) / 2.0

    report = fff.torch.explain(Rotary(), torch.randn(4, 8), torch.randn(4, 8), grad=False, print_report=False)
    assert [r.ops for r in report.regions] == [["layer_norm"]], str(report)


def test_a_region_whose_compiled_code_disagrees_with_its_ops_is_refused(monkeypatch):
    from fff.torch import _regions

    real = _regions._compiled

    class WrongCount:
        def __init__(self, ir, placement):
            self.forward = lambda *args: (real(ir, placement).forward(*args), args[0])

    monkeypatch.setattr(_regions, "_compiled", WrongCount)
    model = torch.nn.LayerNorm(8)
    report = fff.torch.explain(model, torch.randn(4, 8), grad=False, print_report=False)
    assert not report.regions
    assert any("its compiled code gives 2 results, its ops 1" in reason for (_, reason) in report.left), str(report)

    class Off:
        def __init__(self, ir, placement):
            self.forward = lambda *args: real(ir, placement).forward(*args) * 1.01

    monkeypatch.setattr(_regions, "_compiled", Off)
    report = fff.torch.explain(model, torch.randn(4, 8), grad=False, print_report=False)
    assert any("is off by" in reason for (_, reason) in report.left), str(report)


@pytest.mark.parametrize("form", ["module", "functional"])
@pytest.mark.parametrize("weight", [True, False], ids=["weight", "no_weight"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_torchs_own_rms_norm_is_taken(form, weight, dtype):
    """nn.RMSNorm and F.rms_norm (eps None: the dtype's epsilon): the
    decomposition of aten.rms_norm adds eps in place, which a second
    functionalization removes (_regions._aten_graph); before it, every
    such region was refused."""
    torch.manual_seed(5)
    norm = torch.nn.RMSNorm(48, eps=1e-6, elementwise_affine=weight, dtype=dtype)
    gamma = torch.randn(48, dtype=dtype) if weight else None
    if weight:
        with torch.no_grad():
            norm.weight.copy_(gamma)

    def model(x):
        return norm(x + 1) if form == "module" else torch.nn.functional.rms_norm(x + 1, (48,), gamma)

    x = torch.randn(3, 5, 48, dtype=dtype)
    report = fff.torch.explain(model, x, grad=False, print_report=False)
    assert report.taken == {"rms_norm": 1} and report.ops_taken == report.ops, str(report)
    torch._dynamo.reset()
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    with torch.no_grad():
        assert relative_error(torch.compile(model, backend="fff")(x), model(x)) < tolerance


def test_a_norm_of_a_norm_in_one_region_raises_both():
    torch.manual_seed(6)
    inner, outer = torch.nn.LayerNorm(48), torch.nn.RMSNorm(48)
    with torch.no_grad():
        inner.weight.normal_()
        outer.weight.normal_()

    def model(x):
        return outer(inner(x + 1) * 2)

    x = torch.randn(3, 5, 48)
    report = fff.torch.explain(model, x, grad=False, print_report=False)
    assert report.calls == 1 and report.taken == {"layer_norm": 1, "rms_norm": 1}, str(report)
    torch._dynamo.reset()
    with torch.no_grad():
        assert relative_error(torch.compile(model, backend="fff")(x), model(x)) < 1e-5


def test_threads_making_first_calls_together_get_eager_results():
    import threading

    torch.manual_seed(6)
    model = Llama().eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff")
    inputs = [torch.randn(2, 8, HIDDEN) for _ in range(4)]
    results, errors = {}, []

    def call(i):
        try:
            with torch.no_grad():
                results[i] = compiled(inputs[i])
        except Exception as error:  # reported below, with the thread's input
            errors.append((i, repr(error)))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    with torch.no_grad():
        for i, x in enumerate(inputs):
            assert relative_error(results[i], model(x)) < 1e-5


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune-no-cudagraphs"])
def test_every_torch_compile_mode_is_taken(mode):
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)).eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", mode=mode)
    x = torch.randn(4, 16)
    with torch.no_grad():
        assert relative_error(compiled(x), model(x)) < 1e-5


def test_inductor_options_reach_the_fallback():
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)).eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", options={"fallback": "inductor",
                                                             "inductor": {"cpp.simdlen": 0}})
    x = torch.randn(4, 16)
    with torch.no_grad():
        assert relative_error(compiled(x), model(x)) < 1e-5


@pytest.mark.parametrize("options, message", [
    ({"fallbak": "eager"}, "unknown option(s) 'fallbak'"),
    ({"fallback": "tvm"}, "unknown fallback 'tvm'"),
    ({"inductor": 3}, "option 'inductor' must be a dict"),
])
def test_bad_options_are_one_line_errors(options, message):
    torch._dynamo.reset()
    compiled = torch.compile(torch.nn.LayerNorm(8), backend="fff", options=options)
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        compiled(torch.randn(2, 8))


def test_a_bad_mode_is_a_one_line_error():
    with pytest.raises(Exception, match="unknown mode 'fastest'"):
        fff.torch.backend(torch.fx.symbolic_trace(torch.nn.LayerNorm(8)), [torch.randn(2, 8)], mode="fastest")


def test_explain_compiles_as_the_users_call_would():
    model = GPT2()  # parameters that require grad
    model.eval()
    x = torch.randn(2, 8, HIDDEN)
    with_grad = fff.torch.explain(model, x, print_report=False)
    # Parameters that need gradients: a training graph, its norms trained.
    assert with_grad.grad and with_grad.fallback == "inductor" and with_grad.training
    assert [r.kind for r in with_grad.regions] == ["fff::layer_norm_train"] * 3
    without = fff.torch.explain(model, x, grad=False, options={"fallback": "eager"}, print_report=False)
    assert not without.grad and without.fallback == "eager"
    assert without.calls == 3 and [r.kind for r in without.regions] == ["fff::region"] * 3
    text = str(without)
    assert "as 3 fff call(s)" in text and "fff::region [cpu]: layer_norm" in text


def test_explain_takes_keyword_inputs_as_a_transformers_model_is_called():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=64, max_position_embeddings=16)
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, 64, (2, 7))
    report = fff.torch.explain(model, input_ids=ids, attention_mask=torch.ones_like(ids), grad=False,
                               print_report=False)
    assert report.taken["layer_norm"] == 3, str(report)


def test_explain_names_a_layer_norm_without_affine_parameters():
    model = torch.nn.LayerNorm(8, elementwise_affine=False)
    report = fff.torch.explain(model, torch.randn(4, 8), grad=False, print_report=False)
    assert dict(report.taken) == {"layer_norm (no affine)": 1}, str(report)


def test_a_norm_whose_result_is_unused_is_reported_as_such():
    class Unused(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(8)

        def forward(self, x):
            h = x + 1
            self.ln(h)
            return h * 2

    model = Unused()
    x = torch.randn(4, 8)
    report = fff.torch.explain(model, x, grad=False, fallback="eager", print_report=False)
    assert not report.regions
    assert any("its norm's result is not used" in reason for (_, reason) in report.left), str(report)
    torch._dynamo.reset()
    with torch.no_grad():
        assert torch.equal(torch.compile(model, backend="fff")(x), model(x))


_SLICED_BY_A_SYMBOL = """
import torch, fff.torch

def f(x, w):
    h = (torch.nn.functional.layer_norm(x, (16,), w) * 2).to(torch.float32)
    return h[:, : x.shape[1] - 1]

compiled = torch.compile(f, backend="fff", dynamic=True)
w = torch.randn(16)
for length in (5, 7):
    x = torch.randn(3, length, 16)
    assert torch.allclose(compiled(x, w), f(x, w), atol=1e-5)
print("done")
"""


def test_a_region_result_sliced_by_a_symbolic_extent_compiles():
    """h[:, :n - 1] with a dynamic n: the getitem reads both h and n, each
    only ever read by getitems. torch's partitioner moved that getitem
    between h's region and n's nothing forever (LFM2 hung this way); h now
    stays out of regions. Run apart, so that a hang fails by its timeout."""
    import os
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", _SLICED_BY_A_SYMBOL], capture_output=True, text=True,
                            timeout=240, env=dict(os.environ))
    assert result.returncode == 0 and "done" in result.stdout, result.stderr[-2000:]


class SlicesReadApart(torch.nn.Module):
    """A norm's result whose first slice a matmul reads before the second
    slice is taken (Gemma 3n's per-layer inputs, Swin's windows), and a
    Python float that Inductor cannot make a tensor (`torch.full`)."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(HIDDEN))
        self.mix = torch.nn.Parameter(torch.randn(HIDDEN, HIDDEN))

    def forward(self, x, fill):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        first = y[:, 0, :] @ self.mix
        second = y[:, 1, :]
        return first, second + torch.full((1,), fill)


def test_a_compile_that_restarts_after_fff_fused_its_graph_runs():
    """torch.fx's fuser left a region's call after a node that reads its
    result, in the Graph Dynamo traced, and sorted a copy of it: when
    Inductor restarted the compile to make `fill` a constant, Dynamo's
    clean-up of its own Graph, in reverse order, raised 'Tried to erase
    Node getitem_2 but it still had 1 users'. fff now sorts Dynamo's Graph
    in place and keeps it; the report holds only the graph that ran."""
    model = SlicesReadApart()
    torch._dynamo.reset()
    report, graphs = fff.torch.Report(), []

    def backend(gm, example):
        graphs.append(gm)
        return fff.torch.backend(gm, example, report=report)

    compiled = torch.compile(model, dynamic=True, backend=backend)
    with torch.no_grad():
        for batch in (4, 6):
            x = torch.randn(batch, 2, HIDDEN)
            for actual, expected in zip(compiled(x, 0.5), model(x, 0.5)):
                assert relative_error(actual, expected) < 1e-5
    # The backend saw the graph twice: Inductor restarted the first.
    assert len(graphs) == 2
    assert report.graphs == 1 and dict(report.taken) == {"rms_norm": 1}, str(report)


class PowRMSNorm(torch.nn.Module):
    """Gemma 3n's RMSNorm: pow(mean(x^2) + eps, -0.5) where others write
    rsqrt, in f32, the weight optional."""

    def __init__(self, with_scale):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(HIDDEN) + 0.5) if with_scale else None

    def forward(self, h):
        x = h.float()
        y = x * torch.pow(x.pow(2).mean(-1, keepdim=True) + 1e-6, -0.5)
        if self.weight is not None:
            y = y * self.weight.float()
        return y.type_as(h)


@pytest.mark.parametrize("with_scale", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_an_rms_norm_written_with_pow_minus_half_is_taken(with_scale, dtype):
    model = PowRMSNorm(with_scale).to(dtype)
    x = torch.randn(3, 7, HIDDEN).to(dtype)
    with torch.no_grad():
        report = fff.torch.explain(model, x, print_report=False)
        assert dict(report.taken) == {"rms_norm": 1}, str(report)
        torch._dynamo.reset()
        actual, expected = torch.compile(model, backend="fff")(x), model(x)
    torch._dynamo.reset()
    error = ((actual.double() - expected.double()).norm() / expected.double().norm()).item()
    assert actual.dtype == dtype and error < (1e-5 if dtype == torch.float32 else 1e-2)


def test_result_checks_compare_every_chunk(monkeypatch):
    """The first call's check compares results a chunk at a time: a NaN, an
    infinity or an error in any chunk, the last one included, refuses."""
    from fff.torch import _regions

    monkeypatch.setattr(_regions, "_CHECK_CHUNK", 4)
    expected = torch.randn(3, 5)
    assert _regions._mismatch("y", expected.clone(), expected) is None
    last = expected.clone()
    last[2, 4] = float("nan")
    assert "NaNs or infinities" in _regions._mismatch("y", last, expected)
    infinite = expected.clone()
    infinite[1, 1] = float("inf")
    assert "NaNs or infinities" in _regions._mismatch("y", expected, infinite)
    off = expected.clone()
    off[2, 3] += expected.norm() * 1e-2
    assert "is off by 0.01" in _regions._mismatch("y", off, expected)


_LARGE_REGION = """
import resource, torch, fff.torch

model = torch.nn.LayerNorm(64)
with torch.no_grad():  # the compilers' own first-use memory, before the peak is taken
    torch.compile(model, backend="fff")(torch.randn(8, 64))
torch._dynamo.reset()
x = torch.randn(1 << 19, 64)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with torch.no_grad():
    y = torch.compile(model, backend="fff")(x)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert torch.allclose(y, model(x), atol=1e-5)
print((peak - before) * 1024 / x.nbytes)
"""


def test_a_large_regions_first_call_takes_a_few_times_its_input_in_memory():
    """The first call of a region compiled for a large static shape checks it
    at that shape (random inputs, its ops' results, its own): the call
    peaks at about three times its input, its result included. Whole-tensor
    float64 comparisons took fifteen times, and ran out of memory on inputs
    that eager ran. Run apart, so that the peak is this compile's alone."""
    import os
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", _LARGE_REGION], capture_output=True, text=True, timeout=240,
                            env=dict(os.environ))
    assert result.returncode == 0, result.stderr[-2000:]
    assert float(result.stdout.split()[-1]) < 6, result.stdout


@pytest.mark.parametrize("transform", ["jacrev", "vmap_grad"])
def test_a_graph_of_torch_func_transforms_goes_to_the_fallback_and_says_why(transform):
    """torch.compile(jacrev(model)): Dynamo traces the transform's levels
    into the graph, and fff's norm ops (whose autograd torch.func cannot
    run: torch's error asks for a setup_context) broke its compile. The
    whole graph is the fallback's, with the reason."""
    from torch.func import functional_call, grad, jacrev, vmap

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.GELU(),
                                torch.nn.Linear(32, 4), torch.nn.RMSNorm(4))
    x = torch.randn(3, 16)
    if transform == "jacrev":
        function, args = jacrev(model), (x,)
    else:
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(p, row):
            return functional_call(model, p, (row[None],)).square().sum()

        function, args = vmap(grad(loss), in_dims=(None, 0)), (params, x)
    expected = function(*args)
    report = fff.torch.Report()
    torch._dynamo.reset()
    actual = torch.compile(function, backend=functools.partial(fff.torch.backend, report=report))(*args)
    torch._dynamo.reset()
    for a, e in zip(*(list(v.values()) if isinstance(v, dict) else [v] for v in (actual, expected))):
        assert torch.allclose(a, e, atol=1e-5, rtol=1e-4)
    assert not report.regions and not report.backward, str(report)
    assert any("torch.func transforms" in reason for (_, reason) in report.left), str(report)


def _norm_beside_a_vmap(x, w):
    h = torch.nn.functional.layer_norm(x, (16,), w)
    # A transform of other work (as transformers builds its masks), whose
    # pointwise ops read the norm's result from outside their level.
    return h, torch.vmap(lambda row: row * h + 1.0)(x)


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
def test_a_vmap_of_other_work_leaves_the_graphs_norms_to_fff(grad):
    """transformers' mask functions run under torch.vmap in the model's graph
    (Jamba's did, say): the norms outside the transform are still fff's, and
    the transform's own nodes join no region."""
    torch.manual_seed(0)
    x, w = torch.randn(4, 16), torch.randn(16, requires_grad=grad)
    report = fff.torch.Report()
    torch._dynamo.reset()
    compiled = torch.compile(_norm_beside_a_vmap, backend=functools.partial(fff.torch.backend, report=report))
    with torch.set_grad_enabled(grad):
        actual, expected = compiled(x, w), _norm_beside_a_vmap(x, w)
    torch._dynamo.reset()
    for a, e in zip(actual, expected):
        assert torch.allclose(a, e, atol=1e-5)
    assert report.taken["layer_norm"] == 1, str(report)
    assert any("inside a torch.func transform" in reason for (_, reason) in report.left), str(report)


def test_tree_layers_under_forward_mode_transforms_raise_rather_than_give_zero_tangents():
    """torch.func.jvp runs a custom op as if it had no derivative: a tree
    layer's tangents came out zero, with no error, eager and compiled, and
    torch.autograd.forward_ad gave none. All now raise, for the layers and
    for the ops fff.torch exports; vmap of the forward still runs."""
    from torch.func import jacfwd, jvp, vmap

    torch.manual_seed(0)
    layer = fff.torch.TreeFFN(16, 8, 3, 2)
    x = torch.randn(5, 16)
    with pytest.raises(RuntimeError, match="no forward-mode derivative"):
        jvp(layer, (x,), (torch.randn_like(x),))
    with pytest.raises(RuntimeError, match="no forward-mode derivative"):
        jacfwd(layer)(x[:1])
    torch._dynamo.reset()
    with pytest.raises(Exception, match="no forward-mode derivative"):
        torch.compile(lambda x, v: jvp(layer, (x,), (v,)), backend="fff")(x, torch.randn_like(x))
    # The ops themselves, as fff.torch exports them, and torch's forward AD
    # outside torch.func, which gave no tangent at all.
    weights = (layer.w_in, layer.b_in, layer.w_out, layer.b_out, layer.depth)
    with pytest.raises(RuntimeError, match="no forward-mode derivative"):
        jvp(lambda x: fff.torch.tree_ffn(x, *weights), (x,), (torch.randn_like(x),))
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(x, torch.randn_like(x))
        # The layer, the op fff.torch exports, and the op below it, as
        # torch.ops has it, with weights that need no gradient (with them,
        # torch raises its own error); a trained norm's op as well.
        frozen = [w.detach() if isinstance(w, torch.Tensor) else w for w in weights]
        for run in (layer, lambda x: fff.torch.tree_ffn(x, *weights), lambda x: torch.ops.fff.tree_ffn(x, *frozen),
                    lambda x: torch.ops.fff.layer_norm_train(x, None, None, 1, 1e-5)):
            with pytest.raises(RuntimeError, match="no forward-mode derivative"):
                run(dual)
    torch._dynamo.reset()
    with torch.no_grad():
        assert torch.allclose(vmap(layer)(x[:, None]), layer(x)[:, None], atol=1e-6)
        assert torch.equal(fff.torch.tree_ffn(x, *weights), layer(x))


def _direct_op_calls():
    """Each differentiable op of fff as torch.ops has it, called directly,
    as a function of one tensor argument, with that argument."""
    torch.manual_seed(0)
    x, residual = torch.randn(4, 16), torch.randn(4, 8)
    tree = [torch.randn(2, 7, 16), torch.randn(2, 7), torch.randn(2, 7, 8), torch.randn(8)]
    leaf = [torch.randn(3, 16), torch.randn(3), torch.randn(4, 16, 5), torch.randn(4, 5), torch.randn(4, 5, 8),
            torch.randn(4, 8)]
    ops = torch.ops.fff
    return {
        "layer_norm_train": (lambda x: ops.layer_norm_train(x, None, None, 1, 1e-5)[0], x),
        "rms_norm_train": (lambda x: ops.rms_norm_train(x, torch.ones(16), 1, 1e-5), x),
        "tree_ffn x": (lambda x: ops.tree_ffn(x, *tree, 2, "gelu"), x),
        "tree_ffn w_out": (lambda w: ops.tree_ffn(x, *tree[:2], w, tree[3], 2, "gelu"), tree[2]),
        "leaf_tree_ffn": (lambda x: ops.leaf_tree_ffn(x, *leaf, 2, "relu"), x),
        "tree_sublayer weights": (lambda w: ops.tree_sublayer(x, residual, "rms_norm", None, None, 1e-5, "tree_ffn",
                                                              [*tree[:2], w, tree[3]], 2, "gelu"), tree[2]),
    }


@pytest.mark.parametrize("op", list(_direct_op_calls()))
def test_direct_calls_of_differentiable_ops_refuse_forward_mode_tangents(op):
    """torch runs a custom op as if it had no forward-mode derivative:
    torch.func.jvp and jacfwd of a direct torch.ops.fff call gave zero
    tangents with no error, torch.autograd.forward_ad none. Each raises;
    reverse mode and plain calls run."""
    from torch.func import jacfwd, jvp

    function, argument = _direct_op_calls()[op]
    with pytest.raises(RuntimeError, match="no forward-mode derivative"):
        jvp(function, (argument,), (torch.randn_like(argument),))
    with pytest.raises(RuntimeError, match="no forward-mode derivative"):
        jacfwd(function)(argument)
    with torch.autograd.forward_ad.dual_level():
        with pytest.raises(RuntimeError, match="no forward-mode derivative"):
            function(torch.autograd.forward_ad.make_dual(argument, torch.randn_like(argument)))
    leaf = argument.clone().requires_grad_()
    function(leaf).sum().backward()
    assert leaf.grad is not None and leaf.grad.abs().sum() > 0
    assert torch.equal(function(argument), function(argument.clone()))


def _centered(x):
    return x - x.mean(-1, keepdim=True)


# Forms that look like a norm and are not one of fff's (each differs from
# LayerNorm or RMSNorm by more than rounding somewhere): raising must leave
# them, in inference and in training.
NORM_LOOK_ALIKES = {
    # x-transformers' ScaleNorm and its F.normalize RMSNorm: eps clamps the
    # norm rather than adding to the mean square.
    "scale_norm": lambda x: x / (torch.linalg.vector_norm(x, dim=-1, keepdim=True) * x.shape[-1] ** -0.5)
    .clamp(min=1e-5),
    "normalize_rms": lambda x: torch.nn.functional.normalize(x, dim=-1) * x.shape[-1] ** 0.5,
    "centering_only": _centered,
    "variance_without_mean": lambda x: x / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5),
    "unbiased_std": lambda x: _centered(x) / (x.std(-1, keepdim=True) + 1e-6),
    "eps_outside_sqrt": lambda x: _centered(x) / (_centered(x).pow(2).mean(-1, keepdim=True).sqrt() + 1e-3),
    "max_norm": lambda x: x / x.abs().amax(-1, keepdim=True).clamp_min(1e-6),
    "mean_over_a_leading_dim": lambda x: (x - x.mean(1, keepdim=True)) *
    torch.rsqrt((x - x.mean(1, keepdim=True)).pow(2).mean(1, keepdim=True) + 1e-6),
}


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("form", list(NORM_LOOK_ALIKES))
def test_norm_look_alikes_stay_with_the_fallback(form, grad):
    function = NORM_LOOK_ALIKES[form]
    report = fff.torch.Report()
    torch._dynamo.reset()
    compiled = torch.compile(function, backend=functools.partial(fff.torch.backend, report=report, fallback="eager"))
    torch.manual_seed(0)
    x = torch.randn(3, 7, 40) * 2 + 0.5
    with torch.set_grad_enabled(grad):
        leaves = [x.clone().requires_grad_(grad) for _ in range(2)]
        actual, expected = compiled(leaves[0]), function(leaves[1])
        assert relative_error(actual, expected) < 1e-6
        if grad:
            weights = torch.randn(expected.shape)
            (actual * weights).sum().backward()
            (expected * weights).sum().backward()
            assert relative_error(leaves[0].grad, leaves[1].grad) < 1e-6
    assert not report.taken, str(report)

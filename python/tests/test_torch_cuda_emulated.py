"""torch.compile(backend="fff", options={"emulate_cuda": True}): the
backend's CUDA path end to end on fff's PTX emulator. Every region the
backend takes compiles with --fff-gpu-pipeline for the emulator's chip and
runs on it through the marshalling CUDA tensors take (_devices.py), on
layers of transformers models and tree blocks, against eager torch. The
emulator's launch statistics (FFF_EMU_STATS) show that fff's kernels ran
there, and its memory checks that they read and wrote only their
buffers."""

import functools
import json
import os

import pytest

torch = pytest.importorskip("torch")

import fff.torch  # noqa: E402
from fff.torch import _devices  # noqa: E402

DRIVER = os.environ.get("FFF_CUDA_DRIVER", "")
pytestmark = pytest.mark.skipif("emulator" not in DRIVER,
                                reason="needs FFF_CUDA_DRIVER set to fff's PTX emulator (build it first)")
EMULATED = {"emulate_cuda": True}
# Relative error (over each result) against eager torch.
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2}


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm()).item()


@pytest.fixture
def launches(tmp_path, monkeypatch):
    """The kernels the emulator launches while the test runs, by name."""
    path = tmp_path / "launches.jsonl"
    monkeypatch.setenv("FFF_EMU_STATS", str(path))

    def names():
        return [json.loads(line)["kernel"] for line in path.read_text().splitlines()] if path.exists() else []
    return names


def compiled_against_eager(model, inputs_list, tolerance):
    """Runs `model` compiled with the emulated CUDA path on each inputs
    tuple (the second shape recompiles once, with dynamic extents) and
    holds each result to eager's."""
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fff", options=EMULATED)
    for inputs in inputs_list:
        with torch.no_grad():
            expected, actual = model(*inputs), compiled(*inputs)
        if hasattr(expected, "last_hidden_state"):
            expected, actual = expected.last_hidden_state, actual.last_hidden_state
        assert actual.shape == expected.shape and actual.dtype == expected.dtype
        assert relative_error(actual, expected) < tolerance
    torch._dynamo.reset()


def assert_all_gpu(report, at_least):
    assert report.calls >= at_least, str(report)
    assert all(region.pipeline == "gpu" for region in report.regions), str(report)


transformers = None


def layer(model_type, **config):
    global transformers
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(transformers.AutoConfig.for_model(model_type, **config)).eval()


LAYERS = {
    "llama": dict(hidden_size=64, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  intermediate_size=128, vocab_size=128),
    "bert": dict(hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128, vocab_size=128),
    "gpt2": dict(n_embd=64, n_layer=1, n_head=4, n_inner=128, vocab_size=128, n_positions=64),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("model_type", sorted(LAYERS))
def test_transformers_layer(model_type, dtype, launches):
    model = layer(model_type, **LAYERS[model_type]).to(dtype)
    ids = torch.randint(1, 128, (2, 8))
    with torch.no_grad():
        report = fff.torch.explain(model, ids, options=EMULATED, print_report=False)
    # Every norm of the layer (and the final one) is a region on the GPU
    # pipeline, and the emulator ran fff's norm kernels for them.
    assert_all_gpu(report, at_least=3)
    assert sum(report.taken.values()) >= 3
    assert any("norm" in name for name in launches())
    compiled_against_eager(model, [(ids,), (torch.randint(1, 128, (3, 11)),)], TOLERANCE[dtype])


class TreeBlock(torch.nn.Module):
    """A pre-LN tree sublayer, then a tree layer of two trees on its own."""

    def __init__(self, leaf, dtype):
        super().__init__()
        self.norm = torch.nn.LayerNorm(64, dtype=dtype)
        self.tree = fff.torch.LeafTreeFFN(64, 8, 64, depth=3, dtype=dtype) if leaf else \
            fff.torch.TreeFFN(64, 64, depth=3, dtype=dtype)
        self.head = fff.torch.TreeFFN(64, 48, depth=2, trees=2, dtype=dtype)

    def forward(self, h):
        h = h + self.tree(self.norm(h))
        return self.head(h * 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("leaf", [False, True], ids=["tree", "leaf"])
def test_tree_block(leaf, dtype, launches):
    torch.manual_seed(1)
    model = TreeBlock(leaf, dtype).eval()
    h = torch.randn(2, 7, 64, dtype=dtype)
    with torch.no_grad():
        report = fff.torch.explain(model, h, options=EMULATED, print_report=False)
    assert [r.kind for r in report.regions] == ["fff::tree_sublayer", "fff::tree_ffn"], str(report)
    assert_all_gpu(report, at_least=2)
    assert len(launches()) >= 2
    compiled_against_eager(model, [(h,), (torch.randn(5, 3, 64, dtype=dtype),)], TOLERANCE[dtype])


def norm_of_view(weight):
    def f(buffer):
        x = buffer[1:].view(5, 64)  # 4 bytes past the buffer's start
        return torch.nn.functional.layer_norm(x * 2, (64,), weight) + 1
    return f


def test_misaligned_input_is_copied():
    torch.manual_seed(2)
    f = norm_of_view(torch.randn(64))
    buffer = torch.randn(5 * 64 + 1)
    report = fff.torch.explain(f, buffer, options=EMULATED, print_report=False)
    (region,) = report.regions
    assert region.pipeline == "gpu"
    assert region.copies == ["input 0 starts 4 bytes past a 16-byte boundary, copied to one before each call "
                             "(fff's kernels read 16-byte vectors)"]
    torch._dynamo.reset()
    assert relative_error(torch.compile(f, backend="fff", options=EMULATED)(buffer), f(buffer)) < 1e-5


def test_misaligned_buffer_is_refused_by_the_compiled_code():
    """What the copy above prevents: the emulator keeps a tensor's offset
    from a 256-byte boundary, as a CUDA tensor's view has it, and fff's
    compiled host code refuses such a buffer before any kernel reads it."""
    executable = fff.compile("""
func.func @norm(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = fff.rms_norm %x : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}""", target="cuda", chip=_devices.emulator_device().chip)
    emulator = _devices.emulator_device()
    x = torch.randn(5 * 64 + 1)[1:].view(5, 64)
    assert x.data_ptr() % 16 == 4
    with pytest.raises(fff.FFFError, match=r"@norm: argument #0 \(memref<\?x64xf32>\) is not 16-byte aligned"):
        executable.norm(emulator.upload(x), out=emulator.empty((5, 64), torch.float32))
    placement = _devices.Placement("emulated", emulator.chip)
    (y,) = placement.call(executable.norm, [x], [[5, 64]])
    assert relative_error(y, x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-5)) < 1e-5


def test_strided_input_is_copied():
    torch.manual_seed(3)
    weight = torch.randn(64)

    def f(x):
        return torch.nn.functional.rms_norm(x.transpose(0, 1) + 1, (64,), weight)

    x = torch.randn(64, 6)
    report = fff.torch.explain(f, x, options=EMULATED, print_report=False)
    (region,) = report.regions
    assert region.copies == ["input 0 is a strided view, copied contiguous before each call"], str(report)
    torch._dynamo.reset()
    assert relative_error(torch.compile(f, backend="fff", options=EMULATED)(x), f(x)) < 1e-5


def test_float64_stays_with_the_fallback():
    weight = torch.randn(64, dtype=torch.float64)

    def f(x):
        return torch.nn.functional.layer_norm(x * 2, (64,), weight) + 1

    x = torch.randn(5, 64, dtype=torch.float64)
    report = fff.torch.explain(f, x, options=EMULATED, print_report=False)
    assert report.calls == 0
    assert ("layer_norm", "fff compiles f32, f16 and bf16 tensors, and this op's are float64") in report.left
    torch._dynamo.reset()
    assert torch.allclose(torch.compile(f, backend="fff", options=EMULATED)(x), f(x))


@pytest.mark.parametrize("model_type", ["llama", "bert"])
def test_training_step(model_type, launches):
    """A training graph's norms, forward and backward (the residual
    gradient fused where the backward adds one to dx), run on the GPU's
    norm kernels; every parameter's gradient is eager's."""
    config = dict(LAYERS[model_type], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0) \
        if model_type == "bert" else LAYERS[model_type]
    model = layer(model_type, **config).train()
    ids = torch.randint(1, 128, (2, 8))
    report = fff.torch.explain(model, ids, options=EMULATED, backward=True, print_report=False)
    assert report.training and report.calls >= 3 and report.backward_calls, str(report)
    assert all(r.pipeline == "gpu" for r in report.regions + report.backward), str(report)
    assert any("norm_grad" in name for name in launches())

    # A random weighting of the output: the sum of a LayerNorm's squares
    # is constant in its input, so that its gradient would be rounding
    # noise.
    weighting = torch.randn(2, 8, 64, generator=torch.Generator().manual_seed(6))

    def gradients(run):
        model.zero_grad()
        (run(ids).last_hidden_state.float() * weighting).sum().backward()
        return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    expected = gradients(model)
    torch._dynamo.reset()
    actual = gradients(torch.compile(model, backend="fff", options=EMULATED))
    torch._dynamo.reset()
    # Inductor gives the unused pooler of BERT zero gradients, eager none.
    assert expected.keys() <= actual.keys()
    assert all(not actual[name].any() for name in actual.keys() - expected.keys())
    for name in expected:
        # A key's bias has no gradient but rounding noise (softmax ignores
        # it): that is held to an absolute bound.
        close = relative_error(actual[name], expected[name]) < 1e-4 or \
            (actual[name] - expected[name]).abs().max() < 1e-7
        assert close, name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_a_dropout_after_a_norm_joins_its_fused_backward_kernel(dtype, launches):
    """dropout(norm(h)) in train mode: the dropout's mask and scale join the
    norm's backward as its dy prologue, which the GPU's fused backward
    kernel applies as it reads dy (the mask as bytes); the gradients are
    those of the CPU pipeline's run with the same seed (the same mask)."""
    torch.manual_seed(0)
    norm, drop = torch.nn.LayerNorm(96, dtype=dtype), torch.nn.Dropout(0.25)
    out = torch.nn.Linear(96, 96, dtype=dtype)

    def f(h):
        h = h * 1.5
        return out(h + drop(norm(h)))

    x = torch.randn(5, 7, 96, dtype=dtype)
    grads = {}
    for options in (EMULATED, {}):
        torch._dynamo.reset()
        for p in (*norm.parameters(), *out.parameters()):
            p.grad = None
        leaf = x.clone().requires_grad_()
        torch.manual_seed(3)
        torch.compile(f, backend="fff", options=options)(leaf).float().sum().backward()
        grads[bool(options)] = [leaf.grad, norm.weight.grad, norm.bias.grad, out.weight.grad]
    torch._dynamo.reset()
    for emulated, cpu in zip(grads[True], grads[False]):
        assert relative_error(emulated, cpu) < TOLERANCE[dtype]
    assert any(name.startswith("fused_layer_norm_grad") for name in launches()), launches()
    torch.manual_seed(3)
    report = fff.torch.explain(f, x.clone().requires_grad_(), options=EMULATED, backward=True, print_report=False)
    assert dict(report.backward_dy_masks) == {"layer_norm_grad": 1}, str(report)


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_a_mixed_type_norm_under_autocast_trains_on_the_gpu_kernels(kind, launches):
    """An f32 norm module fed bf16 activations under CPU autocast (torch's
    mixed-type norm: f32 arithmetic, y and dx rounded once to bf16): its
    forward and backward are each one fused f32 norm kernel, which widens
    x and dy as it reads them and narrows y and dx as it writes them (the
    backward's column sums aside), and every gradient is the CPU
    pipeline's within bf16's rounding."""
    torch.manual_seed(0)
    into, out = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)
    norm = torch.nn.LayerNorm(64) if kind == "layer_norm" else torch.nn.RMSNorm(64, eps=1e-6)
    modules = (into, norm, out)

    def f(x):
        return out(norm(into(x)))

    x = torch.randn(6, 64)
    grads = {}
    for options in (EMULATED, {}):
        torch._dynamo.reset()
        for p in (p for m in modules for p in m.parameters()):
            p.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.compile(f, backend="fff", options=options)(x)
        y.float().square().sum().backward()
        grads[bool(options)] = [y] + [p.grad for m in modules for p in m.parameters()]
    torch._dynamo.reset()
    for emulated, cpu in zip(grads[True], grads[False]):
        assert emulated.dtype == cpu.dtype and relative_error(emulated, cpu) < TOLERANCE[torch.bfloat16]
    ran = launches()
    assert any(name.startswith(f"fused_{kind}_f32") for name in ran), ran
    assert any(name.startswith(f"fused_{kind}_grad_f32") for name in ran), ran
    assert all(name.startswith("fused_") or name.endswith("column_sums") for name in ran), ran
    with torch.autocast("cpu", dtype=torch.bfloat16):
        report = fff.torch.explain(f, x, options=EMULATED, backward=True, print_report=False)
    assert dict(report.backward_calls) == {f"{kind}_grad": 1}, str(report)
    assert all(r.pipeline == "gpu" for r in report.regions + report.backward), str(report)


def test_tree_training_step(launches):
    """A training graph's tree layers under emulate_cuda: fff::tree_ffn's
    and fff::leaf_tree_ffn's forwards and backwards (fff.tree_ffn_grad,
    fff.leaf_tree_ffn_grad) on the GPU's kernels; every gradient is eager's
    (whose tree gradients are the CPU kernels')."""
    torch.manual_seed(7)
    model = TreeBlock(leaf=True, dtype=torch.float32).train()
    model.tree.w1.data.normal_()  # leaves of more than one sign
    h = torch.randn(3, 5, 64, requires_grad=True)
    report = fff.torch.explain(model, h, options=EMULATED, backward=True, print_report=False)
    pipelines = {r.kind: r.pipeline for r in report.regions + report.backward}
    assert pipelines == {"fff::layer_norm_train": "gpu", "fff::leaf_tree_ffn": "gpu", "fff::tree_ffn": "gpu",
                         "fff::layer_norm_train_backward": "gpu", "fff::tree_ffn_backward": "gpu",
                         "fff::leaf_tree_ffn_backward": "gpu"}, str(report)
    names = launches()
    assert any(name.startswith("tree_ffn_grad") for name in names), names
    assert any(name.startswith("leaf_tree_ffn_grad") for name in names), names
    weighting = torch.randn(3, 5, 48, generator=torch.Generator().manual_seed(8))

    def gradients(run):
        model.zero_grad()
        h.grad = None
        (run(h) * weighting).sum().backward()
        return {"h": h.grad.clone(), **{n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}}

    expected = gradients(model)
    torch._dynamo.reset()
    actual = gradients(torch.compile(model, backend="fff", options=EMULATED))
    torch._dynamo.reset()
    assert actual.keys() == expected.keys()
    for name in expected:
        # A leaf tree's routing nodes get no gradient (zeros), both ways.
        assert torch.equal(actual[name], expected[name]) or relative_error(actual[name], expected[name]) < 1e-4, name


def test_a_lone_tree_layer_trains_on_the_emulator(launches):
    """A training graph with a tree op and nothing else fff takes: the op's
    emulate_cuda flag still reaches the compiled graph."""
    torch.manual_seed(9)
    tree = fff.torch.TreeFFN(64, 32, depth=3)
    h = torch.randn(4, 64, requires_grad=True)
    torch._dynamo.reset()
    torch.compile(tree, backend="fff", options=EMULATED)(h).sum().backward()
    torch._dynamo.reset()
    names = launches()
    assert any(name.startswith("tree_ffn_grad") for name in names), names
    expected = torch.autograd.grad(tree(h).sum(), h)[0]
    assert relative_error(h.grad, expected) < 1e-5


def test_tree_layers_in_checkpointed_blocks_train_on_the_emulator(launches):
    """A checkpointed block's tree ops are in a subgraph of the training
    graph: flagged there too, they run the GPU's kernels, forward and
    backward, not the CPU pipeline's."""
    from test_torch_tree_training import _CheckpointedTreeBlocks
    torch.manual_seed(10)
    model = _CheckpointedTreeBlocks()
    x = torch.randn(3, 5, 24, requires_grad=True)
    report = fff.torch.explain(model, x, options=EMULATED, backward=True, print_report=False)
    assert report.taken["tree_ffn"] == 2 and report.backward_calls["tree_ffn_grad"] == 2, str(report)
    assert all(r.pipeline == "gpu" for r in report.regions + report.backward), str(report)
    names = launches()
    # One forward kernel and one backward walk per layer: a tree op's
    # backward reads its inputs, not its result, so nothing is recomputed.
    assert sum(name.startswith("tree_ffn_f32") for name in names) == 2, names
    assert sum(name.startswith("tree_ffn_grad") and name.endswith("_walk") for name in names) == 2, names
    dy = torch.randn(3, 5, 24, generator=torch.Generator().manual_seed(11))
    parameters = [x, *model.parameters()]
    expected = torch.autograd.grad(model(x), parameters, dy)
    torch._dynamo.reset()
    actual = torch.autograd.grad(torch.compile(model, backend="fff", options=EMULATED)(x), parameters, dy)
    torch._dynamo.reset()
    for a, e in zip(actual, expected):
        assert relative_error(a, e) < 1e-5


def test_a_tree_op_called_with_positional_options_keeps_them(launches):
    """A model's own call of fff::tree_ffn with its options positional
    (emulate_cuda, then zero_goes_right): the graph's fff::region call
    runs it on the emulator with zero_goes_right, as eager does, on rows
    whose logits are often exactly 0."""
    generator = torch.Generator().manual_seed(12)
    w_in = torch.randint(-1, 2, (1, 15, 16), generator=generator).float()
    w_out = torch.randn(1, 15, 8, generator=generator)

    def layer(x):
        return torch.ops.fff.tree_ffn(x, w_in, None, w_out, None, 3, "gelu", False, True)

    x = torch.randint(-1, 2, (32, 16), generator=generator) * (torch.rand(32, 16, generator=generator) < 0.25)
    x = x.float()
    report = fff.torch.Report()
    torch._dynamo.reset()
    compiled = torch.compile(layer, backend=functools.partial(fff.torch.backend, report=report, emulate_cuda=True))
    with torch.no_grad():
        actual = compiled(x)
    torch._dynamo.reset()
    assert [r.pipeline for r in report.regions] == ["gpu"], str(report)
    assert any(name.startswith("tree_ffn_f32") for name in launches())
    assert relative_error(actual, layer(x)) < 1e-6
    left = torch.ops.fff.tree_ffn(x, w_in, None, w_out, None, 3, "gelu")
    assert relative_error(left, layer(x)) > 0.1  # the ties matter


def test_placements():
    cpu, meta = torch.empty(2), torch.empty(2, device="meta")
    assert _devices.placement_of([cpu]) is _devices.CPU
    assert _devices.placement_of([cpu], emulate_cuda=True).kind == "emulated"
    with pytest.raises(_devices.Unplaced, match="the graph's tensors are on cpu and meta"):
        _devices.placement_of([cpu, meta])
    with pytest.raises(_devices.Unplaced, match="emulate_cuda runs CPU graphs on fff's PTX emulator; this one is "
                                                "on meta"):
        _devices.placement_of([meta], emulate_cuda=True)


def test_result_extents_come_from_the_inputs():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv(), static_shapes=False)
    a, b = mode.from_tensor(torch.empty(4, 8)), mode.from_tensor(torch.empty(5, 8))
    sources = _devices.result_sources([a, b], [torch.empty(3), b])
    assert sources == [(3,), ((1, 0), (0, 1))]
    assert _devices.result_shapes(sources, [torch.empty(6, 2), torch.empty(7, 2)]) == [[3], [7, 2]]
    with mode:
        joined = torch.cat([a, b])
    with pytest.raises(_devices.Unplaced, match=r"result 0's extent s\d+ \+ s\d+ is no input's extent, and a GPU "
                                                "call's results are allocated before it runs"):
        _devices.result_sources([a, b], [joined])


def test_devices_fff_does_not_run_on():
    meta = torch.device("meta")
    with pytest.raises(fff.FFFError, match="fff runs on CPU and CUDA tensors, not on 'meta'"):
        _devices.placement_of_device(meta)
    with pytest.raises(fff.FFFError, match="emulate_cuda takes CPU tensors, not meta ones"):
        _devices.placement_of_device(meta, emulate_cuda=True)


def test_option_is_checked():
    with pytest.raises(ValueError, match="option 'emulate_cuda' must be True or False"):
        fff.torch.check_options({"emulate_cuda": "yes"})


def test_without_a_driver(monkeypatch):
    monkeypatch.delenv("FFF_CUDA_DRIVER")
    _devices.emulator_device.cache_clear()
    try:
        with pytest.raises(fff.FFFError, match="set it to fff's PTX emulator"):
            _devices.placement_of([torch.empty(2)], emulate_cuda=True)
    finally:
        _devices.emulator_device.cache_clear()


@pytest.mark.parametrize("dtype, activation, depth, din, width, dout",
                         [(torch.float32, "gelu", 3, 40, 12, 24), (torch.float32, "gelu_tanh", 1, 33, 64, 20),
                          (torch.float16, "relu", 2, 17, 5, 9), (torch.bfloat16, "silu", 4, 64, 48, 33)])
def test_leaf_tree_backward_on_the_emulator(launches, dtype, activation, depth, din, width, dout):
    """fff::leaf_tree_ffn_backward with emulate_cuda runs the GPU kernels of
    fff.leaf_tree_ffn_grad, and its gradients are the hard-routed ones:
    float64 autograd through a straight-loop reference."""
    from test_torch_leaf_tree_training import leaf_reference, leaf_tensors
    generator = torch.Generator().manual_seed(depth * 1000 + width)
    inputs = leaf_tensors(61, din, width, dout, depth, dtype, generator)
    dy = torch.randn(61, dout, generator=generator).to(dtype)
    got = torch.ops.fff.leaf_tree_ffn_backward(dy, *inputs, depth, activation, emulate_cuda=True)
    assert any(name.startswith("leaf_tree_ffn_grad") for name in launches()), launches()
    reference = [t.double().requires_grad_() for t in inputs]
    expected = torch.autograd.grad(leaf_reference(*reference, depth, activation), reference, dy.double(),
                                   allow_unused=True)
    tolerance = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}[dtype]
    for name, g, e, like in zip(["x", "node_w", "node_b", "w1", "b1", "w2", "b2"], got, expected, inputs):
        assert g.dtype == dtype and g.shape == like.shape, name
        if name.startswith("node"):
            assert e is None and not g.any(), name
        else:
            assert relative_error(g, e) < tolerance, name


@pytest.mark.parametrize("dtype, activation, depth, trees, din, dout, bias",
                         [(torch.float32, "gelu", 4, 1, 48, 40, True), (torch.float32, "relu", 2, 3, 33, 9, False),
                          (torch.float16, "silu", 3, 2, 16, 24, True), (torch.bfloat16, "gelu", 6, 1, 64, 32, True)])
def test_tree_backward_on_the_emulator_is_the_authors_masked_layers(launches, dtype, activation, depth, trees, din,
                                                                     dout, bias):
    """fff::tree_ffn_backward with emulate_cuda (fff.tree_ffn_grad's GPU
    kernels) against float64 autograd through a transcription of
    UltraFastBERT's masked training layer."""
    from test_torch_tree_training import masked_dense, tensors
    generator = torch.Generator().manual_seed(depth * 100 + trees * 10 + din)
    inputs = tensors(43, din, dout, depth, trees, dtype, bias, generator)
    dy = torch.randn(43, dout, generator=generator).to(dtype)
    got = torch.ops.fff.tree_ffn_backward(dy, *inputs, depth, activation, emulate_cuda=True)
    assert any(name.startswith("tree_ffn_grad") for name in launches()), launches()
    reference = [t.double().requires_grad_() if t is not None else None for t in inputs]
    present = [t for t in reference if t is not None]
    expected = dict(zip([n for n, t in zip(["x", "w_in", "b_in", "w_out", "b_out"], reference) if t is not None],
                        torch.autograd.grad(masked_dense(*reference, depth, activation), present, dy.double())))
    tolerance = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}[dtype]
    for name, g in zip(["x", "w_in", "b_in", "w_out", "b_out"], got):
        if name not in expected:
            assert g.numel() == 0, name  # an absent bias's gradient is empty
            continue
        assert g.dtype == dtype and g.shape == expected[name].shape, name
        assert relative_error(g, expected[name]) < tolerance, name


def test_leaf_tree_backward_on_the_emulator_is_fastfeedforwards_hard_training(launches):
    """fff::leaf_tree_ffn_backward with emulate_cuda against autograd
    through the fastfeedforward package's training forward with hard
    decisions."""
    from test_torch_leaf_tree_training import fastfeedforward_pair, hard_training_gradients
    torch.manual_seed(14)
    theirs, ours = fastfeedforward_pair(40, 12, 24, 3, torch.nn.GELU())
    x, dy = torch.randn(89, 40), torch.randn(89, 24)
    weights = [p.detach() for p in ours.parameters()]
    got = torch.ops.fff.leaf_tree_ffn_backward(dy, x, *weights, ours.depth, ours.activation, emulate_cuda=True)
    assert any(name.startswith("leaf_tree_ffn_grad") for name in launches()), launches()
    expected = hard_training_gradients(theirs, x, dy)
    for name, g, e in zip(["x", "node_w", "node_b", "w1", "b1", "w2", "b2"], got, expected):
        if name.startswith("node"):
            assert not g.any() and not e.any(), name
        else:
            assert relative_error(g, e.reshape(g.shape)) < 2e-5, name

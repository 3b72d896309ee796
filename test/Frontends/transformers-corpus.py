# torch.compile(model, backend="fff") on a corpus of transformers model
# families that fff has no special code for: encoders, decoders,
# encoder-decoders, vision and speech models, built from small configs with
# random weights (no downloads), eval mode, under no_grad, with the default
# (Inductor) fallback. Each runs at two shapes (the second recompiles with
# dynamic extents), some in bf16 too, and three decoders run generate().
# Every float result is held to eager's: relative error (over each tensor)
# 1e-4 in f32, 3e-2 in bf16. Each family also runs a training step (train
# mode, dropout off, the eager fallback): the gradient of every parameter and
# of float inputs (but wav2vec2's), from a random weighting of every float output, is held
# to eager's (1e-4, relative to the gradient or to 1e-3 per element where it
# is rounding noise); one that is not must be no farther from a float64
# step's gradient than 4x eager's is. A family fails if it gives a wrong
# answer or raises. Prints per family the norms present (torch modules and
# functions that normalize), the norms fff took, and any error.
#
#   PYTHONPATH=build/python build/venv/bin/python test/Frontends/transformers-corpus.py [--emulate-cuda] [FAMILY ...]
#
# With --emulate-cuda, the backend runs with options={"emulate_cuda": True}:
# every fff call compiles for the GPU and runs on fff's PTX emulator (the
# driver FFF_CUDA_DRIVER names), as on CUDA tensors.
#
# REQUIRES: python-package, torch
# RUN: env PYTHONPATH=%fff_obj_root/python %python %s | FileCheck %s
# CHECK: corpus: {{[0-9]+}} runs of {{[0-9]+}} families, 0 wrong, 0 crashed
# CHECK: {{[0-9]+}} passed, 0 failed

import collections
import copy
import sys
import time
import traceback

try:
    import torch
    import transformers
    import torch_mlir.fx  # noqa: F401
except ImportError as missing:
    print(f"skipped: {missing}")
    print("corpus: 0 runs of 0 families, 0 wrong, 0 crashed\n0 passed, 0 failed")
    sys.exit(0)

import fff.torch

transformers.logging.set_verbosity_error()

VOCAB = 128
TEXT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=VOCAB,
            max_position_embeddings=64, pad_token_id=0)
DECODER = dict(TEXT, num_key_value_heads=2, head_dim=16)
VISION = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=32,
              patch_size=8, num_channels=3)
SEQ2SEQ = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
               encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=VOCAB, max_position_embeddings=64,
               pad_token_id=0, decoder_start_token_id=1)
TEXT_SHAPES = [(2, 8), (3, 11)]

# family: (model_type, config, input kind, what else to run)
FAMILIES = {
    # Encoders
    "bert": ("bert", TEXT, "text", {"bf16"}),
    "roberta": ("roberta", dict(TEXT, max_position_embeddings=80), "text", set()),
    "distilbert": ("distilbert", dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=VOCAB,
                                      max_position_embeddings=64), "text", set()),
    "albert": ("albert", dict(TEXT, embedding_size=32), "text", set()),
    "electra": ("electra", dict(TEXT, embedding_size=32), "text", set()),
    "deberta-v2": ("deberta-v2", dict(TEXT, relative_attention=True, pos_att_type=["p2c", "c2p"],
                                      position_buckets=16, max_relative_positions=32), "text", set()),
    "mpnet": ("mpnet", TEXT, "text", set()),
    # Decoders
    "gpt2": ("gpt2", dict(n_embd=64, n_layer=2, n_head=4, n_inner=128, vocab_size=VOCAB, n_positions=64), "text",
             set()),
    "gpt-neox": ("gpt_neox", TEXT, "text", {"generate"}),
    "llama": ("llama", DECODER, "text", {"bf16"}),
    "mistral": ("mistral", DECODER, "text", {"generate"}),
    "qwen2": ("qwen2", DECODER, "text", set()),
    "qwen3": ("qwen3", DECODER, "text", {"generate"}),
    "gemma": ("gemma", DECODER, "text", set()),
    "gemma2": ("gemma2", dict(DECODER, sliding_window=16), "text", {"bf16"}),
    "gemma3": ("gemma3_text", dict(DECODER, sliding_window=16), "text", set()),
    "phi": ("phi", TEXT, "text", set()),
    "phi3": ("phi3", dict(TEXT, num_key_value_heads=2), "text", set()),
    "falcon": ("falcon", dict(TEXT), "text", {"bf16"}),
    "falcon-40b-style": ("falcon", dict(TEXT, new_decoder_architecture=True, num_kv_heads=2), "text", set()),
    "opt": ("opt", dict(TEXT, ffn_dim=128, word_embed_proj_dim=64), "text", set()),
    "bloom": ("bloom", dict(hidden_size=64, n_layer=2, n_head=4, vocab_size=VOCAB), "text", set()),
    "gptj": ("gptj", dict(n_embd=64, n_layer=2, n_head=4, n_inner=128, rotary_dim=8, vocab_size=VOCAB,
                          n_positions=64), "text", set()),
    "stablelm": ("stablelm", dict(TEXT, num_key_value_heads=2), "text", set()),
    "olmo": ("olmo", dict(TEXT, num_key_value_heads=2), "text", set()),
    "cohere": ("cohere", dict(TEXT, num_key_value_heads=2), "text", set()),
    # Short convolutions beside attention: its dynamic-shape graph slices a
    # cast by a symbolic extent, which once hung torch's partitioner.
    "lfm2": ("lfm2", dict(DECODER, full_attn_idxs=[1]), "text", set()),
    # Encoder-decoders
    "t5": ("t5", dict(d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16, vocab_size=VOCAB), "seq2seq",
           {"bf16"}),
    "bart": ("bart", SEQ2SEQ, "seq2seq", set()),
    # Vision
    "vit": ("vit", VISION, "image", set()),
    "convnext": ("convnext", dict(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, image_size=32), "image",
                 set()),
    "clip-vision": ("clip_vision_model", VISION, "image", set()),
    "dinov2": ("dinov2", VISION, "image", set()),
    # Speech
    "whisper-encoder": ("whisper", dict(SEQ2SEQ, num_mel_bins=16, max_source_positions=16,
                                        max_target_positions=32), "audio-features", set()),
    "wav2vec2": ("wav2vec2", dict(TEXT, conv_dim=(32, 32, 32), conv_kernel=(10, 3, 3), conv_stride=(5, 2, 2),
                                  num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4), "audio", set()),
}
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2}
NORM_MODULES = ("LayerNorm", "RMSNorm", "GroupNorm")


def build(model_type, config_kwargs):
    config = transformers.AutoConfig.for_model(model_type, **config_kwargs)
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config)
    if model_type == "whisper":
        model = model.get_encoder()
    with torch.no_grad():  # norms whose weights start at 1 (or 0, Gemma's) would not tell
        for module in model.modules():
            if type(module).__name__.endswith(NORM_MODULES) and getattr(module, "weight", None) is not None:
                module.weight.uniform_(0.5, 1.5)
    return model.eval()


def inputs(kind, config, shape, seed):
    generator = torch.Generator().manual_seed(seed)
    batch, length = shape
    if kind == "text":
        return {"input_ids": torch.randint(0, VOCAB, (batch, length), generator=generator)}
    if kind == "seq2seq":
        return {"input_ids": torch.randint(0, VOCAB, (batch, length), generator=generator),
                "decoder_input_ids": torch.randint(0, VOCAB, (batch, length - 2), generator=generator)}
    if kind == "image":
        return {"pixel_values": torch.randn(batch, 3, 32, 32, generator=generator)}
    if kind == "audio-features":
        return {"input_features": torch.randn(batch, config.num_mel_bins, 2 * config.max_source_positions,
                                              generator=generator)}
    return {"input_values": torch.randn(batch, 40 * length, generator=generator)}


def tensors(output):
    """Every floating-point tensor in a model's output, by path."""
    found = {}

    def walk(value, path):
        if isinstance(value, torch.Tensor):
            if value.is_floating_point():
                found[path] = value
        elif isinstance(value, dict) or hasattr(value, "to_tuple"):
            for key, item in (value.items() if isinstance(value, dict) else zip(value.keys(), value.to_tuple())):
                walk(item, f"{path}.{key}")
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")
        elif hasattr(value, "layers"):  # a KV cache
            for i, layer in enumerate(value.layers):
                walk([getattr(layer, "keys", None), getattr(layer, "values", None)], f"{path}.layers[{i}]")
    walk(output, "out")
    return found


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm().clamp_min(1e-30)).item()


def compare(actual, expected, dtype):
    actual, expected = tensors(actual), tensors(expected)
    if actual.keys() != expected.keys():
        return f"results {sorted(actual)} where eager gives {sorted(expected)}"
    for path, e in expected.items():
        a = actual[path]
        if a.shape != e.shape or a.dtype != e.dtype:
            return f"{path} is {a.dtype}{list(a.shape)}, eager's {e.dtype}{list(e.shape)}"
        error = relative_error(a, e)
        if not error <= TOLERANCE[dtype]:
            return f"{path} is off by {error:.2g} (relative)"
    return None


def norms_present(model):
    counts = collections.Counter(type(m).__name__ for m in model.modules() if type(m).__name__.endswith(NORM_MODULES))
    return ", ".join(f"{name} x{count}" for name, count in sorted(counts.items())) or "none"


def report_line(report):
    return ", ".join(f"{name} x{count}" for name, count in sorted(report.taken.items())) or "none"


# The backend's options beyond the fallback (--emulate-cuda).
OPTIONS = {}


def run_forward(name, model_type, config_kwargs, kind, dtype):
    model = build(model_type, config_kwargs).to(dtype)
    report = fff.torch.Report()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=lambda gm, example: fff.torch.backend(gm, example, report=report,
                                                                                 **OPTIONS))
    with torch.no_grad():
        for i, shape in enumerate(TEXT_SHAPES):
            args = inputs(kind, model.config, shape, seed=i)
            args = {k: v.to(dtype) if v.is_floating_point() else v for k, v in args.items()}
            wrong = compare(compiled(**args), model(**args), dtype)
            if wrong:
                return norms_present(model), report, f"shape {list(shape)}: {wrong}"
    return norms_present(model), report, None


def no_dropout(config_kwargs):
    """The config's dropout probabilities, by any of the names families
    give them, set to 0: eager and compiled runs would draw other masks."""
    off = {key: 0.0 for key in ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout",
                                "activation_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "hidden_dropout",
                                "attention_dropout_prob", "classifier_dropout", "dropout_rate", "qa_dropout",
                                "seq_classif_dropout", "summary_first_dropout",
                                "feat_proj_dropout", "final_dropout", "layerdrop", "mask_time_prob",
                                "drop_path_rate", "encoder_layerdrop", "decoder_layerdrop", "residual_dropout"
                                )}
    return dict(config_kwargs, **off)


def gradient_error(actual, expected):
    """|actual - expected| relative to expected, or to 1e-3 per element
    where expected is rounding noise (a gradient 0 in exact arithmetic)."""
    scale = max(expected.double().norm().item(), 1e-3 * expected.numel() ** 0.5)
    return (actual.double() - expected.double()).norm().item() / scale


def step_gradients(run, module, args, input_grads):
    """The gradients, by name, of `module`'s parameters and (with
    `input_grads`) of the float tensors of `args` after a backward of
    run(**args) under a seeded random weighting of every float output."""
    module.zero_grad(set_to_none=True)
    leaves = {k: v.clone().requires_grad_(input_grads and v.is_floating_point()) for k, v in args.items()}
    outputs = tensors(run(**leaves))
    generator = torch.Generator().manual_seed(11)
    loss = sum((t.float() * torch.randn(t.shape, generator=generator)).sum() if t.dtype != torch.float64 else
               (t * torch.randn(t.shape, generator=generator).double()).sum() for t in outputs.values())
    loss.backward()
    return {**{f"input {k}": v.grad for k, v in leaves.items() if v.grad is not None},
            **{n: p.grad for n, p in module.named_parameters() if p.grad is not None}}


def run_training(name, model_type, config_kwargs, kind):
    """One training step's gradients, compiled (eager fallback) and eager."""
    model = build(model_type, no_dropout(config_kwargs)).train()
    reference = copy.deepcopy(model)
    report = fff.torch.Report()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=lambda gm, example: fff.torch.backend(gm, example, report=report,
                                                                                 fallback="eager", **OPTIONS))
    args = inputs(kind, model.config, TEXT_SHAPES[0], seed=5)
    # wav2vec2 sets requires_grad on a view of its input itself, which
    # torch refuses where the input already requires it.
    input_grads = kind != "audio"
    actual, expected = (step_gradients(run, module, args, input_grads)
                        for run, module in ((compiled, model), (reference, reference)))
    if actual.keys() != expected.keys():
        return norms_present(model), report, f"gradients of {sorted(set(actual) ^ set(expected))} differ in presence"
    exact = None
    for path, e in expected.items():
        error = gradient_error(actual[path], e)
        if error <= TOLERANCE[torch.float32]:
            continue
        # A gradient that is 0 in exact arithmetic (a key projection's bias
        # under softmax) is rounding noise in both, and the two roundings
        # may differ by more than the tolerance. It passes if it is no
        # farther from float64's than eager's is (within 4x).
        if exact is None:
            exact = step_gradients(reference.double(), reference,
                                   {k: v.double() if v.is_floating_point() else v for k, v in args.items()},
                                   input_grads)
        exact_error = gradient_error(actual[path], exact[path])
        eager_error = gradient_error(e, exact[path])
        if not exact_error <= max(TOLERANCE[torch.float32], 4 * eager_error):
            return norms_present(model), report, (f"the gradient of {path} is off by {error:.2g} (relative); "
                                                  f"from float64's, by {exact_error:.2g} where eager's is "
                                                  f"{eager_error:.2g}")
    return norms_present(model), report, None


def run_generate(name, model_type, config_kwargs):
    config = transformers.AutoConfig.for_model(model_type, **config_kwargs)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    prompt = torch.randint(0, VOCAB, (2, 6), generator=torch.Generator().manual_seed(7))
    settings = dict(max_new_tokens=4, do_sample=False, return_dict_in_generate=True, output_logits=True,
                    pad_token_id=0)
    with torch.no_grad():
        expected = model.generate(prompt, **settings)
        report = fff.torch.Report()
        torch._dynamo.reset()
        eager_forward = model.forward
        model.forward = torch.compile(model.forward,
                                      backend=lambda gm, example: fff.torch.backend(gm, example, report=report,
                                                                                 **OPTIONS))
        try:
            actual = model.generate(prompt, **settings)
        finally:
            model.forward = eager_forward
    if not torch.equal(actual.sequences, expected.sequences):
        return norms_present(model), report, "generated other tokens than eager"
    for step, (a, e) in enumerate(zip(actual.logits, expected.logits)):
        if not relative_error(a, e) <= TOLERANCE[torch.float32]:
            return norms_present(model), report, f"step {step}'s logits are off by {relative_error(a, e):.2g}"
    return norms_present(model), report, None


def main(selected):
    runs = []
    for name, (model_type, config_kwargs, kind, extra) in FAMILIES.items():
        if selected and name not in selected:
            continue
        plans = [("f32", lambda: run_forward(name, model_type, config_kwargs, kind, torch.float32))]
        if "bf16" in extra:
            plans.append(("bf16", lambda: run_forward(name, model_type, config_kwargs, kind, torch.bfloat16)))
        if "generate" in extra:
            plans.append(("generate", lambda: run_generate(name, model_type, config_kwargs)))
        plans.append(("train", lambda: run_training(name, model_type, config_kwargs, kind)))
        for what, plan in plans:
            start = time.time()
            try:
                present, report, wrong = plan()
                on_cpu = [r.kind for r in report.regions + report.backward if r.pipeline != "gpu"]
                if OPTIONS.get("emulate_cuda") and on_cpu and not wrong:
                    wrong = f"under emulate_cuda, {', '.join(on_cpu)} ran on the CPU pipeline"
                outcome = ("wrong", wrong) if wrong else ("ok", "")
            except Exception as error:  # a crash: the family fails, the corpus goes on
                present, report = "?", None
                text = (str(error).strip().splitlines() or [type(error).__name__])[0]
                outcome = ("crashed", f"{type(error).__name__}: {text[:300]}")
                traceback.print_exc(file=sys.stderr)
            runs.append((name, what, present, report_line(report) if report else "?",
                         report.calls if report else 0, time.time() - start, *outcome))
            print(f"{name:18} {what:8} {outcome[0]:7} {runs[-1][5]:5.1f}s  present: {present}; "
                  f"fff took: {runs[-1][3]} in {runs[-1][4]} call(s) {outcome[1]}", flush=True)
    wrong = sum(r[6] == "wrong" for r in runs)
    crashed = sum(r[6] == "crashed" for r in runs)
    print(f"corpus: {len(runs)} runs of {len({r[0] for r in runs})} families, {wrong} wrong, {crashed} crashed, "
          f"{sum(r[5] for r in runs):.0f}s")
    print(f"{len(runs) - wrong - crashed} passed, {wrong + crashed} failed")
    return 1 if wrong or crashed else 0


if __name__ == "__main__":
    arguments = set(sys.argv[1:])
    if "--emulate-cuda" in arguments:
        arguments.remove("--emulate-cuda")
        OPTIONS["emulate_cuda"] = True
    sys.exit(main(arguments))

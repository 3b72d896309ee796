#!/usr/bin/env python3
"""Training through torch.compile(backend="fff") side by side with eager and
torch.compile's default (Inductor), on the CPU, in one run, same threads.

    PYTHONPATH=build/python build/venv/bin/python benchmarks/torch/train.py [--quick]
        [--residual|--dropout] [--mixed] [--models-only|--norms-only]

Norms: LayerNorm (weight and bias) and RMSNorm (weight) at 4096x768,
4096x4096 and 16384x1024, f32 and bf16: the forward + backward of
`norm(x)` with a given dy, and the backward alone (a retained graph's
backward, run again with the gradients cleared first, as a training step
runs it: not added into the last call's .grad, a pass over x's size that
every column would pay alike), each call after the caches are flushed
(--caches cold, the default: x was saved by the forward long before), or
with its own tensors in them (warm), or after the column before it (order:
each column's time then depends on what its neighbour left). Each
backward's traffic (x, dy, dx, parameters and their gradients) over its
time is printed as GB/s, beside this machine's copy bandwidth (torch's
clone of 256 MiB: read + write).

With --residual, each norm is a pre-LN residual step, `h + norm(h)`: the
backward graph adds the residual's gradient to the norm's dx, which fff's
backward kernel does as it writes dx (the residual gradient fused,
_backward_fusion.py); Inductor and eager add it in a pass of their own.
The traffic counted is the same as the norm's alone: the residual
gradient is dy itself.

With --mixed, the f16 and bf16 norms keep f32 parameters: torch's
mixed-type norms (an f32 module fed half-width activations, as a model
trained under CPU autocast feeds its norms), which compute in f32 and round
y and dx once to x's dtype. fff widens x and dy as it reads them. The
model steps then run their forward under torch.autocast("cpu", bfloat16):
mixed-precision training of the f32 models.

With --dropout, each norm is `h + dropout(norm(h))` in train mode (p 0.1):
the norm's dy is the dropout's backward, which fff's backward kernel
applies as it reads dy (the mask fused, _backward_fusion.py). fff runs
twice, with that fusion and without it (the graph's own product, which
Inductor computes in a pass of its own); the gradients are held to
Inductor's, which draws the same masks from the same seed.

Models: a training step (forward, loss, backward, AdamW step) of a small
LLaMA-style and BERT-style model from transformers configs, random weights.

Prints median ms (compilation excluded; the baselines timed round-robin
with fff's), fff's ratio to each baseline (>1: fff is faster), and each
backward's GB/s, the baselines' too. A norm's gradients, fff's and eager's,
are held to float64's (the largest relative error of dx, dweight, dbias); a
model's first loss to eager's.
Nothing asserts a speed; the table is the result.
"""

import argparse
import contextlib
import copy
import os
import statistics
import time

import torch

import fff.torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--quick", action="store_true", help="smaller shapes and fewer repetitions")
parser.add_argument("--threads", type=int, default=os.cpu_count())
parser.add_argument("--models-only", action="store_true")
parser.add_argument("--norms-only", action="store_true")
parser.add_argument("--residual", action="store_true", help="time h + norm(h), not norm(h)")
parser.add_argument("--dropout", action="store_true", help="time h + dropout(norm(h)), with and without fff's "
                    "mask fusion")
parser.add_argument("--mixed", action="store_true", help="f16 and bf16 norms keep f32 parameters (torch's "
                    "mixed-type norms: an f32 norm module fed half-width activations, as under CPU autocast); "
                    "the model steps run under torch.autocast('cpu', bfloat16)")
parser.add_argument("--shapes", help="the norms' shapes, ROWSxHIDDEN,... (default: the three above)")
parser.add_argument("--dtypes", default="float32,bfloat16", help="the norms' dtypes")
parser.add_argument("--caches", choices=["cold", "warm", "order"], default="cold",
                    help="what each timed backward alone finds in the caches: nothing of its tensors (cold, the "
                         "default), its own tensors (warm: it runs once untimed first), or what the column timed "
                         "before it left (order)")
options = parser.parse_args()
torch.set_num_threads(options.threads)
# The backward alone is timed by running a retained graph's backward again,
# which AOTAutograd allows only without donated buffers (for Inductor and
# fff alike).
torch._functorch.config.donated_buffer = False
REPEAT = 3 if options.quick else 10
SHAPES = [(512, 768)] if options.quick else [(4096, 768), (4096, 4096), (16384, 1024)]
if options.shapes:
    SHAPES = [tuple(int(extent) for extent in shape.split("x")) for shape in options.shapes.split(",")]
DTYPES = [getattr(torch, name) for name in options.dtypes.split(",")]


def median_ms(fn):
    return interleaved_ms({"": fn})[""]


def interleaved_ms(fns, caches="order"):
    """Median ms of each of `fns` (name: callable), timed round-robin, so
    that the machine's changes of speed touch every one alike. `caches`
    says what each timed call finds in the caches: "order", whatever the
    call before it left; "cold", nothing of its tensors (the caches are
    flushed first); "warm", its own tensors (it runs once untimed first)."""
    for fn in fns.values():
        fn()
        fn()
    times = {name: [] for name in fns}
    for _ in range(REPEAT):
        for name, fn in fns.items():
            if caches == "cold":
                flush_caches()
            elif caches == "warm":
                fn()
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


_FLUSH = None


def flush_caches():
    """Writes 512 MiB, twice this machine's last-level cache: what a call
    reads next comes from memory."""
    global _FLUSH
    if _FLUSH is None:
        _FLUSH = torch.zeros(512 << 20, dtype=torch.uint8)
    _FLUSH.add_(1)


def copy_bandwidth():
    """GB/s of torch's clone of 256 MiB (bytes read + bytes written)."""
    source = torch.empty(64 << 20, dtype=torch.float32).fill_(1.0)
    ms = median_ms(lambda: source.clone())
    return 2 * source.numel() * 4 / ms / 1e6


def clear_grads(leaf, module):
    """Sets the gradients of `leaf` and of `module`'s parameters to None, as
    a training step does before its backward."""
    leaf.grad = None
    module.zero_grad()


def backward_again(y, dy, x, module):
    """The backward of y's retained graph, as a training step runs it: with
    the gradients cleared first, so that what is timed is the backward, not
    an accumulation into the previous call's .grad."""
    clear_grads(x, module)
    y.backward(dy, retain_graph=True)


def backward_bytes(kind, rows, hidden, element_size, parameter_size=None):
    """What a norm's backward moves: x, dy and dx, and the parameters read
    and their gradients written."""
    parameters = 2 if kind == "layer_norm" else 1
    return 3 * rows * hidden * element_size + 2 * parameters * hidden * (parameter_size or element_size)


def case_inputs(rows, hidden, dtype):
    """A norm case's x (a leaf that requires grad) and dy, seeded."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(rows, hidden, generator=generator).to(dtype).requires_grad_()
    dy = torch.randn(rows, hidden, generator=generator).to(dtype)
    return x, dy


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm().clamp_min(1e-30)).item()


class Residual(torch.nn.Module):
    """A pre-LN residual step around a norm alone: h + norm(h)."""

    def __init__(self, norm):
        super().__init__()
        self.norm = norm

    def forward(self, h):
        return h + self.norm(h)


def make_norm(kind, hidden, dtype):
    torch.manual_seed(0)
    norm = torch.nn.LayerNorm(hidden) if kind == "layer_norm" else torch.nn.RMSNorm(hidden, eps=1e-6)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        if kind == "layer_norm":
            norm.bias.uniform_(-0.5, 0.5)
    if not (options.mixed and dtype in (torch.float16, torch.bfloat16)):
        norm = norm.to(dtype)
    return Residual(norm) if options.residual and not options.dropout else norm


def compiled(module, name):
    """`module` as the column `name` runs it: Inductor's, fff's ("fff",
    "fff unfused"), or as it is (eager, float64)."""
    if name == "inductor":
        return torch.compile(module)
    return torch.compile(module, backend="fff") if name.startswith("fff") else module


def norm_case(kind, rows, hidden, dtype, bandwidth):
    x, dy = case_inputs(rows, hidden, dtype)
    steps, backwards, grads = {}, {}, {}
    # The parameters' dtype of the norm timed (the float64 reference's are
    # float64).
    param_dtype = next(make_norm(kind, hidden, dtype).parameters()).dtype
    for name in ("eager", "inductor", "fff", "float64"):
        norm = make_norm(kind, hidden, dtype if name != "float64" else torch.float64)
        torch._dynamo.reset()
        run = compiled(norm, name)
        leaf = x.detach().double().requires_grad_() if name == "float64" else x

        def step(run=run, norm=norm, leaf=leaf):
            clear_grads(leaf, norm)
            run(leaf).backward(dy.to(leaf.dtype))

        step()
        grads[name] = [leaf.grad.clone()] + [p.grad.clone() for p in norm.parameters()]
        if name == "float64":
            break
        y = run(x)
        steps[name] = step
        backwards[name] = lambda y=y, norm=norm: backward_again(y, dy, x, norm)
    fwd_bwd, bwd = interleaved_ms(steps), interleaved_ms(backwards, options.caches)
    # The largest relative error of dx, dweight, dbias from float64's.
    errors = {name: max(relative_error(a, e) for a, e in zip(grads[name], grads["float64"]))
              for name in ("eager", "fff")}
    moved = backward_bytes(kind, rows, hidden, x.element_size(), param_dtype.itemsize)
    best = min(("eager", "inductor"), key=lambda n: bwd[n])
    mixed = " (f32 parameters)" if param_dtype != dtype else ""
    label = f"{'h + ' if options.residual else ''}{kind} {str(dtype).replace('torch.', '')}{mixed} {rows}x{hidden}"
    print(f"| {label} | {fwd_bwd['eager']:.2f} | {fwd_bwd['inductor']:.2f} | {fwd_bwd['fff']:.2f} | "
          f"{fwd_bwd['inductor'] / fwd_bwd['fff']:.2f}x | {bwd['eager']:.2f} | {bwd['inductor']:.2f} | "
          f"{bwd['fff']:.2f} | {bwd['inductor'] / bwd['fff']:.2f}x | {bwd[best] / bwd['fff']:.2f}x ({best}) | "
          f"{moved / bwd['eager'] / 1e6:.1f} | {moved / bwd['inductor'] / 1e6:.1f} | "
          f"{moved / bwd['fff'] / 1e6:.1f} ({100 * moved / bwd['fff'] / 1e6 / bandwidth:.0f}%) | "
          f"{errors['fff']:.1e} | {errors['eager']:.1e} |", flush=True)


class DroppedResidual(torch.nn.Module):
    """h + dropout(norm(h)) in train mode: the norm's dy is the dropout's
    backward."""

    def __init__(self, norm):
        super().__init__()
        self.norm, self.drop = norm, torch.nn.Dropout(0.1)

    def forward(self, h):
        return h + self.drop(self.norm(h))


def unfused_masks():
    """A context in which fff's backward fusion leaves dropout masks to the
    graph (and Inductor's graph cache, which would hand back the fused
    graph, is off)."""
    from unittest import mock

    from fff.torch import _backward_fusion
    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(_backward_fusion, "fuse_dropout_masks", lambda graph: 0))
    stack.enter_context(torch._inductor.config.patch(fx_graph_cache=False))
    return stack


def dropout_case(kind, rows, hidden, dtype, bandwidth):
    x, dy = case_inputs(rows, hidden, dtype)
    steps, backwards, grads = {}, {}, {}
    for name in ("eager", "inductor", "fff", "fff unfused"):
        module = DroppedResidual(make_norm(kind, hidden, dtype)).train()
        torch._dynamo.reset()
        run = compiled(module, name)

        def step(run=run, module=module):
            clear_grads(x, module)
            run(x).backward(dy)

        with unfused_masks() if name == "fff unfused" else contextlib.nullcontext():
            torch.manual_seed(5)
            step()
            grads[name] = [x.grad.clone()] + [p.grad.clone() for p in module.parameters()]
            y = run(x)
            y.backward(dy, retain_graph=True)
        steps[name] = step
        backwards[name] = lambda y=y, module=module: backward_again(y, dy, x, module)
    fwd_bwd, bwd = interleaved_ms(steps), interleaved_ms(backwards, options.caches)
    errors = {name: max(relative_error(a, e) for a, e in zip(grads[name], grads["inductor"]))
              for name in ("fff", "fff unfused")}
    moved = backward_bytes(kind, rows, hidden, x.element_size()) + rows * hidden  # and the mask's bytes
    best = min(("eager", "inductor"), key=lambda n: bwd[n])
    label = f"h + dropout({kind}) {str(dtype).replace('torch.', '')} {rows}x{hidden}"
    print(f"| {label} | {fwd_bwd['eager']:.2f} | {fwd_bwd['inductor']:.2f} | {fwd_bwd['fff unfused']:.2f} | "
          f"{fwd_bwd['fff']:.2f} | {fwd_bwd['inductor'] / fwd_bwd['fff']:.2f}x | {bwd['eager']:.2f} | "
          f"{bwd['inductor']:.2f} | {bwd['fff unfused']:.2f} | {bwd['fff']:.2f} | "
          f"{bwd['inductor'] / bwd['fff']:.2f}x | {bwd[best] / bwd['fff']:.2f}x ({best}) | "
          f"{bwd['fff unfused'] / bwd['fff']:.2f}x | {moved / bwd['eager'] / 1e6:.1f} | "
          f"{moved / bwd['inductor'] / 1e6:.1f} | {moved / bwd['fff'] / 1e6:.1f} "
          f"({100 * moved / bwd['fff'] / 1e6 / bandwidth:.0f}%) | {errors['fff']:.1e} | "
          f"{errors['fff unfused']:.1e} |", flush=True)


def llama():
    import transformers
    config = transformers.LlamaConfig(vocab_size=4096, hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
                                      num_attention_heads=8, num_key_value_heads=8, attn_implementation="eager")
    return transformers.LlamaForCausalLM(config)


def bert():
    import transformers
    config = transformers.BertConfig(vocab_size=4096, hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
                                     num_attention_heads=8, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return transformers.BertForMaskedLM(config)


def model_case(make, batch, length):
    torch.manual_seed(0)
    initial = make()
    ids = torch.randint(0, 4096, (batch, length), generator=torch.Generator().manual_seed(2))
    steps, losses = {}, {}
    for name in ("eager", "inductor", "fff"):
        model = copy.deepcopy(initial)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        torch._dynamo.reset()
        run = compiled(model, name)

        def step(run=run, optimizer=optimizer):
            with torch.autocast("cpu", dtype=torch.bfloat16) if options.mixed else contextlib.nullcontext():
                loss = run(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            return loss

        losses[name] = step().item()
        steps[name] = step
    times = interleaved_ms(steps)
    error = abs(losses["fff"] - losses["eager"]) / abs(losses["eager"])
    label = f"{make.__name__} {batch}x{length}{' (bf16 autocast)' if options.mixed else ''}"
    print(f"| {label} | {times['eager']:.1f} | {times['inductor']:.1f} | "
          f"{times['fff']:.1f} | {times['eager'] / times['fff']:.2f}x | {times['inductor'] / times['fff']:.2f}x | "
          f"{error:.1e} |", flush=True)


print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; median ms, {REPEAT} calls after two warm-ups; "
      f"the backward alone timed with caches {options.caches}")
if not options.models_only:
    bandwidth = copy_bandwidth()
    print(f"\ncopy bandwidth (torch clone of 256 MiB, read + write): {bandwidth:.1f} GB/s\n")
    if options.dropout:
        print("| step | fwd+bwd eager | Inductor | fff unfused | fff | fff vs Inductor | bwd eager | Inductor | "
              "fff unfused | fff | fff vs Inductor | fff vs fastest | fused vs unfused | bwd GB/s eager | Inductor | "
              "fff (of copy) | fff's grad error vs Inductor | unfused's |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    else:
        print("| norm | fwd+bwd eager | Inductor | fff | fff vs Inductor | bwd eager | Inductor | fff | "
              "fff vs Inductor | fff vs fastest | bwd GB/s eager | Inductor | fff (of copy) | fff's grad error | "
              "eager's |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for dtype in DTYPES:
        for kind in ("layer_norm", "rms_norm"):
            for rows, hidden in SHAPES:
                (dropout_case if options.dropout else norm_case)(kind, rows, hidden, dtype, bandwidth)
if not options.norms_only:
    print("\n| model training step (AdamW) | eager | Inductor | fff | fff vs eager | fff vs Inductor | "
          "fff's first-loss error |")
    print("|---|---|---|---|---|---|---|")
    for make in (llama, bert):
        model_case(make, 2 if options.quick else 8, 64 if options.quick else 128)

#!/usr/bin/env python3
"""A leaf tree's training step (the original FFF, hard routing) on fff's
kernels, side by side with the `fastfeedforward` package's own training
step and a dense feedforward's, on the CPU, in one run, same threads.

    PYTHONPATH=build/python build/venv/bin/python benchmarks/torch/train_leaves.py \
        [--batches B ...] [--dtypes float32 bfloat16]

Layers, each 768 wide in and out, with 3072 hidden units in all (the
BERT-base FFN's): 256 leaves of 12 (depth 8), 64 of 48 (depth 6), 16 of
192 (depth 4).

A step is the forward and the backward of y for a given dy: gradients of x
and of every weight (set to None before each step, alike for all).
- fff: fff.torch.LeafTreeFFN (the fff::leaf_tree_ffn kernel, then
  fff::leaf_tree_ffn_backward on fff's leaf_tree_ffn_grad kernel where it
  takes the leaves, torch ops where BLAS wins);
- fff, torch-op backward: the same forward, the backward in torch ops (rows
  grouped by leaf, a few matrix products per leaf), as before the kernel;
- fastfeedforward eager / compile: the package's FFF module with the same
  weights, `training_forward(x, use_hard_decisions=True)` (every leaf on
  every row, mixed by the hard decisions), eager and under torch.compile.
  Its step took 9.4 s at batch 128 with 256 leaves (0.4 GFLOP/s), so it
  runs only where batch * leaves is at most 128 * 256 (a "-" elsewhere);
- dense: a 768 -> 3072 -> 768 GELU feedforward, eager.

GFLOP/s counts each one's own arithmetic, a step three times its forward's
multiply-adds: fff's a row's one leaf (2 * B * W * (Din + Dout) forward);
fastfeedforward's every leaf (2 * B * L * W * (Din + Dout)); the dense
one's 2 * B * 3072 * (Din + Dout). fff's gradients are held to
fastfeedforward's where it runs, else to the torch-op backward's (the
largest relative error over x, w1, b1, w2, b2).

Prints median ms (compilation excluded; timed round-robin), and fff's
ratio to each baseline (>1: fff is faster). Nothing asserts a speed.
"""

import argparse
import os

import torch

import fff.torch
from timing import interleaved_ms
from fff.torch._tree_training import leaf_tree_ffn_backward

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--threads", type=int, default=os.cpu_count())
parser.add_argument("--batches", type=int, nargs="+", default=[128, 4096], help="batch sizes")
parser.add_argument("--dtypes", nargs="+", choices=["float32", "bfloat16"], default=["float32"])
options = parser.parse_args()
torch.set_num_threads(options.threads)
WIDTH, DENSE_HIDDEN = 768, 3072
# The largest batch * leaves at which fastfeedforward's step is timed.
FASTFEEDFORWARD_ROW_LEAVES = 128 * 256
LAYERS = [(8, 12), (6, 48), (4, 192)]


def step(forward, parameters, x, dy):
    """A training step's gradients: x's, then the parameters'."""
    for p in parameters:
        p.grad = None
    x.grad = None
    forward(x).backward(dy)
    return [x.grad] + [p.grad for p in parameters]


class TorchOpBackward(torch.autograd.Function):
    """fff's leaf-tree forward with the torch-op backward."""

    @staticmethod
    def forward(ctx, x, node_w, node_b, w1, b1, w2, b2, depth):
        ctx.save_for_backward(x, node_w, node_b, w1, b1, w2, b2)
        ctx.depth = depth
        return torch.ops.fff.leaf_tree_ffn(x, node_w, node_b, w1, b1, w2, b2, depth, "relu")

    @staticmethod
    def backward(ctx, dy):
        return (*leaf_tree_ffn_backward(dy, *ctx.saved_tensors, ctx.depth, "relu"), None)


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm().clamp_min(1e-30)).item()


def main():
    import fastfeedforward

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; median ms of a training step "
          "(forward + backward), compilation excluded")
    print()
    print("| leaves | dtype | batch | fff | fff, torch-op backward | fastfeedforward eager | fastfeedforward compile | "
          "dense | fff vs torch-op backward | fff vs fastest | GFLOP/s fff (a leaf) | fastfeedforward eager | "
          "fastfeedforward compile | dense | fff's grad error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for depth, width in LAYERS:
        for dtype in [getattr(torch, name) for name in options.dtypes]:
            torch.manual_seed(0)
            theirs = fastfeedforward.FFF(WIDTH, width, WIDTH, depth, activation=torch.nn.ReLU()).train().to(dtype)
            with torch.no_grad():
                theirs.b2s.uniform_(-0.1, 0.1)
            ours = fff.torch.LeafTreeFFN.from_fastfeedforward(theirs)
            with torch.no_grad():  # the training forward adds b2s; the eval one does not
                ours.b2.copy_(theirs.b2s)
            their_params = [theirs.w1s, theirs.b1s, theirs.w2s, theirs.b2s]
            our_params = [ours.w1, ours.b1, ours.w2, ours.b2]
            hard = lambda x: theirs.training_forward(x, use_hard_decisions=True)  # noqa: E731
            compiled = torch.compile(hard)
            torch_ops = lambda x: TorchOpBackward.apply(x, ours.node_w, ours.node_b, *our_params, depth)  # noqa: E731
            dense = torch.nn.Sequential(torch.nn.Linear(WIDTH, DENSE_HIDDEN), torch.nn.GELU(),
                                        torch.nn.Linear(DENSE_HIDDEN, WIDTH)).to(dtype)
            for batch in options.batches:
                x = torch.randn(batch, WIDTH).to(dtype).requires_grad_()
                dy = torch.randn(batch, WIDTH).to(dtype)
                fns = {"fff": lambda: step(ours, our_params, x, dy),
                       "torch-op backward": lambda: step(torch_ops, our_params, x, dy),
                       "dense": lambda: step(dense, list(dense.parameters()), x, dy)}
                # fff's gradients against fastfeedforward's, or, where that
                # is too slow to run, against the torch-op backward's.
                reference = torch_ops
                if batch * 2 ** depth <= FASTFEEDFORWARD_ROW_LEAVES:
                    reference = hard
                    fns["fastfeedforward eager"] = lambda: step(hard, their_params, x, dy)
                    fns["fastfeedforward compile"] = lambda: step(compiled, their_params, x, dy)
                got = step(ours, our_params, x, dy)
                want = step(reference, their_params if reference is hard else our_params, x, dy)
                error = max(relative_error(g, w) for g, w in zip(got, want))
                ms = interleaved_ms(fns, 5)
                per_row = 2 * (WIDTH + WIDTH)
                flops = {"fff": 3 * batch * width * per_row, "torch-op backward": 3 * batch * width * per_row,
                         "fastfeedforward eager": 3 * batch * (2 ** depth) * width * per_row,
                         "fastfeedforward compile": 3 * batch * (2 ** depth) * width * per_row,
                         "dense": 3 * batch * DENSE_HIDDEN * per_row}
                gflops = {k: flops[k] / (ms[k] * 1e6) for k in ms}
                baselines = [k for k in ms if k not in ("fff", "torch-op backward")]
                fastest = min(baselines, key=ms.get)
                time_of = lambda k: f"{ms[k]:.2f}" if k in ms else "-"  # noqa: E731
                rate_of = lambda k: f"{gflops[k]:.1f}" if k in ms else "-"  # noqa: E731
                print(f"| {2 ** depth}x{width} | {str(dtype).removeprefix('torch.')} | {batch} | {ms['fff']:.2f} | "
                      f"{ms['torch-op backward']:.2f} | {time_of('fastfeedforward eager')} | "
                      f"{time_of('fastfeedforward compile')} | {ms['dense']:.2f} | "
                      f"{ms['torch-op backward'] / ms['fff']:.1f}x | {ms[fastest] / ms['fff']:.1f}x ({fastest}) | "
                      f"{gflops['fff']:.1f} | {rate_of('fastfeedforward eager')} | "
                      f"{rate_of('fastfeedforward compile')} | {gflops['dense']:.1f} | {error:.1e} |", flush=True)


if __name__ == "__main__":
    main()

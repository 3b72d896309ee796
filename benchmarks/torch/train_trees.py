#!/usr/bin/env python3
"""A tree layer's training step on fff's kernels, side by side with the FFF
authors' masked dense formulation (eager and torch.compile) and a dense
feedforward's, on the CPU, in one run, same threads.

    PYTHONPATH=build/python build/venv/bin/python benchmarks/torch/train_trees.py [--quick]
        [--batches B ...] [--layers 1x11 4x8] [--dtypes float32 bfloat16]

Layers, each 768 wide in and out:
- UltraFastBERT-1x11: one tree of depth 11 (4095 neurons, 12 on a path);
- four trees of depth 8 (4 x 511 neurons, 4 x 9 on the paths);
at batch 128, 4096 and 16384, f32 and bf16.

A step is the forward and the backward of y for a given dy: gradients of x
and of every weight (set to None before each step, alike for all).
- fff: fff.torch.TreeFFN (the fff::tree_ffn kernel, then
  fff::tree_ffn_backward on fff's tree_ffn_grad kernel);
- masked eager / masked compile: the same weights in
  fff.torch.MaskedTreeFFN, the authors' training layer (linear_in and the
  activation over every neuron, the path's 0/1 mask, a dense linear_out),
  eager and under torch.compile (Inductor);
- dense: a 768 -> 3072 -> 768 GELU feedforward (the BERT-base FFN the tree
  replaces), eager; its compiled step is no faster (two GEMMs dominate).

GFLOP/s counts each one's own arithmetic: a step is three times its
forward's multiply-adds (the forward, then dx and the weight gradients).
fff's is the path's: 2 * B * K * (depth + 1) * (Din + Dout) forward. The
masked layer's: 2 * B * (K * N) * (Din + Dout); the dense one's 2 * B *
3072 * (Din + Dout). fff's gradients are held to the masked layer's eager
ones (the largest relative error over dx and the weights).

Prints median ms (compilation excluded; timed round-robin), and fff's
ratio to each baseline (>1: fff is faster). Nothing asserts a speed.
"""

import argparse
import os

import torch

import fff.torch
from timing import interleaved_ms

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--quick", action="store_true", help="batch 128 and 1024 only, fewer repetitions")
parser.add_argument("--threads", type=int, default=os.cpu_count())
parser.add_argument("--batches", type=int, nargs="+", help="batch sizes (default 128, 4096, 16384)")
parser.add_argument("--layers", nargs="+", choices=["1x11", "4x8"], help="layers (default both)")
parser.add_argument("--dtypes", nargs="+", choices=["float32", "bfloat16"], help="dtypes (default both)")
options = parser.parse_args()
torch.set_num_threads(options.threads)
BATCHES = options.batches or ([128, 1024] if options.quick else [128, 4096, 16384])
LAYERS = [layer for layer in [("1x11", 1, 11), ("4x8", 4, 8)] if layer[0] in (options.layers or ["1x11", "4x8"])]
DTYPES = [getattr(torch, name) for name in options.dtypes or ["float32", "bfloat16"]]
WIDTH, DENSE_HIDDEN = 768, 3072


def repeats(batch):
    return 3 if options.quick or batch >= 16384 else 5


def step(module, x, dy):
    """A training step's gradients: x's, then the parameters'."""
    for p in module.parameters():
        p.grad = None
    x.grad = None
    module(x).backward(dy)
    return [x.grad] + [p.grad for p in module.parameters()]


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm().clamp_min(1e-30)).item()


def as_tree_grads(grads, trees, depth):
    """MaskedTreeFFN's gradients (x, linear_in's weight and bias,
    linear_out's weight) in TreeFFN's layout (x, w_in, b_in, w_out)."""
    dx, d_in_weight, d_in_bias, d_out_weight = grads
    nodes = 2 ** (depth + 1) - 1
    return [dx, d_in_weight.view(trees, nodes, -1), d_in_bias.view(trees, nodes),
            d_out_weight.t().reshape(trees, nodes, -1)]


def dense_ffn(dtype):
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, DENSE_HIDDEN), torch.nn.GELU(),
                               torch.nn.Linear(DENSE_HIDDEN, WIDTH)).to(dtype)


def main():
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; median ms of a training step "
          "(forward + backward), compilation excluded")
    print()
    print("| layer | dtype | batch | fff | masked eager | masked compile | dense | fff vs masked compile | "
          "fff vs dense | fff vs fastest | GFLOP/s fff (path) | masked eager | masked compile | dense | "
          "fff's grad error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, trees, depth in LAYERS:
        for dtype in DTYPES:
            torch.manual_seed(0)
            tree = fff.torch.TreeFFN(WIDTH, WIDTH, depth=depth, trees=trees, output_bias=False).to(dtype)
            masked = tree.to_ultrafastbert()
            compiled = torch.compile(masked)
            dense = dense_ffn(dtype)
            nodes = trees * (2 ** (depth + 1) - 1)
            for batch in BATCHES:
                x = torch.randn(batch, WIDTH).to(dtype).requires_grad_()
                dy = torch.randn(batch, WIDTH).to(dtype)
                got, want = step(tree, x, dy), as_tree_grads(step(masked, x, dy), trees, depth)
                error = max(relative_error(g, w) for g, w in zip(got, want))
                ms = interleaved_ms({"fff": lambda: step(tree, x, dy), "masked eager": lambda: step(masked, x, dy),
                                     "masked compile": lambda: step(compiled, x, dy),
                                     "dense": lambda: step(dense, x, dy)}, repeats(batch))
                flops = {"fff": 3 * 2 * batch * trees * (depth + 1) * 2 * WIDTH,
                         "masked eager": 3 * 2 * batch * nodes * 2 * WIDTH,
                         "masked compile": 3 * 2 * batch * nodes * 2 * WIDTH,
                         "dense": 3 * 2 * batch * DENSE_HIDDEN * 2 * WIDTH}
                gflops = {k: flops[k] / (ms[k] * 1e6) for k in ms}
                fastest = min((k for k in ms if k != "fff"), key=ms.get)
                print(f"| {name} | {str(dtype).removeprefix('torch.')} | {batch} | {ms['fff']:.2f} | "
                      f"{ms['masked eager']:.2f} | {ms['masked compile']:.2f} | {ms['dense']:.2f} | "
                      f"{ms['masked compile'] / ms['fff']:.1f}x | {ms['dense'] / ms['fff']:.1f}x | "
                      f"{ms[fastest] / ms['fff']:.1f}x ({fastest}) | {gflops['fff']:.1f} | "
                      f"{gflops['masked eager']:.1f} | {gflops['masked compile']:.1f} | {gflops['dense']:.1f} | "
                      f"{error:.1e} |", flush=True)


if __name__ == "__main__":
    main()

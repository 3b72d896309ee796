#!/usr/bin/env python3
"""Trains a small UltraFastBERT-style encoder on fff's tree layers: a BERT
built from a transformers config with random weights, each feedforward
replaced by a TreeFFN (fff.torch.use_tree_feedforwards), AdamW on a
synthetic masked-token task. Each sequence repeats a random motif, so a
hidden token can be read off its copies: the loss falls from about
ln(vocab) towards 0 as the model learns to look them up.

    PYTHONPATH=build/python build/venv/bin/python examples/train_ultrafastbert.py \
        [--steps 150] [--depth 6] [--compare] [--compile]

--compare trains the same model, same seed, with UltraFastBERT's own
(masked dense) layer in its place (TreeFFN.to_ultrafastbert) and prints
both losses: they agree to rounding, at a fraction of the work per step.
--compile runs the fff model under torch.compile(backend="fff").
"""

import argparse
import copy
import time

import torch
import transformers

import fff.torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--depth", type=int, default=6, help="tree depth: each token uses depth+1 of 2^(depth+1)-1 neurons")
parser.add_argument("--trees", type=int, default=1)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--length", type=int, default=32)
parser.add_argument("--compare", action="store_true", help="also train with UltraFastBERT's masked dense layer")
parser.add_argument("--compile", action="store_true", help='run the fff model under torch.compile(backend="fff")')
options = parser.parse_args()

VOCAB, MOTIF, MASK = 64, 4, 0
config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=512, max_position_embeddings=options.length,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
torch.manual_seed(0)
model = fff.torch.use_tree_feedforwards(transformers.BertForMaskedLM(config), depth=options.depth,
                                        trees=options.trees)
models = {"fff": model}
if options.compare:
    models["ultrafastbert"], _ = fff.torch.convert_tree_layers(copy.deepcopy(model), to="ultrafastbert")


def batches(steps, seed=1):
    """Tokens that repeat a random motif; 15% hidden (labels only there)."""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        motif = torch.randint(1, VOCAB, (options.batch, MOTIF), generator=generator)
        tokens = motif.repeat(1, options.length // MOTIF)
        hidden = torch.rand(tokens.shape, generator=generator) < 0.15
        yield tokens.masked_fill(hidden, MASK), tokens.masked_fill(~hidden, -100)


losses, seconds = {}, {}
for name, net in models.items():
    step = torch.compile(net, backend="fff") if options.compile and name == "fff" else net
    optimizer = torch.optim.AdamW(net.parameters(), lr=2e-3)
    losses[name], start = [], time.perf_counter()
    for inputs, labels in batches(options.steps):
        optimizer.zero_grad()
        loss = step(input_ids=inputs, labels=labels).loss
        loss.backward()
        optimizer.step()
        losses[name].append(loss.item())
    seconds[name] = time.perf_counter() - start

print(f"BERT, 2 layers, hidden 128, tree feedforwards of depth {options.depth} ({options.trees} tree(s)): "
      f"each token uses {options.trees * (options.depth + 1)} of {options.trees * (2 ** (options.depth + 1) - 1)} "
      "neurons per layer")
print("step  " + "  ".join(f"{name:>13}" for name in models))
for index in sorted({0, *range(9, options.steps, max(options.steps // 10, 1)), options.steps - 1}):
    print(f"{index + 1:4d}  " + "  ".join(f"{losses[name][index]:13.4f}" for name in models))
for name in models:
    print(f"{name}: {options.steps} steps in {seconds[name]:.1f} s")
if options.compare:
    difference = max(abs(a - b) / abs(b) for a, b in zip(losses["fff"], losses["ultrafastbert"]))
    print(f"largest relative difference of the losses: {difference:.1e}")

#!/usr/bin/env python3
"""torch.compile(backend="fff") side by side with torch.compile's default
(Inductor) and eager, on the CPU, in one run.

    PYTHONPATH=build/python build/venv/bin/python benchmarks/torch/run.py [--quick]

Cases: norm-heavy blocks that are all fff's (a residual add + LayerNorm, a
LLaMA RMSNorm), transformers' BERT and LLaMA layers (fff takes the norms,
Inductor the rest), and a pre-LN block whose FFN is an fff.torch.TreeFFN
(against the dense 768->3072->768 FF it replaces, under Inductor), and
UltraFastBERT's own layers, its masked training layer and the walk of its
PyTorch inference benchmark, which the backend raises to its tree op
(fff/torch/_masked_trees.py). Prints the
median time per call (compilation excluded), fff's ratio to each baseline
(>1: fff is faster), and how much of each graph fff took. Nothing asserts a
speed; the table is the result.
"""

import argparse
import os
import statistics
import sys
import time

import torch

import fff.torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--quick", action="store_true", help="smaller shapes and fewer repetitions")
parser.add_argument("--threads", type=int, default=os.cpu_count())
parser.add_argument("--only", help="run only the cases whose name holds this text (and skip the closing tree row)")
options = parser.parse_args()
torch.set_num_threads(options.threads)
REPEAT = 5 if options.quick else 20
ROWS = 512 if options.quick else 4096


def median_ms(fn, *args):
    with torch.no_grad():
        fn(*args)
        fn(*args)
        times = []
        for _ in range(REPEAT):
            start = time.perf_counter()
            fn(*args)
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


class ResidualLayerNorm(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.ln = torch.nn.LayerNorm(hidden)

    def forward(self, x, a):
        return self.ln(x + a)


class LlamaRMSNorm(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(hidden) + 0.5)

    def forward(self, x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(x.dtype)


class LlamaLayer(torch.nn.Module):
    """transformers' LLaMA decoder layer at 768 wide, with its rotary
    embedding."""

    def __init__(self):
        super().__init__()
        import transformers
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding
        config = transformers.LlamaConfig(hidden_size=768, num_attention_heads=12, num_key_value_heads=12,
                                          intermediate_size=2048, attn_implementation="eager")
        self.layer, self.rope = LlamaDecoderLayer(config, layer_idx=0), LlamaRotaryEmbedding(config)

    def forward(self, x):
        out = self.layer(x, position_embeddings=self.rope(x, torch.arange(x.shape[1]).unsqueeze(0)))
        return out[0] if isinstance(out, tuple) else out


class BertOnly(torch.nn.Module):
    def __init__(self):
        super().__init__()
        import transformers
        from transformers.models.bert.modeling_bert import BertLayer
        self.layer = BertLayer(transformers.BertConfig(attn_implementation="eager"))

    def forward(self, x):
        out = self.layer(x)
        return out[0] if isinstance(out, tuple) else out


class PreLNBlock(torch.nn.Module):
    """x + FFN(LayerNorm(x)), the FFN a TreeFFN (UltraFastBERT-1x11) or dense."""

    def __init__(self, tree):
        super().__init__()
        self.ln = torch.nn.LayerNorm(768)
        self.ffn = fff.torch.TreeFFN(768, 768, depth=11) if tree else torch.nn.Sequential(
            torch.nn.Linear(768, 3072), torch.nn.GELU(), torch.nn.Linear(3072, 768))

    def forward(self, x):
        return x + self.ffn(self.ln(x))


class WalkedTree(torch.nn.Module):
    """UltraFastBERT's inference layer as its PyTorch benchmark computes it
    (benchmark_pytorch/fff/fff_bmm.py, written from its structure): one
    tree, each level an index_select of the rows' nodes and a bmm for their
    logits (a logit >= 0 goes right), then GELU of the logits times the
    path's gathered output rows in one bmm."""

    def __init__(self, width, depth):
        super().__init__()
        self.depth, self.width = depth, width
        nodes = 2 ** (depth + 1) - 1
        self.w1s = torch.nn.Parameter(torch.randn(nodes, width) / width ** 0.5)
        self.w2s = torch.nn.Parameter(torch.randn(nodes, width) / (depth + 1) ** 0.5)

    def forward(self, x):
        batch = x.shape[0]
        node = torch.zeros((batch,), dtype=torch.long)
        visited = torch.zeros(batch, self.depth + 1, dtype=torch.long)
        logits = torch.empty((batch, self.depth + 1))
        for level in range(self.depth + 1):
            visited[:, level] = node
            logit = torch.bmm(x.unsqueeze(1), self.w1s.index_select(0, node).unsqueeze(-1)).view(batch)
            logits[:, level] = logit
            node = node * 2 + (logit >= 0).long() + 1
        rows = self.w2s.index_select(0, visited.flatten()).view(batch, self.depth + 1, self.width)
        return torch.bmm(torch.nn.functional.gelu(logits).unsqueeze(1), rows)


def cases():
    torch.manual_seed(0)
    yield "residual + layer_norm %dx768" % ROWS, ResidualLayerNorm(768), (torch.randn(ROWS, 768), torch.randn(ROWS, 768))
    yield "LLaMA rms_norm %dx4096" % (ROWS // 4), LlamaRMSNorm(4096), (torch.randn(ROWS // 4, 4096),)
    yield "LLaMA rms_norm bf16 %dx4096" % (ROWS // 4), LlamaRMSNorm(4096).to(torch.bfloat16), \
        (torch.randn(ROWS // 4, 4096).to(torch.bfloat16),)
    batch = 2 if options.quick else 8
    yield f"BERT-base layer {batch}x128", BertOnly(), (torch.randn(batch, 128, 768),)
    yield f"LLaMA layer (768) {batch}x128", LlamaLayer(), (torch.randn(batch, 128, 768),)
    yield f"pre-LN TreeFFN block {ROWS // 4}x768", PreLNBlock(True), (torch.randn(ROWS // 4, 768),)
    # UltraFastBERT-1x11 as its authors' code computes it (the masked dense
    # layer): fff raises it to its tree op, Inductor compiles what it says.
    yield f"UltraFastBERT's own layer (1x11) {ROWS}x768", fff.torch.MaskedTreeFFN(768, 768, 11, 1), \
        (torch.randn(ROWS, 768),)
    # Its inference walk: a dozen gathers and batched products.
    yield f"UltraFastBERT's inference walk (1x11) {ROWS}x768", WalkedTree(768, 11), (torch.randn(ROWS, 768),)


def main():
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; median ms per call, "
          f"{REPEAT} calls after two warm-ups\n")
    print("| case | eager | Inductor | fff | fff vs eager | fff vs Inductor | fff's error | fff took |")
    print("|---|---|---|---|---|---|---|---|")
    for name, model, args in cases():
        if options.only and options.only not in name:
            continue
        model.eval()
        times = {}
        for backend in ("eager", "inductor", "fff"):
            torch._dynamo.reset()
            fn = model if backend == "eager" else torch.compile(model, backend=backend)
            times[backend] = median_ms(fn, *args)
        with torch.no_grad():  # A fast wrong answer is no result.
            expected, actual = model(*args).double(), fn(*args).double()
        error = ((actual - expected).norm() / expected.norm()).item()
        if error > 2e-2:
            raise SystemExit(f"{name}: fff's result is off by {error:.1e} (relative)")
        report = fff.torch.explain(model, *args, grad=False, print_report=False)
        took = ", ".join(f"{k} x{v}" for k, v in sorted(report.taken.items())) or "nothing"
        print(f"| {name} | {times['eager']:.2f} | {times['inductor']:.2f} | {times['fff']:.2f} | "
              f"{times['eager'] / times['fff']:.2f}x | {times['inductor'] / times['fff']:.2f}x | {error:.1e} | "
              f"{report.ops_taken}/{report.ops} ops: {took} |", flush=True)
    if options.only:
        return
    # The tree layer against the dense FF it replaces, both compiled.
    x = torch.randn(ROWS // 4, 768)
    dense, tree = PreLNBlock(False).eval(), PreLNBlock(True).eval()
    torch._dynamo.reset()
    dense_ms = median_ms(torch.compile(dense), x)
    torch._dynamo.reset()
    tree_ms = median_ms(torch.compile(tree, backend="fff"), x)
    flops = 2 * x.shape[0] * 768 * 3072 * 2
    print(f"\npre-LN block {x.shape[0]}x768: dense FF under Inductor {dense_ms:.2f} ms "
          f"({flops / dense_ms / 1e6:.1f} GFLOP/s, MKL), TreeFFN under fff {tree_ms:.2f} ms: "
          f"{dense_ms / tree_ms:.1f}x")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Exports real model code from Hugging Face transformers to
linalg-on-tensors with torch-mlir, as test inputs for fff: the norms as the
library writes them, with the residual adds, Linear layers and attention
around them.

    build/venv/bin/python -m pip install torch torch-mlir transformers
    build/venv/bin/python test/Frontends/Inputs/transformers/export.py

Every module is built from a small config with random weights (nothing is
downloaded), in eval mode, and exported with a dynamic batch dim and the
weights as constants. Beside each NAME.mlir the script writes NAME.npz with
the example input `x` and torch's eager output `y`, and a second input
`x_other` of another batch size (and sequence length, where that is dynamic
too) with its output `y_other` (f32, or bf16 as raw uint16 bits), which
test/Frontends/transformers-numeric.py compares fff-run against; it needs no
torch.
"""

import inspect
import os

import numpy as np
import torch
import torch.nn as nn
import transformers
from torch_mlir import fx
from transformers.models.bert.modeling_bert import BertLayer
from transformers.models.gemma.modeling_gemma import GemmaRMSNorm
from transformers.models.gpt2.modeling_gpt2 import GPT2Block
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding
from transformers.models.t5.modeling_t5 import T5LayerNorm

here = os.path.dirname(os.path.abspath(__file__))
HIDDEN, HEADS, INTERMEDIATE, SEQUENCE = 64, 4, 128, 8


def first(output):
    """The hidden states, from layers that return them alone or in a tuple
    (it differs between transformers versions)."""
    return output[0] if isinstance(output, tuple) else output


class BertLayerOnly(nn.Module):
    """transformers' BertLayer (post-LN: LayerNorm(x + attention(x)), then
    LayerNorm(h + FFN(h))), without an attention mask."""

    def __init__(self):
        super().__init__()
        config = transformers.BertConfig(hidden_size=HIDDEN, num_attention_heads=HEADS,
                                         intermediate_size=INTERMEDIATE, attn_implementation="eager")
        self.layer = BertLayer(config)

    def forward(self, x):
        return first(self.layer(x))


class GPT2BlockAndFinalNorm(nn.Module):
    """A GPT-2 block (pre-LN, its own residuals) followed by the model's
    final ln_f, which normalizes the block's residual sum."""

    def __init__(self):
        super().__init__()
        config = transformers.GPT2Config(n_embd=HIDDEN, n_head=HEADS, n_inner=INTERMEDIATE,
                                         attn_implementation="eager")
        self.block = GPT2Block(config, layer_idx=0)
        self.ln_f = nn.LayerNorm(HIDDEN, eps=config.layer_norm_epsilon)

    def forward(self, x):
        return self.ln_f(first(self.block(x)))


class LlamaLayer(nn.Module):
    """A LLaMA decoder layer: x + attention(RMSNorm(x)), then
    h + MLP(RMSNorm(h)), with the rotary embedding computed inside."""

    def __init__(self):
        super().__init__()
        config = transformers.LlamaConfig(hidden_size=HIDDEN, num_attention_heads=HEADS,
                                          num_key_value_heads=HEADS, intermediate_size=INTERMEDIATE,
                                          attn_implementation="eager")
        self.layer = LlamaDecoderLayer(config, layer_idx=0)
        self.rotary = LlamaRotaryEmbedding(config)
        # torch-mlir's importer finds buffers in the state dict only.
        for name, buffer in list(self.rotary.named_buffers()):
            self.rotary.register_buffer(name, buffer, persistent=True)

    def forward(self, x):
        positions = torch.arange(x.shape[1]).unsqueeze(0)
        return first(self.layer(x, position_embeddings=self.rotary(x, positions)))


def randomized(module, scale=0.5, offset=0.0):
    """The module with every parameter drawn at random (norm weights that
    start at ones or zeros would hide a wrong scale)."""
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn_like(parameter) * scale + offset)
    return module.eval()


def models():
    """(name, module, example input, dims that are dynamic)."""
    torch.manual_seed(0)
    tokens = (3, SEQUENCE, HIDDEN)
    return [
        ("bert_layer", randomized(BertLayerOnly(), 0.2), torch.randn(tokens), {0}),
        ("gpt2_block_ln_f", randomized(GPT2BlockAndFinalNorm(), 0.2), torch.randn(tokens), {0}),
        ("llama_decoder_layer", randomized(LlamaLayer(), 0.2), torch.randn(tokens), {0}),
        ("t5_layer_norm", randomized(T5LayerNorm(HIDDEN), 0.5, 1.0), torch.randn(tokens), {0, 1}),
        ("gemma_rms_norm_f32", randomized(GemmaRMSNorm(HIDDEN), 0.5), torch.randn(tokens), {0, 1}),
        ("gemma_rms_norm_bf16", randomized(GemmaRMSNorm(HIDDEN), 0.5).to(torch.bfloat16),
         torch.randn(tokens).to(torch.bfloat16), {0, 1}),
    ]


def as_numpy(tensor):
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16)
    return tensor.numpy()


def main():
    names = {0: "batch", 1: "sequence"}
    for name, module, example, dynamic in models():
        argument = next(iter(inspect.signature(module.forward).parameters))
        shapes = {argument: {d: torch.export.Dim(names[d], min=2, max=4096) for d in dynamic}}
        other = torch.randn(tuple(5 if d in dynamic else n for d, n in enumerate(example.shape)))
        other = other.to(example.dtype)
        with torch.no_grad():
            expected = module(example)
            expected_other = module(other)
            imported = fx.export_and_import(module, example, output_type="linalg-on-tensors",
                                            func_name=name, dynamic_shapes=shapes)
        with open(os.path.join(here, f"{name}.mlir"), "w") as f:
            f.write(f"// Exported by export.py with torch {torch.__version__}, transformers "
                    f"{transformers.__version__} and torch-mlir (linalg-on-tensors). Do not edit; "
                    "rerun the script.\n")
            f.write(str(imported))
        np.savez(os.path.join(here, f"{name}.npz"), x=as_numpy(example), y=as_numpy(expected),
                 x_other=as_numpy(other), y_other=as_numpy(expected_other))
        print(f"wrote {name}.mlir")


if __name__ == "__main__":
    main()

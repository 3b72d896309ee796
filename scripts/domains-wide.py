#!/usr/bin/env python3
"""torch.compile(model, backend="fff") on PyTorch's domain libraries'
models, torchvision's and torchaudio's, each against eager: model code that
no fff test was written from. They write their norms their own ways:
ConvNeXt's LayerNorm2d through permutes, Swin's over windows of an NHWC
tensor, MaxViT's beside BatchNorm, wav2vec2's feature extractor's
LayerNorm over a transposed (B, C, T) tensor, Conformer's and Emformer's
pre-LN blocks, WavLM's gated relative positions, HDemucs' LayerNorm over a
transposed channel dim, ConvTasNet's global and cumulative LayerNorms
(GroupNorm with one group). Each is either fff's op or a near miss that
must stay the fallback's.

  infer      eval, no_grad, two batch sizes (the second dynamic), f32
  train-ind  a training step (dropout 0) with the Inductor fallback, at
             both batch sizes: every parameter's and float input's gradient

Each model is built small (a few layers, narrow) with random weights, its
1-d parameters (norms' affine ones among them) moved away from 1 and 0. A
model fails if it gives a wrong answer, raises, or hangs (run it under
`timeout`). Neither library is among the test command's packages; install
both apart, without their dependencies (torch is the venv's; their models
are Python and need none of their compiled operators):

    build/venv/bin/pip install --no-deps --target /tmp/extra torchvision torchaudio pillow
    PYTHONPATH=build/python:/tmp/extra build/venv/bin/python scripts/domains-wide.py \\
        [--scenario infer,train-ind] [--plain] [--dynamic] [MODEL ...]

--plain compiles with the fallback alone (backend="inductor"), to tell the
baseline's own disagreement with eager from fff's; --dynamic compiles with
every extent dynamic from the first call, as torch.compile(dynamic=True).
The tolerances and helpers are the transformers corpus's (test/Frontends).

The first run, 2026-12-07 (torchvision 0.29.2, torchaudio 2.11.1, torch
2.15), both scenarios on all 16 models: no wrong answer of fff's. fff took
every model's LayerNorms (10 to 22 a model), ConvNeXt's LayerNorm2d and
wav2vec2's extractor LayerNorm (over a transposed tensor) among them; the
GroupNorms (HuBERT's extractor, ConvTasNet's global LayerNorm) stayed
with the fallback. Four gradients missed the tolerance, each as far under
--plain: MViT V2's input gradient at batch 1 (0.91; eager's own is 1.08
off float64's: a gradient of norm 0.09 that is rounding noise), and three
biases whose true gradient is zero, followed by a softmax or a norm that
removes them (wav2vec2's key bias, HuBERT's first convolution's, before
GroupNorm, Conformer's convolution's, before BatchNorm).
"""

import sys

import torch
import torchaudio.models as audio
import torchvision.models as vision
import wide_runs
from torchvision.models import convnext, swin_transformer, video

corpus = wide_runs.load_corpus()


def image(batch, generator, side=32, frames=None):
    shape = (batch, 3, side, side) if frames is None else (batch, 3, frames, side, side)
    return {"x": torch.randn(shape, generator=generator)}


def waveform(batch, generator, samples=1600):
    return {"waveforms": torch.randn(batch, samples, generator=generator)}


def signal(batch, generator, channels, samples=800):
    return {"input": torch.randn(batch, channels, samples, generator=generator)}


def features(batch, generator, frames=24, width=40, lengths=True):
    inputs = {"input": torch.randn(batch, frames, width, generator=generator)}
    if lengths:  # the last utterance a few frames short: padding masked
        inputs["lengths"] = torch.full((batch,), frames, dtype=torch.int64)
        inputs["lengths"][-1] = frames - 5
    return inputs


def wav2vec2(**encoder):
    return audio.wav2vec2_model(
        extractor_mode=encoder.pop("extractor_mode", "layer_norm"),
        extractor_conv_layer_config=[(32, 10, 5), (32, 3, 2), (32, 2, 2)], extractor_conv_bias=True,
        encoder_embed_dim=64, encoder_projection_dropout=0.0, encoder_pos_conv_kernel=16, encoder_pos_conv_groups=4,
        encoder_num_layers=2, encoder_num_heads=4, encoder_attention_dropout=0.0, encoder_ff_interm_features=128,
        encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_drop=0.0, aux_num_out=12, **encoder)


def wavlm():
    return audio.wavlm_model(
        extractor_mode="layer_norm", extractor_conv_layer_config=[(32, 10, 5), (32, 3, 2), (32, 2, 2)],
        extractor_conv_bias=False, encoder_embed_dim=64, encoder_projection_dropout=0.0, encoder_pos_conv_kernel=16,
        encoder_pos_conv_groups=4, encoder_num_layers=2, encoder_num_heads=4, encoder_num_buckets=32,
        encoder_max_distance=64, encoder_attention_dropout=0.0, encoder_ff_interm_features=128,
        encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_norm_first=True, encoder_layer_drop=0.0,
        aux_num_out=12)


class Conformer(torch.nn.Module):
    """torchaudio's Conformer, its lengths an input (it returns them too)."""

    def __init__(self):
        super().__init__()
        self.conformer = audio.Conformer(input_dim=40, num_heads=4, ffn_dim=96, num_layers=2,
                                         depthwise_conv_kernel_size=7, dropout=0.0)

    def forward(self, input, lengths):
        return self.conformer(input, lengths)[0]


class Emformer(torch.nn.Module):
    """torchaudio's Emformer in training form (the whole utterance, its
    right context appended)."""

    def __init__(self):
        super().__init__()
        self.emformer = audio.Emformer(input_dim=40, num_heads=4, ffn_dim=96, num_layers=2, segment_length=4,
                                       right_context_length=2, dropout=0.0)

    def forward(self, input, lengths):
        return self.emformer(input, lengths)[0]


# name: (build, inputs(batch, generator), batch sizes)
MODELS = {
    "vit": (lambda: vision.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64,
                                             mlp_dim=128, num_classes=10), image, (2, 3)),
    "swin": (lambda: swin_transformer.SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2],
                                                      num_heads=[2, 4], window_size=[4, 4], num_classes=10,
                                                      stochastic_depth_prob=0.0), image, (2, 3)),
    "swin_v2": (lambda: swin_transformer.SwinTransformer(
        patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4], num_classes=10,
        stochastic_depth_prob=0.0, block=swin_transformer.SwinTransformerBlockV2,
        downsample_layer=swin_transformer.PatchMergingV2), image, (2, 3)),
    "convnext": (lambda: convnext.ConvNeXt([convnext.CNBlockConfig(32, 64, 2), convnext.CNBlockConfig(64, None, 2)],
                                           stochastic_depth_prob=0.0, num_classes=10), image, (2, 3)),
    "maxvit": (lambda: vision.MaxVit(input_size=(32, 32), stem_channels=16, partition_size=2, block_channels=[32, 64],
                                     block_layers=[1, 1], head_dim=16, stochastic_depth_prob=0.0, num_classes=10),
               image, (2, 3)),
    "swin3d": (lambda: video.swin_transformer.SwinTransformer3d(
        patch_size=[2, 4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[2, 4, 4],
        stochastic_depth_prob=0.0, num_classes=10), lambda b, g: image(b, g, side=32, frames=4), (1, 2)),
    "mvit_v2": (lambda: video.mvit._mvit(
        spatial_size=(32, 32), temporal_size=4,
        block_setting=[video.mvit.MSBlockConfig(num_heads=1, input_channels=32, output_channels=32, kernel_q=[3, 3, 3],
                                                kernel_kv=[3, 3, 3], stride_q=[1, 1, 1], stride_kv=[1, 4, 4]),
                       video.mvit.MSBlockConfig(num_heads=2, input_channels=32, output_channels=64, kernel_q=[3, 3, 3],
                                                kernel_kv=[3, 3, 3], stride_q=[1, 2, 2], stride_kv=[1, 2, 2])],
        residual_pool=True, residual_with_cls_embed=False, rel_pos_embed=True, proj_after_attn=True,
        stochastic_depth_prob=0.0, weights=None, progress=False, num_classes=10),
        lambda b, g: image(b, g, side=32, frames=4), (1, 2)),
    "wav2vec2": (lambda: wav2vec2(encoder_layer_norm_first=False), waveform, (2, 3)),
    "wav2vec2_ln_first": (lambda: wav2vec2(encoder_layer_norm_first=True), waveform, (2, 3)),
    "hubert": (lambda: wav2vec2(extractor_mode="group_norm", encoder_layer_norm_first=False), waveform, (2, 3)),
    "wavlm": (wavlm, waveform, (2, 3)),
    "conformer": (Conformer, features, (2, 3)),
    "emformer": (Emformer, lambda b, g: features(b, g, frames=26), (2, 3)),
    "conv_tasnet": (lambda: audio.ConvTasNet(num_sources=2, enc_kernel_size=8, enc_num_feats=32, msk_kernel_size=3,
                                             msk_num_feats=16, msk_num_hidden_feats=32, msk_num_layers=2,
                                             msk_num_stacks=2), lambda b, g: signal(b, g, channels=1), (2, 3)),
    "hdemucs": (lambda: audio.HDemucs(sources=["a", "b"], channels=8, depth=3, nfft=256),
                lambda b, g: signal(b, g, channels=2, samples=2048), (1, 2)),
    "deepspeech": (lambda: audio.DeepSpeech(n_feature=40, n_hidden=32, n_class=10),
                   lambda b, g: {"x": torch.randn(b, 1, 20, 40, generator=g)}, (2, 3)),
}


def build(name):
    torch.manual_seed(0)
    model = MODELS[name][0]()
    with torch.no_grad():  # trained-looking norms: affine parameters away from 1 and 0
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(0.1 * torch.randn_like(parameter))
    return model


def inputs(name, batch, seed):
    return MODELS[name][1](batch, torch.Generator().manual_seed(seed))


def run_forward(name):
    return wide_runs.forward_differs(build(name), MODELS[name][2], lambda batch, seed: inputs(name, batch, seed))


def run_training(name):
    return wide_runs.training_differs(build(name), MODELS[name][2], lambda batch, seed: inputs(name, batch, seed))


SCENARIOS = {"infer": run_forward, "train-ind": run_training}


def eager_runs(name):
    with torch.no_grad():
        build(name).eval()(**inputs(name, MODELS[name][2][0], seed=0))


def main(argv):
    scenarios = wide_runs.take_scenarios(argv, SCENARIOS)
    wide_runs.take_plain(argv)
    wide_runs.take_dynamic(argv)
    return wide_runs.run_all(argv or list(MODELS), scenarios, eager_runs, lambda name, what: SCENARIOS[what](name),
                             corpus.report_line, width=20)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

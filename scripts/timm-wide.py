#!/usr/bin/env python3
"""torch.compile(model, backend="fff") on timm's vision models, each against
eager: model code that no fff test was written from. timm writes its norms
its own ways: LayerNorm2d through permutes, channels-first LayerNorm by
hand over dim 1, GroupNorm with one group (a norm over C, H and W with a
per-channel affine), RmsNorm2d, ConvNeXt-V2's global response norm,
weight-standardized convolutions, EvoNorm. Each is either fff's op or a
near miss that must stay the fallback's.

  infer      eval, no_grad, batch 2 then 3 (the second dynamic), f32
  train-ind  a training step (drop rates 0) with the Inductor fallback, at
             both batches: every parameter's and the image's gradient

A model fails if it gives a wrong answer, raises, or hangs (run it under
`timeout`). timm is not among the test command's packages; install it
apart, with the torchvision wheel it imports (no other of its parts runs):

    build/venv/bin/pip install --no-deps --target /tmp/extra timm torchvision pillow pyyaml
    PYTHONPATH=build/python:/tmp/extra build/venv/bin/python scripts/timm-wide.py \
        [--scenario infer,train-ind] [--plain] [--dynamic] [MODEL ...]

--plain compiles with the fallback alone (backend="inductor"), to tell the
baseline's own disagreement with eager from fff's; --dynamic compiles with
every extent dynamic from the first call, as torch.compile(dynamic=True).
The tolerances and helpers are the transformers corpus's (test/Frontends).

The first run, 2026-12-07 (timm 1.0.31, torch 2.15): inference on all 70
models, a training step on 24. No wrong answer of
fff's. Every miss of the tolerance was as large under --plain: visformer's
output (1.1e-4; fff took nothing), the input gradient of test_vit_relpos
(3.8e-3) and swinv2_cr_tiny_ns (4.3e-2), BatchNorm biases in train mode
(test_coatnet, test_maxvit, efficientvit_b0: 2e-3 to 3e-3), and the
StarReLU scalars of poolformerv2 and caformer (1e-4 to 3e-4, within 1.6x of
--plain's; against float64, caformer's is 1.8e-4 off under --plain,
2.6e-4 with fff, 6.9e-6 eager: Inductor's reordered sums). Norms over
dim 1 (RmsNorm2d, channels-first LayerNorm), GroupNorm, GRN and EvoNorm
stay with the fallback. A --dynamic inference run on 2026-12-08 reached
the first 42 models (test_vit to efficientvit_b0): no wrong answer and no
crash, their LayerNorms and RMSNorms taken. mobilevitv2_050, hiera_tiny_224
and davit_tiny did not finish compiling in ten minutes each. py-spy found
them in torch's own code: Inductor's C++ codegen simplifying index
expressions for the first two, and symbolic reshape arithmetic while
tracing for the third. --plain was not run on them.
"""

import sys

import timm
import torch
import wide_runs

corpus = wide_runs.load_corpus()

SMALL = dict(img_size=64)  # a ViT-style model at 64x64: 16 patches of 16

# name: create_model's keyword arguments beyond the drop rates (which are 0),
# and the image side.
MODELS = {
    **{name: ({}, 160) for name in (
        "test_vit", "test_vit2", "test_vit3", "test_vit4", "test_vit_relpos", "test_convnext", "test_convnext2",
        "test_convnext3", "test_coatnet", "test_maxvit", "test_mambaout", "test_efficientnet_gn",
        "test_efficientnet_ln", "test_efficientnet_evos", "test_nfnet")},
    "convnext_atto_rms": ({}, 64),
    "convnextv2_atto": ({}, 64),
    "edgenext_xx_small": ({}, 64),
    "poolformer_s12": ({}, 64),
    "poolformerv2_s12": ({}, 64),
    "caformer_s18": ({}, 64),
    "convformer_s18": ({}, 64),
    "mambaout_femto": ({}, 64),
    "inception_next_atto": ({}, 64),
    "efficientformer_l1": ({}, 224),
    "efficientformerv2_s0": ({}, 224),
    "levit_128s": ({}, 224),
    "mobilevit_xxs": ({}, 64),
    "mobilevitv2_050": ({}, 64),
    "pvt_v2_b0": ({}, 64),
    "coat_lite_mini": ({}, 224),
    "xcit_nano_12_p16_224": ({}, 64),
    "cait_xxs24_224": (SMALL, 64),
    "deit_tiny_distilled_patch16_224": (SMALL, 64),
    "eva02_tiny_patch14_224": (dict(img_size=56), 56),
    "vit_tiny_patch16_224": (SMALL, 64),
    "vit_small_patch16_rope_224": (SMALL, 64),
    "swin_tiny_patch4_window7_224": (dict(img_size=112), 112),
    "swinv2_cr_tiny_ns_224": (dict(img_size=112), 112),
    "tiny_vit_5m_224": ({}, 224),
    "fastvit_t8": ({}, 64),
    "efficientvit_m0": ({}, 224),
    "efficientvit_b0": ({}, 64),
    "hiera_tiny_224": (dict(img_size=64), 64),
    "gcvit_xxtiny": (dict(img_size=64), 64),
    "davit_tiny": ({}, 64),
    "focalnet_tiny_srf": ({}, 64),
    "mixer_s32_224": (SMALL, 64),
    "gmlp_ti16_224": (SMALL, 64),
    "resmlp_12_224": (SMALL, 64),
    "crossvit_tiny_240": ({}, 240),
    "nest_tiny": (SMALL, 64),
    "pit_ti_224": (SMALL, 64),
    "visformer_tiny": ({}, 224),
    "volo_d1_224": (SMALL, 64),
    "mvitv2_tiny": ({}, 224),
    "rdnet_tiny": ({}, 64),
    "starnet_s1": ({}, 64),
    "shvit_s1": ({}, 224),
    "vitamin_small_224": (SMALL, 64),
    "efficientnet_b0_g8_gn": ({}, 64),
    "resnetv2_50x1_bit": ({}, 64),
    "nfnet_f0": ({}, 64),
    "convit_tiny": (SMALL, 64),
    "tnt_s_patch16_224": (SMALL, 64),
    "twins_svt_small": ({}, 64),
    "sequencer2d_s": ({}, 64),
    "beitv2_base_patch16_224": (dict(img_size=64, depth=2), 64),
    "flexivit_small": (dict(img_size=64, depth=2), 64),
    "nextvit_small": ({}, 64),
}

BATCHES = (2, 3)


def build(name):
    kwargs, _ = MODELS[name]
    torch.manual_seed(0)
    try:
        model = timm.create_model(name, pretrained=False, num_classes=10, drop_rate=0.0, drop_path_rate=0.0,
                                  **kwargs)
    except TypeError:  # a model without stochastic depth
        model = timm.create_model(name, pretrained=False, num_classes=10, drop_rate=0.0, **kwargs)
    with torch.no_grad():  # trained-looking norms: affine parameters away from 1 and 0
        for module in model.modules():
            for parameter in module.parameters(recurse=False):
                if parameter.dim() == 1:
                    parameter.add_(0.1 * torch.randn_like(parameter))
    return model


def image(name, batch, seed):
    side = MODELS[name][1]
    return torch.randn(batch, 3, side, side, generator=torch.Generator().manual_seed(seed))


def run_forward(name):
    return wide_runs.forward_differs(build(name), BATCHES, lambda batch, seed: {"x": image(name, batch, seed)})


def run_training(name):
    return wide_runs.training_differs(build(name), BATCHES, lambda batch, seed: {"x": image(name, batch, seed)})


SCENARIOS = {"infer": run_forward, "train-ind": run_training}


def eager_runs(name):
    with torch.no_grad():
        build(name).eval()(image(name, 2, seed=0))


def main(argv):
    scenarios = wide_runs.take_scenarios(argv, SCENARIOS)
    wide_runs.take_plain(argv)
    wide_runs.take_dynamic(argv)
    return wide_runs.run_all(argv or list(MODELS), scenarios, eager_runs, lambda name, what: SCENARIOS[what](name),
                             corpus.report_line, width=32)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""torch.compile(model, backend="fff") on diffusers' denoisers and VAE,
each against eager: model code that no fff test was written from.
diffusers writes its norms its own ways: adaptive LayerNorms without
affine parameters whose scale and shift come from the timestep
(AdaLayerNormZero, AdaLayerNormContinuous, ada_norm_single), RMSNorm
classes of its own on queries and keys, FP32LayerNorm, GroupNorm in the
UNet and the VAE. Each is either fff's op or a near miss that must stay
the fallback's.

  infer      eval, no_grad, batch 2 then 3 (the second dynamic), f32
  train-ind  a training step with the Inductor fallback, at batch 2: every
             parameter's and float input's gradient

A model fails if it gives a wrong answer, raises, or hangs (run it under
`timeout`). diffusers is not among the test command's packages; install it
apart, with what it imports (no other of its parts runs):

    build/venv/bin/pip install --no-deps --target /tmp/extra diffusers importlib_metadata zipp \\
        requests urllib3 charset_normalizer certifi pillow
    PYTHONPATH=build/python:/tmp/extra build/venv/bin/python scripts/diffusers-wide.py \\
        [--scenario infer,train-ind] [--plain] [--dynamic] [MODEL ...]

--plain compiles with the fallback alone (backend="inductor"), to tell the
baseline's own disagreement with eager from fff's; --dynamic compiles with
every extent dynamic from the first call, as torch.compile(dynamic=True).
The tolerances and helpers are the transformers corpus's (test/Frontends).

The first run, 2026-12-07 (diffusers 0.42.1, torch 2.15): 11 models, both
scenarios, no wrong answer of fff's. fff took adaptive LayerNorms in DiT,
PixArt, SD3, Flux, AuraFlow, Sana, CogVideoX and LTX-Video, the RMSNorms
on queries and keys in SD3, Flux, Sana, Lumina 2 and LTX-Video, and the
UNet's transformer blocks' LayerNorms. Three runs missed the tolerance as
far under --plain, where fff takes nothing: AuraFlow's output at batch 3
(2.3e-4) and its register tokens' gradient (1.5e-3), and the VAE's
attention key bias gradient (5.9e-4: 0 in exact arithmetic, rounding
noise). DiT's class labels are dropped at random in train mode; the script
sets that dropout to 0. GroupNorm (UNet, VAE) stays with the fallback.
"""

import copy
import sys

import diffusers
import torch
import wide_runs

corpus = wide_runs.load_corpus()
import fff.torch  # noqa: E402

TEXT = dict(cross_attention_dim=32, caption_channels=32)


def _randn(seed, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _timesteps(batch):
    return torch.tensor([10, 500, 999])[:batch]


def _latents(batch, seed):
    return {"hidden_states": _randn(seed, batch, 4, 8, 8), "timestep": _timesteps(batch)}


def _prompted(batch, seed):
    return {**_latents(batch, seed), "encoder_hidden_states": _randn(seed + 1, batch, 5, 32)}


def _pooled(batch, seed):
    return {**_prompted(batch, seed), "pooled_projections": _randn(seed + 2, batch, 24)}


def _flux(batch, seed):
    image_ids = torch.stack([torch.zeros(16), torch.arange(16) // 4, torch.arange(16) % 4], dim=1)
    return {"hidden_states": _randn(seed, batch, 16, 16), "encoder_hidden_states": _randn(seed + 1, batch, 5, 32),
            "pooled_projections": _randn(seed + 2, batch, 24), "timestep": _timesteps(batch) / 1000.0,
            "img_ids": image_ids, "txt_ids": torch.zeros(5, 3), "guidance": torch.full((batch,), 3.5)}


def _video(batch, seed):
    return {"hidden_states": _randn(seed, batch, 2, 4, 8, 8), "encoder_hidden_states": _randn(seed + 1, batch, 5, 32),
            "timestep": _timesteps(batch)}


def _ltx(batch, seed):
    return {"hidden_states": _randn(seed, batch, 2 * 4 * 4, 4), "encoder_hidden_states": _randn(seed + 1, batch, 5, 32),
            "timestep": _timesteps(batch), "encoder_attention_mask": torch.ones(batch, 5), "num_frames": 2,
            "height": 4, "width": 4}


def _lumina(batch, seed):
    return {**_prompted(batch, seed), "timestep": _timesteps(batch) / 1000.0,
            "encoder_attention_mask": torch.ones(batch, 5, dtype=torch.bool)}


# name: (model class, its config, its inputs for (batch, seed))
MODELS = {
    "dit": ("DiTTransformer2DModel", dict(num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                          out_channels=4, num_layers=2, sample_size=8, patch_size=2,
                                          num_embeds_ada_norm=10, norm_type="ada_norm_zero"),
            lambda batch, seed: {**_latents(batch, seed), "class_labels": torch.arange(batch) % 10}),
    "pixart": ("PixArtTransformer2DModel", dict(num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                                out_channels=4, num_layers=2, sample_size=8, patch_size=2,
                                                norm_type="ada_norm_single", use_additional_conditions=False, **TEXT),
               lambda batch, seed: {**_prompted(batch, seed),
                                    "added_cond_kwargs": {"resolution": None, "aspect_ratio": None}}),
    "sd3": ("SD3Transformer2DModel", dict(sample_size=8, patch_size=2, in_channels=4, num_layers=2,
                                          attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                          caption_projection_dim=32, pooled_projection_dim=24, out_channels=4,
                                          pos_embed_max_size=16, qk_norm="rms_norm"), _pooled),
    "flux": ("FluxTransformer2DModel", dict(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                            attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                            pooled_projection_dim=24, guidance_embeds=True, axes_dims_rope=(4, 6, 6)),
             _flux),
    "auraflow": ("AuraFlowTransformer2DModel", dict(sample_size=8, patch_size=2, in_channels=4, num_mmdit_layers=1,
                                                    num_single_dit_layers=1, attention_head_dim=16,
                                                    num_attention_heads=2, joint_attention_dim=32,
                                                    caption_projection_dim=32, out_channels=4,
                                                    pos_embed_max_size=64), _prompted),
    "sana": ("SanaTransformer2DModel", dict(in_channels=4, out_channels=4, num_attention_heads=2,
                                            attention_head_dim=16, num_layers=2, num_cross_attention_heads=2,
                                            cross_attention_head_dim=16, sample_size=8, patch_size=1, **TEXT),
             _prompted),
    "lumina2": ("Lumina2Transformer2DModel", dict(sample_size=8, patch_size=2, in_channels=4, out_channels=4,
                                                  hidden_size=32, num_layers=1, num_refiner_layers=1,
                                                  num_attention_heads=2, num_kv_heads=1, multiple_of=16,
                                                  cap_feat_dim=32, axes_dim_rope=(4, 6, 6), axes_lens=(32, 32, 32)),
                _lumina),
    "cogvideox": ("CogVideoXTransformer3DModel", dict(num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                                      out_channels=4, num_layers=1, sample_width=8, sample_height=8,
                                                      sample_frames=5, patch_size=2, text_embed_dim=32,
                                                      time_embed_dim=8, temporal_compression_ratio=4,
                                                      max_text_seq_length=5), _video),
    "ltx-video": ("LTXVideoTransformer3DModel", dict(in_channels=4, out_channels=4, patch_size=1, patch_size_t=1,
                                                     num_attention_heads=2, attention_head_dim=16,
                                                     cross_attention_dim=32, num_layers=1, caption_channels=32),
                  _ltx),
    "unet": ("UNet2DConditionModel", dict(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                                          block_out_channels=(32, 64), norm_num_groups=8, attention_head_dim=8,
                                          down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                          up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32),
             lambda batch, seed: {"sample": _randn(seed, batch, 4, 16, 16), "timestep": torch.tensor(10),
                                  "encoder_hidden_states": _randn(seed + 1, batch, 5, 32)}),
    "vae": ("AutoencoderKL", dict(in_channels=3, out_channels=3, block_out_channels=(16, 32), latent_channels=4,
                                  down_block_types=("DownEncoderBlock2D",) * 2,
                                  up_block_types=("UpDecoderBlock2D",) * 2, norm_num_groups=8, layers_per_block=1),
            lambda batch, seed: {"sample": _randn(seed, batch, 3, 16, 16)}),
}

BATCHES = (2, 3)


def build(name):
    class_name, config, _ = MODELS[name]
    torch.manual_seed(0)
    model = getattr(diffusers, class_name)(**config)
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "dropout_prob"):  # DiT's class labels, dropped at random in train mode
                module.dropout_prob = 0.0
            # Trained-looking norms: affine parameters away from 1 and 0.
            # Projections that start at zero (adaLN-zero's, ControlNet-style
            # outputs) would hide whatever runs before them.
            for parameter in module.parameters(recurse=False):
                if parameter.dim() == 1:
                    parameter.add_(0.1 * torch.randn_like(parameter))
                elif not parameter.any():
                    parameter.normal_(0, 0.05)
    return model


def run_forward(name):
    return wide_runs.forward_differs(build(name), BATCHES, MODELS[name][2])


def run_training(name):
    model = build(name).train()
    reference = copy.deepcopy(model)
    report = fff.torch.Report()
    compiled = wide_runs.compiled_with(model, report)
    args = MODELS[name][2](BATCHES[0], 5)
    # Float inputs of rank 2 and more get gradients (not timesteps).
    leaves = [k for k, v in args.items() if isinstance(v, torch.Tensor) and v.is_floating_point() and v.dim() > 1]
    actual, expected = ({**_input_gradients(run, module, args, leaves), **_parameter_gradients(module)}
                        for run, module in ((compiled, model), (reference, reference)))
    return report, wide_runs.gradients_differ(actual, expected)


def _input_gradients(run, module, args, leaves):
    """The gradients of `leaves` (names in args) after a backward of
    run(**args) under a seeded random weighting of every float output; the
    module's parameters get theirs."""
    module.zero_grad(set_to_none=True)
    args = {k: v.clone().requires_grad_() if k in leaves else v for k, v in args.items()}
    generator = torch.Generator().manual_seed(11)
    loss = sum((t * torch.randn(t.shape, generator=generator)).sum()
               for t in corpus.tensors(run(**args)).values())
    loss.backward()
    return {f"input {k}": args[k].grad for k in leaves}


def _parameter_gradients(module):
    return {n: p.grad for n, p in module.named_parameters() if p.grad is not None}


SCENARIOS = {"infer": run_forward, "train-ind": run_training}


def eager_runs(name):
    with torch.no_grad():
        build(name).eval()(**MODELS[name][2](2, 0))


def main(argv):
    scenarios = wide_runs.take_scenarios(argv, SCENARIOS)
    wide_runs.take_plain(argv)
    wide_runs.take_dynamic(argv)
    return wide_runs.run_all(argv or list(MODELS), scenarios, eager_runs, lambda name, what: SCENARIOS[what](name),
                             corpus.report_line, width=10)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

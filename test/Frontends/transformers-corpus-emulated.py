# The transformers corpus of transformers-corpus.py through the backend's
# CUDA path: options={"emulate_cuda": True}, every fff call compiled with
# --fff-gpu-pipeline and run on fff's PTX emulator (with its memory checks),
# held to eager as on the CPU. A family also fails if any of its fff calls
# ran on the CPU pipeline. CI runs six of the families (the issue's
# LLaMA, BERT and GPT-2, Qwen3 with generate(), T5, ViT); the
# whole corpus passes too, by hand (76 runs of 34 families, 2026-12-03):
#
#   FFF_CUDA_DRIVER=build/lib/libfff_cuda_emulator.so PYTHONPATH=build/python \
#     build/venv/bin/python test/Frontends/transformers-corpus.py --emulate-cuda
#
# REQUIRES: python-package, torch, emulator
# RUN: env FFF_CUDA_DRIVER=%emulator PYTHONPATH=%fff_obj_root/python %python %S/transformers-corpus.py --emulate-cuda llama bert gpt2 qwen3 t5 vit | FileCheck %s
# CHECK: corpus: {{[0-9]+}} runs of {{[0-9]+}} families, 0 wrong, 0 crashed
# CHECK: {{[0-9]+}} passed, 0 failed

# The device check's harness, run before a GPU is lent: the same script on
# fff's PTX emulator, with torch on the CPU and tiny shapes. Every norm and
# tree library of the build is called through the harness's own argument
# marshalling and checked against its float64 references, as are the norms'
# backward (alone and as the fused unit of a pre-LN step with a dropout
# after the norm), the tree layers' training steps (the leaf tree's too), the
# fused sublayers and the whole pre-LN block; nothing is timed.
#
# REQUIRES: torch
# RUN: rm -rf %t && %python %fff_src_root/benchmarks/gpu/build.py --out %t > /dev/null
# RUN: %python %fff_src_root/benchmarks/gpu/device_check.py --out %t --emulate %emulator | FileCheck %s
# CHECK: device: fff's PTX emulator ({{.*}}libfff_cuda_emulator.so), nothing timed
# CHECK: | layer_norm 5x768 f32 | yes
# CHECK: | rms_norm 5x32768 bf16 | yes
# CHECK: 24 cases; wrong: 0
# CHECK: | layer_norm_grad 5x768 f32 | yes
# CHECK: | rms_norm_grad 5x4096 bf16 | yes
# CHECK: | fused layer_norm_grad 5x768 f32 | yes
# CHECK: | fused rms_norm_grad 5x4096 bf16 | yes
# CHECK: 24 norm backward cases; wrong: 0
# CHECK: | tree_ffn_bf16_768_depth11 B=1 | yes
# CHECK: | tree_ffn_bf16_768_depth11 B=3 | yes
# CHECK: | tree_ffn_f32_768_depth11 B=3 | yes
# CHECK: | tree_ffn_bf16_4096_depth15 | skipped: {{[0-9]+}} MB of weights is too much to emulate
# CHECK: | leaf_tree_ffn_bf16_768_depth8 B=3 | yes
# CHECK: | tree_ffn_grad_bf16_1x11 B=3 | yes
# CHECK: | tree_ffn_grad_f32_1x11 B=3 | yes
# CHECK: | tree_ffn_grad_bf16_4x8 B=3 | yes
# CHECK: | leaf_tree_ffn_grad_bf16_256x12 B=3 | yes
# CHECK: | leaf_tree_ffn_grad_f32_256x12 B=3 | yes
# CHECK: 5 tree training cases; wrong: 0
# CHECK: | pre_ln_tree_ffn_bf16_768_depth11 B=1 | yes
# CHECK: | post_ln_tree_ffn_f32_768_depth11 B=3 | yes
# CHECK: | pre_ln_block B=3 | yes
# CHECK-NOT: wrong:

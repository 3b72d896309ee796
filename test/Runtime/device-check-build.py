# The device check's build step works on a machine without a GPU, and the
# library it makes exports every kernel the manifest lists.
#
# RUN: rm -rf %t && %python %fff_src_root/benchmarks/gpu/build.py --out %t | FileCheck %s --check-prefix=BUILD
# BUILD: built 24 norm functions into {{.*}}fff_norms.so, 4 tree functions into 4 fff_trees*.so and 5 sublayer functions into fff_sublayers.so
# RUN: %python %fff_src_root/benchmarks/gpu/device_check.py --out %t --list | FileCheck %s
# CHECK: layer_norm_f32_768
# CHECK: rms_norm_bf16_32768
# CHECK: 24 kernels exported by fff_norms.so (sm_90)
# CHECK: tree_ffn_bf16_768_depth11 {{.*}} args=x,w_in,b_in,w_out,b_out,y
# CHECK: tree_ffn_bf16_4096_depth15
# CHECK: leaf_tree_ffn_bf16_768_depth8
# CHECK: 4 tree functions exported by fff_trees.so, fff_trees_latency.so, fff_trees_throughput.so, fff_trees_unstaged.so (sm_90)
# CHECK: pre_ln_tree_ffn_bf16_768_depth11 {{.*}} args=x,gamma,beta,w_in,b_in,w_out,b_out,y
# CHECK: pre_ln_block
# CHECK: 5 sublayer functions exported by fff_sublayers.so (sm_90)

# The device check's build step works on a machine without a GPU, and the
# library it makes exports every kernel the manifest lists.
#
# RUN: rm -rf %t && %python %fff_src_root/benchmarks/gpu/build.py --out %t | FileCheck %s --check-prefix=BUILD
# BUILD: built 24 norm functions
# RUN: %python %fff_src_root/benchmarks/gpu/device_check.py --out %t --list | FileCheck %s
# CHECK: layer_norm_f32_768
# CHECK: rms_norm_bf16_32768
# CHECK: 24 kernels exported by fff_norms.so (sm_90)

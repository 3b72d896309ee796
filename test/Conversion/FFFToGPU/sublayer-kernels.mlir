// A unit holding a norm and a tree layer (fff-fuse-norms forms it) becomes
// one kernel: the tree kernel's warp per token, which normalizes its token
// into a row of shared memory before the walk (pre-LN) and evaluates the
// unit's pointwise ops on the tree's output row after it. Units the kernel
// cannot take run as separate kernels, with a remark that says why.
// Numbers: test/Runtime/emulated-sublayers.py; ptxas:
// sublayer-kernels-ptxas.py.
//
// RUN: fff-opt %s --fff-fuse-norms --convert-fff-to-gpu --split-input-file --verify-diagnostics | FileCheck %s
// RUN: fff-opt %s --fff-fuse-norms --convert-fff-to-gpu=cpu-twin --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=TWIN

// CHECK-LABEL: func.func @pre_ln
// CHECK:         scf.if
// CHECK:           gpu.launch_func @fff_kernels::@fused_rms_norm_tree_ffn_f32_64x64_depth2_latency
// CHECK:           gpu.launch_func @fff_kernels::@fused_rms_norm_tree_ffn_f32_64x64_depth2_throughput
// CHECK-NOT:     gpu.launch_func
// CHECK:         gpu.func @fused_rms_norm_tree_ffn_f32_64x64_depth2_latency
// CHECK-SAME:      workgroup({{.*}}, %[[IN:.*]] : memref<4x64xf32, #gpu.address_space<workgroup>> {{.*}}, %[[OUT:.*]] : memref<4x64xf32, #gpu.address_space<workgroup>>
// CHECK-SAME:      fused_row_bytes_per_token = 512
// The norm's sums, then its result into the token's input row ...
// CHECK:           gpu.shuffle xor
// CHECK:           vector.store {{.*}}, %[[IN]]
// CHECK:           nvvm.bar.warp.sync
// ... which the walk reads ...
// CHECK:           vector.load %[[IN]]
// CHECK:           vector.store {{.*}}, %[[OUT]]
// ... and the residual add on the tree's output row.
// CHECK:           nvvm.bar.warp.sync
// CHECK:           %[[T:.*]] = vector.load %[[OUT]]
// CHECK:           %[[X:.*]] = vector.load
// CHECK:           arith.addf %[[X]], %[[T]] : vector<4xf32>
// CHECK:           gpu.return
// TWIN-LABEL: func.func @pre_ln
// TWIN-NOT:     fff.
// TWIN-NOT:     gpu.
// TWIN:         memref.alloca() {alignment = 16 : i64} : memref<1x64xf32>
// TWIN:         return
func.func @pre_ln(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %wi: tensor<1x7x64xf32>, %wo: tensor<1x7x64xf32>) -> tensor<?x64xf32> {
  %n = fff.rms_norm %x scale(%g : tensor<64xf32>) : tensor<?x64xf32>
  %t = fff.tree_ffn %n, %wi, %wo {depth = 2 : i64} : tensor<?x64xf32>, tensor<1x7x64xf32>, tensor<1x7x64xf32>
  %y = arith.addf %x, %t : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Post-LN: the walk reads x from its buffer; the norm reads the residual
// sum, computed from the tree's output row.
// CHECK-LABEL: func.func @post_ln
// CHECK:         gpu.launch_func @fff_kernels::@fused_leaf_tree_ffn_layer_norm_bf16_64x64_depth1_latency
// CHECK:         gpu.func @fused_leaf_tree_ffn_layer_norm_bf16_64x64_depth1_latency
// CHECK-SAME:      workgroup({{.*}}, %[[OUT:.*]] : memref<4x64xbf16, #gpu.address_space<workgroup>>
// CHECK:           vector.store {{.*}}, %[[OUT]]
// CHECK:           nvvm.bar.warp.sync
// CHECK:           vector.load %[[OUT]]
// CHECK:           arith.addf {{.*}} : vector<8xbf16>
// CHECK:           gpu.shuffle xor
func.func @post_ln(%h: tensor<?x64xbf16>, %g: tensor<64xbf16>, %b: tensor<64xbf16>,
                   %nw: tensor<1x64xbf16>, %nb: tensor<1xbf16>, %w1: tensor<2x64x8xbf16>, %b1: tensor<2x8xbf16>,
                   %w2: tensor<2x8x64xbf16>, %b2: tensor<2x64xbf16>) -> tensor<?x64xbf16> {
  %t = fff.leaf_tree_ffn %h, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64}
         : tensor<?x64xbf16>, tensor<1x64xbf16>, tensor<1xbf16>, tensor<2x64x8xbf16>, tensor<2x8xbf16>,
           tensor<2x8x64xbf16>, tensor<2x64xbf16>
  %s = arith.addf %h, %t : tensor<?x64xbf16>
  %n = fff.layer_norm %s scale(%g : tensor<64xbf16>) bias(%b : tensor<64xbf16>) : tensor<?x64xbf16>
  return %n : tensor<?x64xbf16>
}

// -----

// Units the kernel does not take: the norm's and the tree's rows in
// different types; rows too wide for shared memory; a norm that returns its
// statistics; rows of a dynamic width. Each runs as a tree kernel and a
// fused norm kernel.
// CHECK-LABEL: func.func @mixed_types
// CHECK:         gpu.launch_func @fff_kernels::@tree_ffn_bf16_64x64_depth2_latency
// CHECK:         gpu.launch_func @fff_kernels::@fused_rms_norm_f32_64_warp_per_row
func.func @mixed_types(%h: tensor<?x64xbf16>, %wi: tensor<1x7x64xbf16>, %wo: tensor<1x7x64xbf16>) -> tensor<?x64xf32> {
  // expected-remark @below {{runs as separate kernels: the fused sublayer kernel does not take its norm's rows and its tree layer's differ in type}}
  %t = fff.tree_ffn %h, %wi, %wo {depth = 2 : i64} : tensor<?x64xbf16>, tensor<1x7x64xbf16>, tensor<1x7x64xbf16>
  %s = arith.addf %h, %t : tensor<?x64xbf16>
  %w = arith.extf %s : tensor<?x64xbf16> to tensor<?x64xf32>
  %n = fff.rms_norm %w : tensor<?x64xf32>
  return %n : tensor<?x64xf32>
}

// -----

func.func @too_wide(%x: tensor<?x16384xf32>, %wi: tensor<1x3x16384xf32>, %wo: tensor<1x3x16384xf32>) -> tensor<?x16384xf32> {
  // expected-remark @below {{runs as separate kernels: the fused sublayer kernel does not take rows too wide for a fused sublayer kernel to keep in shared memory (131088 bytes for one token, over 47104)}}
  %n = fff.rms_norm %x : tensor<?x16384xf32>
  %t = fff.tree_ffn %n, %wi, %wo {depth = 1 : i64} : tensor<?x16384xf32>, tensor<1x3x16384xf32>, tensor<1x3x16384xf32>
  %y = arith.addf %x, %t : tensor<?x16384xf32>
  return %y : tensor<?x16384xf32>
}

// -----

func.func @stats(%x: tensor<?x64xf32>, %wi: tensor<1x7x64xf32>, %wo: tensor<1x7x64xf32>) -> (tensor<?x64xf32>, tensor<?x1xf32>) {
  // expected-remark @below {{runs as separate kernels: the fused sublayer kernel does not take its norm returns mean and rstd}}
  %n, %m, %r = fff.layer_norm %x return_stats : tensor<?x64xf32>
  %t = fff.tree_ffn %n, %wi, %wo {depth = 2 : i64} : tensor<?x64xf32>, tensor<1x7x64xf32>, tensor<1x7x64xf32>
  return %t, %m : tensor<?x64xf32>, tensor<?x1xf32>
}

// -----

func.func @dynamic_width(%x: tensor<?x?xf32>, %wi: tensor<1x7x64xf32>, %wo: tensor<1x7x64xf32>) -> tensor<?x64xf32> {
  // expected-remark @below {{runs as separate kernels: the fused sublayer kernel does not take its tree layer's rows have a dynamic width}}
  %n = fff.rms_norm %x : tensor<?x?xf32>
  %t = fff.tree_ffn %n, %wi, %wo {depth = 2 : i64} : tensor<?x?xf32>, tensor<1x7x64xf32>, tensor<1x7x64xf32>
  return %t : tensor<?x64xf32>
}

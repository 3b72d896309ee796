// Whole modules through the GPU pipeline: the linalg work around fff's ops
// becomes kernels too, buffers live on the device, and host code is LLVM
// dialect, launches and the compiled binary. Numbers: the emulated tests in
// test/Runtime (emulated-models.py, emulated-linalg-kernels.py).
//
// RUN: fff-opt %s --fff-gpu-pipeline | FileCheck %s
// RUN: fff-opt %s --fff-gpu-pipeline | fff-translate --fff-extract-ptx | FileCheck %s --check-prefix=PTX
// RUN: fff-opt %fff_src_root/examples/pre_ln_block.mlir --fff-gpu-pipeline | FileCheck %s --check-prefix=EXAMPLE
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/transformers/bert_layer.mlir --fff-gpu-pipeline | FileCheck %s --check-prefix=BERT
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/transformers/llama_decoder_layer.mlir --fff-gpu-pipeline | FileCheck %s --check-prefix=LLAMA

// A Linear, a residual add and an RMSNorm with its weight baked in: a fill
// and a tiled matmul, then one fused norm kernel (the add is its
// prologue). The weight is copied to the device once; the temporary is
// allocated and freed on the function's stream, which the function waits
// for at the end.
// CHECK-LABEL: llvm.func @block
// CHECK:         llvm.call @fffDeviceConstant
// CHECK:         %[[STREAM:.*]] = llvm.call @mgpuStreamCreate()
// CHECK:         llvm.call @mgpuMemAlloc({{.*}}, %[[STREAM]], {{.*}})
// CHECK:         gpu.launch_func <%[[STREAM]] : !llvm.ptr> @fff_kernels::@fill_f32_thread_per_point
// CHECK:         gpu.launch_func <%[[STREAM]] : !llvm.ptr> @fff_kernels::@matmul_f32_tiled_64x64x16
// CHECK:         gpu.launch_func <{{.*}}> @fff_kernels::@fused_rms_norm_f32_64_warp_per_row
// CHECK:         llvm.call @mgpuMemFree
// CHECK:         llvm.call @mgpuStreamSynchronize
// CHECK:       gpu.binary @fff_kernels
// PTX-DAG: .visible .entry fill_f32_thread_per_point(
// PTX-DAG: .visible .entry matmul_f32_tiled_64x64x16(
// PTX-DAG: .visible .entry fused_rms_norm_f32_64_warp_per_row(
func.func @block(%x: tensor<?x64xf32>, %w: tensor<64x64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x64xf32>) -> tensor<?x64xf32>
  %h = linalg.matmul ins(%x, %w : tensor<?x64xf32>, tensor<64x64xf32>) outs(%z : tensor<?x64xf32>) -> tensor<?x64xf32>
  %g = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0,
                             1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0,
                             1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0,
                             1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<64xf32>
  %r = arith.addf %h, %x : tensor<?x64xf32>
  %y = fff.rms_norm %r scale(%g : tensor<64xf32>) : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// The example block: each sublayer, norm -> tree layer -> residual add, is
// one kernel (a latency and a throughput variant, picked by batch size).
// EXAMPLE-LABEL: llvm.func @pre_ln_block
// EXAMPLE-DAG:     @fff_kernels::@fused_layer_norm_tree_ffn_f32_768x768_depth11_latency
// EXAMPLE-DAG:     @fff_kernels::@fused_layer_norm_tree_ffn_f32_768x768_depth11_throughput
// EXAMPLE-DAG:     @fff_kernels::@fused_rms_norm_leaf_tree_ffn_f32_768x768_depth3_latency
// EXAMPLE-DAG:     @fff_kernels::@fused_rms_norm_leaf_tree_ffn_f32_768x768_depth3_throughput
// EXAMPLE-NOT:     @fff_kernels::@{{.*}}warp_per_row
// EXAMPLE:       gpu.binary @fff_kernels

// transformers' BERT layer: attention, Linear layers as tiled contractions,
// both post-LN norms fused with their residual adds.
// BERT-LABEL: llvm.func @bert_layer
// BERT-COUNT-2: @fff_kernels::@fused_layer_norm_f32_64_warp_per_row
// BERT:       gpu.binary @fff_kernels
// BERT-NOT:   linalg.
// LLAMA-LABEL: llvm.func @llama_decoder_layer
// LLAMA:         @fff_kernels::@rms_norm_f32_64_warp_per_row
// LLAMA:         @fff_kernels::@generic_f32_tiled_64x64x16
// LLAMA:         @fff_kernels::@fused_rms_norm_f32_64_warp_per_row
// LLAMA:       gpu.binary @fff_kernels

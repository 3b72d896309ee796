// --fff-cpu-pipeline lowers fff ops and linalg-on-tensors, in any of the
// supported element types and with dynamic dims, to LLVM dialect only.
// RUN: fff-opt %s --fff-cpu-pipeline | FileCheck %s \
// RUN:   --implicit-check-not=fff. --implicit-check-not=linalg. --implicit-check-not=tensor. \
// RUN:   --implicit-check-not=memref. --implicit-check-not=scf. --implicit-check-not=bufferization. \
// RUN:   --implicit-check-not=arith. --implicit-check-not=math. --implicit-check-not=func.func \
// RUN:   --implicit-check-not=@erff --implicit-check-not=llvm.intr.tanh --implicit-check-not=@madvise
// RUN: fff-opt %s --fff-cpu-pipeline=reference | FileCheck %s --check-prefix=REFERENCE
// RUN: fff-opt %s --fff-cpu-pipeline=huge-pages | FileCheck %s --check-prefix=HUGE
// RUN: fff-opt %s --fff-cpu-pipeline=buffer-cache | FileCheck %s --check-prefix=CACHE --implicit-check-not=@malloc

// Activations are inline polynomials (fff-approximate-math), as in the GPU
// kernels; the reference calls libm.
// REFERENCE-DAG: llvm.func @erff(f32) -> f32

// Buffers come from malloc; with huge-pages, from the module's own
// allocation functions, which put large ones on huge pages
// (fff-huge-page-allocations); with buffer-cache, from the host's, which
// fff-run and the Python package bind to the host buffer cache
// (fff-runtime-allocations).
// CHECK-DAG: llvm.func @malloc(i64) -> !llvm.ptr
// HUGE-DAG: llvm.func @madvise(!llvm.ptr, i64, i32) -> i32
// HUGE-DAG: llvm.func internal @_mlir_memref_to_llvm_alloc(%{{.*}}: i64) -> (!llvm.ptr {llvm.noalias})
// HUGE-DAG: llvm.func internal @_mlir_memref_to_llvm_free(%{{.*}}: !llvm.ptr)
// HUGE-LABEL: llvm.func @fff_fused_layer_norm_tree_ffn
// HUGE:         llvm.call @_mlir_memref_to_llvm_alloc
// CACHE-DAG: llvm.func @_mlir_memref_to_llvm_alloc(i64) -> (!llvm.ptr {llvm.noalias})
// CACHE-DAG: llvm.func @_mlir_memref_to_llvm_free(!llvm.ptr)
// CACHE-LABEL: llvm.func @fff_fused_layer_norm_tree_ffn
// CACHE:         llvm.call @_mlir_memref_to_llvm_alloc

// Each distinct fff op or fused unit is a private function of its own
// (fff-outline-ops), defined at the end of the module.
// CHECK-LABEL: llvm.func @block
// CHECK:         llvm.call @fff_fused_layer_norm_tree_ffn
// CHECK:         llvm.return
func.func @block(%x: tensor<?x64xbf16>, %g: tensor<64xbf16>, %wi: tensor<1x7x64xbf16>, %wo: tensor<1x7x64xbf16>)
    -> (tensor<?x64xbf16>, tensor<?x1xf32>, tensor<?x1xf32>) {
  %ln, %mean, %rstd = fff.layer_norm %x scale(%g : tensor<64xbf16>) return_stats : tensor<?x64xbf16>
  %ffn = fff.tree_ffn %ln, %wi, %wo {depth = 2 : i64} : tensor<?x64xbf16>, tensor<1x7x64xbf16>, tensor<1x7x64xbf16>
  %y = arith.addf %x, %ffn : tensor<?x64xbf16>
  return %y, %mean, %rstd : tensor<?x64xbf16>, tensor<?x1xf32>, tensor<?x1xf32>
}

// CHECK-LABEL: llvm.func @leaf
// CHECK:         llvm.call @fff_fused_leaf_tree_ffn_rms_norm
func.func @leaf(%x: tensor<?x8xf16>, %nw: tensor<1x8xf16>, %nb: tensor<1xf16>, %w1: tensor<2x8x4xf16>,
                %b1: tensor<2x4xf16>, %w2: tensor<2x4x8xf16>, %b2: tensor<2x8xf16>) -> tensor<?x8xf16> {
  %y = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 1 : i64, activation = #fff.activation<gelu_tanh>}
         : tensor<?x8xf16>, tensor<1x8xf16>, tensor<1xf16>, tensor<2x8x4xf16>, tensor<2x4xf16>, tensor<2x4x8xf16>, tensor<2x8xf16>
  %z = fff.rms_norm %y : tensor<?x8xf16>
  return %z : tensor<?x8xf16>
}

// Plain linalg-on-tensors, as a frontend would emit it, takes the upstream path.
// CHECK-LABEL: llvm.func @dense_ffn
func.func @dense_ffn(%x: tensor<?x16xf32>, %w1: tensor<16x32xf32>, %w2: tensor<32x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %rows = tensor.dim %x, %c0 : tensor<?x16xf32>
  %e1 = tensor.empty(%rows) : tensor<?x32xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x32xf32>) -> tensor<?x32xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<?x16xf32>, tensor<16x32xf32>) outs(%f1 : tensor<?x32xf32>) -> tensor<?x32xf32>
  %a = math.tanh %h : tensor<?x32xf32>
  %e2 = tensor.empty(%rows) : tensor<?x16xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %y = linalg.matmul ins(%a, %w2 : tensor<?x32xf32>, tensor<32x16xf32>) outs(%f2 : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// CHECK-LABEL: llvm.func @fff_fused_layer_norm_tree_ffn
// CHECK-SAME:    sym_visibility = "private"
// CHECK:         llvm.call @malloc
// CHECK-LABEL: llvm.func @fff_fused_leaf_tree_ffn_rms_norm

// IR that MLIR's verifiers accept but that upstream passes in fff's
// pipelines crashed on (each found by scripts/fff-fuzz.py) is an error.
// RUN: fff-opt %s --fff-check-input --split-input-file --verify-diagnostics
// RUN: not fff-opt %s --fff-cpu-pipeline --split-input-file 2>&1 | FileCheck %s --check-prefix=PIPELINE
// RUN: not fff-opt %s --fff-gpu-pipeline --split-input-file 2>&1 | FileCheck %s --check-prefix=PIPELINE
// PIPELINE-COUNT-11: error:
// PIPELINE-NOT: PLEASE submit a bug report

// The canonicalizer crashed folding it.
func.func @dim_out_of_range(%x: tensor<?x16xf32>) -> index {
  %c = arith.constant -1 : index
  // expected-error @+1 {{'tensor.dim' op index -1 is out of range for rank 2}}
  %n = tensor.dim %x, %c : tensor<?x16xf32>
  return %n : index
}

// -----

// The verifier reads the index as a 32-bit affine dim (so, 0); fff-raise-norms
// crashed reading through it.
func.func @reassociation_out_of_range(%x: tensor<?xf32>, %n: index) -> tensor<?x1xf32> {
  // expected-error @+1 {{'tensor.expand_shape' op reassociation names dim 4294967296 where dim 0 of 2 is expected}}
  %e = tensor.expand_shape %x [[4294967296, 1]] output_shape [%n, 1] : tensor<?xf32> into tensor<?x1xf32>
  return %e : tensor<?x1xf32>
}

// -----

// expand-strided-metadata crashed on it.
func.func @static_output_shape_dynamic_type(%x: tensor<?x32xf32>, %n: index) -> tensor<?x?x32xf32> {
  // expected-error @+1 {{'tensor.expand_shape' op output_shape dim 1 is static but the result type's is not}}
  %e = tensor.expand_shape %x [[0, 1], [2]] output_shape [%n, 4, 32] : tensor<?x32xf32> into tensor<?x?x32xf32>
  return %e : tensor<?x?x32xf32>
}

// -----

func.func @collapse_out_of_range(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  // expected-error @+1 {{'tensor.collapse_shape' op reassociation names dim 4294967296 where dim 0 of 2 is expected}}
  %c = tensor.collapse_shape %x [[4294967296, 1]] : tensor<4x8xf32> into tensor<32xf32>
  return %c : tensor<32xf32>
}

// -----

func.func @memref_static_output_shape(%x: memref<?xf32>, %n: index) -> memref<?x?x32xf32> {
  // expected-error @+1 {{'memref.expand_shape' op output_shape dim 1 is static but the result type's is not}}
  %e = memref.expand_shape %x [[0, 1, 2]] output_shape [%n, 4, 32] : memref<?xf32> into memref<?x?x32xf32>
  return %e : memref<?x?x32xf32>
}

// -----

// What the rules allow.
func.func @fine(%x: tensor<?x32xf32>, %n: index) -> (tensor<?x4x32xf32>, index) {
  %c1 = arith.constant 1 : index
  %d = tensor.dim %x, %c1 : tensor<?x32xf32>
  %e = tensor.expand_shape %x [[0, 1], [2]] output_shape [%n, 4, 32] : tensor<?x32xf32> into tensor<?x4x32xf32>
  return %e, %d : tensor<?x4x32xf32>, index
}

// -----

// Element types no pipeline lowers, refused by name. --fff-gpu-pipeline
// aborted in LLVM on this one ("Symbol name with unsupported characters").
func.func @complex_reshape(%x: tensor<?x32xcomplex<f32>>, %n: index) -> tensor<?x4x8xcomplex<f32>> {
  // expected-error @+1 {{'tensor.expand_shape' op uses 'tensor<?x4x8xcomplex<f32>>': fff's pipelines take no complex numbers}}
  %e = tensor.expand_shape %x [[0], [1, 2]] output_shape [%n, 4, 8] : tensor<?x32xcomplex<f32>> into tensor<?x4x8xcomplex<f32>>
  return %e : tensor<?x4x8xcomplex<f32>>
}

// -----

// expected-error @+1 {{'func.func' op uses 'tensor<4xf8E4M3FN>': fff's pipelines take no floating-point type f8E4M3FN}}
func.func @f8_argument(%x: tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN> {
  return %x : tensor<4xf8E4M3FN>
}

// -----

// expected-error @+1 {{'func.func' op uses 'memref<4xindex>': fff's pipelines take no memrefs of index in a function's signature}}
func.func @index_in_memory(%x: memref<4xindex>) {
  return
}

// -----

func.func @tf32_value(%x: f32) -> f32 {
  // expected-error @+1 {{'arith.truncf' op uses 'tf32': fff's pipelines take no floating-point type tf32}}
  %t = arith.truncf %x : f32 to tf32
  %e = arith.extf %t : tf32 to f32
  return %e : f32
}

// -----

// f4 in a vector, declared by a function without a body.
// expected-error @+1 {{'func.func' op uses 'vector<8xf4E2M1FN>': fff's pipelines take no floating-point type f4E2M1FN}}
func.func private @f4_declaration(vector<8xf4E2M1FN>)

// -----

// 2^62 trees: fff::selectTreeStrategy divided by a size that had
// overflowed to zero (SIGFPE) in --convert-fff-to-gpu, its CPU twin and
// --fff-gpu-pipeline.
// expected-error @+1 {{'func.func' op uses 'tensor<4611686018427387904x15x64xf32>': fff's pipelines take no values of more than 2^48 bytes}}
func.func @huge_tree_count(%x: tensor<?x64xf32>, %w_in: tensor<4611686018427387904x15x64xf32>, %w_out: tensor<4611686018427387904x15x64xf32>) -> tensor<?x64xf32> {
  %y = fff.tree_ffn %x, %w_in, %w_out {depth = 3 : i64} : tensor<?x64xf32>, tensor<4611686018427387904x15x64xf32>, tensor<4611686018427387904x15x64xf32>
  return %y : tensor<?x64xf32>
}

// Norms as torch-mlir exports them (test/Frontends/Inputs/torch_mlir) raise to
// fff ops, and the decomposed chains disappear.
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/torch_mlir/layer_norm.mlir --fff-raise-norms | FileCheck %s --check-prefix=LN
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/torch_mlir/rms_norm.mlir --fff-raise-norms | FileCheck %s --check-prefix=RMS
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/torch_mlir/layer_norm_no_affine.mlir --fff-raise-norms | FileCheck %s --check-prefix=LN-BARE
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/torch_mlir/layer_norm_no_affine.mlir --fff-gpu-pipeline | FileCheck %s --check-prefix=LN-BARE-GPU
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/torch_mlir/llama_rms_norm_bf16.mlir --fff-raise-norms | FileCheck %s --check-prefix=LLAMA
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/torch_mlir/pre_ln_block.mlir --fff-raise-norms | FileCheck %s --check-prefix=BLOCK

// nn.LayerNorm: the variance is computed in f64 by torch-mlir; casts do not
// stop the match.
// LN-LABEL: func.func @layer_norm
// LN-NOT:     linalg.generic
// LN:         %[[Y:.*]] = fff.layer_norm %arg0 scale(%{{.*}} : tensor<768xf32>) bias(%{{.*}} : tensor<768xf32>) : tensor<?x768xf32>
// LN-NOT:     linalg.generic
// LN:         return %[[Y]]

// nn.LayerNorm(elementwise_affine=False): the variance in f64 from the input,
// the mean subtracted in f32. It also fits an RMSNorm of x - mean(x), which
// is the same norm; raising names it as the LayerNorm of x, which the GPU
// pipeline takes whole.
// LN-BARE-LABEL: func.func @layer_norm_no_affine
// LN-BARE-NOT:     linalg.generic
// LN-BARE:         %[[Y:.*]] = fff.layer_norm %arg0 : tensor<?x768xf32>
// LN-BARE-NOT:     fff.rms_norm
// LN-BARE:         return %[[Y]]
// LN-BARE-GPU:     gpu.binary

// RMS-LABEL: func.func @rms_norm
// RMS-NOT:     linalg.generic
// RMS:         fff.rms_norm %arg0 scale(%{{.*}} : tensor<768xf32>) {epsilon = 9.99999997E-7 : f32} : tensor<?x768xf32>
// RMS-NOT:     linalg.generic

// LLaMA's bf16 RMSNorm (upcast, x.pow(2), rsqrt, downcast, bf16 weight):
// one op that rounds once, as torch.compile's fused kernel does.
// LLAMA-LABEL: func.func @llama_rms_norm_bf16
// LLAMA-NOT:     linalg.generic
// LLAMA:         fff.rms_norm %arg0 scale(%{{.*}} : tensor<768xbf16>) {epsilon = 9.99999997E-7 : f32} : tensor<?x768xbf16>
// LLAMA-NOT:     linalg.generic

// The pre-LN block: the norm is raised, the matmuls and GELU stay.
// BLOCK-LABEL: func.func @pre_ln_block
// BLOCK:         %[[NORMED:.*]] = fff.layer_norm %arg0 scale(%{{.*}} : tensor<64xf32>) bias(%{{.*}} : tensor<64xf32>) : tensor<?x64xf32>
// BLOCK:         linalg.matmul ins(%[[NORMED]]
// BLOCK:         math.erf
// BLOCK:         linalg.matmul

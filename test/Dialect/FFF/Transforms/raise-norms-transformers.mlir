// Norms in real model code, exported from transformers by torch-mlir
// (test/Frontends/Inputs/transformers), raise to fff ops, residual adds
// included; the residual-add norms then fuse with their add into one unit.
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/transformers/bert_layer.mlir --fff-raise-norms | FileCheck %s --check-prefix=BERT
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/transformers/gpt2_block_ln_f.mlir --fff-raise-norms | FileCheck %s --check-prefix=GPT2
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/transformers/llama_decoder_layer.mlir --fff-raise-norms | FileCheck %s --check-prefix=LLAMA
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/transformers/t5_layer_norm.mlir --fff-raise-norms | FileCheck %s --check-prefix=T5
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/transformers/gemma_rms_norm_f32.mlir --fff-raise-norms | FileCheck %s --check-prefix=GEMMA
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/transformers/gemma_rms_norm_bf16.mlir --fff-raise-norms | FileCheck %s --check-prefix=GEMMA16
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/transformers/bert_layer.mlir --fff-raise-norms --fff-fuse-norms | FileCheck %s --check-prefix=BERT-FUSED
// RUN: fff-opt %fff_src_root/test/Frontends/Inputs/transformers/llama_decoder_layer.mlir --fff-raise-norms --fff-fuse-norms | FileCheck %s --check-prefix=LLAMA-FUSED

// BERT (post-LN): both LayerNorms normalize a residual add, which stays.
// BERT-LABEL: func.func @bert_layer
// BERT:         %[[H1:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %arg0 :
// BERT-NEXT:    ^bb0
// BERT-NEXT:      arith.addf
// BERT:         %[[N1:.*]] = fff.layer_norm %[[H1]] scale(%{{.*}} : tensor<64xf32>) bias(%{{.*}} : tensor<64xf32>) {epsilon = 9.99999996E-13 : f32} : tensor<?x8x64xf32>
// BERT:         %[[H2:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[N1]] :
// BERT-NEXT:    ^bb0
// BERT-NEXT:      arith.addf
// BERT:         %[[N2:.*]] = fff.layer_norm %[[H2]] scale
// BERT:         return %[[N2]]

// GPT-2: ln_1 on the block input, ln_2 on the attention residual, and the
// model's ln_f on the block's output residual.
// GPT2-LABEL: func.func @gpt2_block_ln_f
// GPT2:         fff.layer_norm %arg0 scale
// GPT2:         %[[H1:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %arg0 :
// GPT2:         fff.layer_norm %[[H1]] scale
// GPT2:         %[[H2:.*]] = linalg.generic {{.*}} ins(%[[H1]], %{{.*}} :
// GPT2:         %[[Y:.*]] = fff.layer_norm %[[H2]] scale
// GPT2:         return %[[Y]]

// LLaMA: input_layernorm on the input, post_attention_layernorm on the
// residual.
// LLAMA-LABEL: func.func @llama_decoder_layer
// LLAMA:         fff.rms_norm %arg0 scale(%{{.*}} : tensor<64xf32>) {epsilon = 9.99999997E-7 : f32} : tensor<?x8x64xf32>
// LLAMA:         %[[H:.*]] = linalg.generic {{.*}} ins(%arg0, %{{.*}} :
// LLAMA:         fff.rms_norm %[[H]] scale(%{{.*}} : tensor<64xf32>) {epsilon = 9.99999997E-7 : f32} : tensor<?x8x64xf32>

// T5's LayerNorm is an RMSNorm (no centring, no bias).
// T5-LABEL: func.func @t5_layer_norm
// T5-NOT:     linalg.generic
// T5:         fff.rms_norm %arg0 scale(%{{.*}} : tensor<64xf32>) {epsilon = 9.99999997E-7 : f32} : tensor<?x?x64xf32>
// T5-NOT:     linalg.generic

// Gemma: the scale is (1 + w), computed once on the weight.
// GEMMA-LABEL: func.func @gemma_rms_norm_f32
// GEMMA:         %[[SCALE:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<64xf32>)
// GEMMA:         fff.rms_norm %arg0 scale(%[[SCALE]] : tensor<64xf32>)

// Gemma in bf16: normalized in f32 on the upcast input with the f32 (1 + w)
// as scale, rounded once by the cast that follows.
// GEMMA16-LABEL: func.func @gemma_rms_norm_bf16
// GEMMA16:         %[[UP:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<?x?x64xbf16>) outs(%{{.*}} : tensor<?x?x64xf32>)
// GEMMA16:         %[[SCALE:.*]] = linalg.generic {{.*}} ins(%{{[0-9]+}} : tensor<64xf32>)
// GEMMA16:         %[[Y:.*]] = fff.rms_norm %[[UP]] scale(%[[SCALE]] : tensor<64xf32>) {{.*}} : tensor<?x?x64xf32>
// GEMMA16:         linalg.generic {{.*}} ins(%[[Y]] : tensor<?x?x64xf32>) outs(%{{.*}} : tensor<?x?x64xbf16>)

// Fused: each BERT LayerNorm with its residual add is one unit.
// BERT-FUSED-LABEL: func.func @bert_layer
// BERT-FUSED:         fff.fusion
// BERT-FUSED:           arith.addf
// BERT-FUSED:           fff.layer_norm
// BERT-FUSED:         fff.fusion
// BERT-FUSED:           arith.addf
// BERT-FUSED:           fff.layer_norm

// LLaMA's residual feeds both the norm and the layer's final residual add,
// which depends on the norm through the MLP: the unit takes the add and the
// norm, returns both, and leaves the final add outside.
// LLAMA-FUSED-LABEL: func.func @llama_decoder_layer
// LLAMA-FUSED:         %[[UNIT:.*]]:2 = fff.fusion
// LLAMA-FUSED:           %[[H:.*]] = linalg.generic
// LLAMA-FUSED:           %[[N:.*]] = fff.rms_norm %[[H]]
// LLAMA-FUSED:           fff.yield %[[H]], %[[N]]
// LLAMA-FUSED:         linalg.generic {{.*}} ins(%[[UNIT]]#0, %{{.*}} :

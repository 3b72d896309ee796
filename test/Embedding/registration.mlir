// A tool that calls fff's two registration functions and nothing else
// (test/Embedding/fff-minimal-driver.cpp) runs both pipelines and
// --fff-extract-ptx exactly as fff-opt, which registers all of MLIR, does.
// (Before, such a tool failed with "op was not bufferized" in both
// pipelines.) The GPU output differs only in how long PTX generation took.
// @pre_ln_ffn is one fused sublayer kernel (two variants, by batch size).
//
// RUN: fff-minimal-driver opt %s --fff-cpu-pipeline > %t.minimal.cpu
// RUN: fff-opt %s --fff-cpu-pipeline > %t.full.cpu
// RUN: diff %t.minimal.cpu %t.full.cpu
// RUN: fff-minimal-driver opt %s --fff-cpu-pipeline=gpu-twin > %t.minimal.twin
// RUN: fff-opt %s --fff-cpu-pipeline=gpu-twin > %t.full.twin
// RUN: diff %t.minimal.twin %t.full.twin
// RUN: fff-minimal-driver opt %s --fff-gpu-pipeline | sed -e 's/LLVMIRToISATimeInMs = [0-9]*/LLVMIRToISATimeInMs = 0/' > %t.minimal.gpu
// RUN: fff-opt %s --fff-gpu-pipeline | sed -e 's/LLVMIRToISATimeInMs = [0-9]*/LLVMIRToISATimeInMs = 0/' > %t.full.gpu
// RUN: diff %t.minimal.gpu %t.full.gpu
// RUN: fff-minimal-driver translate --fff-extract-ptx %t.minimal.gpu | FileCheck %s
// CHECK-COUNT-5: .entry

func.func @pre_ln_ffn(%x: tensor<?x96xbf16>, %r: tensor<?x96xbf16>, %g: tensor<96xbf16>,
                      %wi: tensor<1x15x96xbf16>, %wo: tensor<1x15x96xbf16>) -> tensor<?x96xbf16> {
  %s = arith.addf %x, %r : tensor<?x96xbf16>
  %n = fff.layer_norm %s scale(%g : tensor<96xbf16>) : tensor<?x96xbf16>
  %t = fff.tree_ffn %n, %wi, %wo {depth = 3 : i64} : tensor<?x96xbf16>, tensor<1x15x96xbf16>, tensor<1x15x96xbf16>
  return %t : tensor<?x96xbf16>
}

func.func @rms_dynamic(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = fff.rms_norm %x : tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

func.func @leaf(%x: tensor<?x32xf16>, %nw: tensor<3x32xf16>, %nb: tensor<3xf16>, %w1: tensor<4x32x8xf16>,
                %b1: tensor<4x8xf16>, %w2: tensor<4x8x16xf16>, %b2: tensor<4x16xf16>) -> tensor<?x16xf16> {
  %y = fff.leaf_tree_ffn %x, %nw, %nb, %w1, %b1, %w2, %b2 {depth = 2 : i64}
      : tensor<?x32xf16>, tensor<3x32xf16>, tensor<3xf16>, tensor<4x32x8xf16>, tensor<4x8xf16>, tensor<4x8x16xf16>, tensor<4x16xf16>
  return %y : tensor<?x16xf16>
}

// The README's main job: the example block parses, verifies and prints.
// RUN: fff-opt %fff_src_root/examples/pre_ln_block.mlir | fff-opt | FileCheck %s

// CHECK-LABEL: func @pre_ln_block
// CHECK:       fff.layer_norm
// CHECK:       fff.tree_ffn {{.*}} {depth = 11 : i64}
// CHECK:       arith.addf
// CHECK:       fff.rms_norm
// CHECK:       fff.leaf_tree_ffn {{.*}} {activation = #fff.activation<gelu>, depth = 3 : i64}
// CHECK:       arith.addf

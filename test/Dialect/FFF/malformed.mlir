// Malformed input: fff-opt reports an error and exits non-zero, never crashes
// (`not` fails on a crash, so each RUN line checks both). lit turns `%%` into
// `%`, which `echo` passes through unchanged.

// RUN: head -c 600 %fff_src_root/examples/pre_ln_block.mlir | not fff-opt 2>&1 | FileCheck %s --check-prefix=TRUNCATED
// TRUNCATED: error:

// RUN: printf '\x00\xff\x13 garbage }}} ))' | not fff-opt 2>&1 | FileCheck %s --check-prefix=GARBAGE
// GARBAGE: error:

// RUN: echo 'func.func @f(%%x: tensor<4x8xf32>) { %%0 = fff.rms_norm %%x : tensor<4x8xi32> return }' \
// RUN:   | not fff-opt 2>&1 | FileCheck %s --check-prefix=WRONGTYPE
// WRONGTYPE: error: use of value '%x' expects different type than prior uses: 'tensor<4x8xi32>' vs 'tensor<4x8xf32>'

// RUN: echo 'func.func @f(%%x: tensor<4x8xf32>) { %%0 = fff.rms_norm %%x : memref<4x8xf32> return }' \
// RUN:   | not fff-opt 2>&1 | FileCheck %s --check-prefix=NOTTENSOR
// NOTTENSOR: error: custom op 'fff.rms_norm' invalid kind of type specified: expected builtin.tensor, but found 'memref<4x8xf32>'

// RUN: echo 'func.func @f(%%x: tensor<4x8xf32>) { %%0 = fff.layer_norm %%x {epsilon = "big"} : tensor<4x8xf32> return }' \
// RUN:   | not fff-opt 2>&1 | FileCheck %s --check-prefix=BADATTR
// BADATTR: error: {{.*}}'fff.layer_norm' op attribute 'epsilon' failed to satisfy constraint: 32-bit float attribute

// RUN: echo 'func.func @f(%%x: tensor<4x8xf32>) { %%0 = fff.nonexistent %%x : tensor<4x8xf32> return }' \
// RUN:   | not fff-opt 2>&1 | FileCheck %s --check-prefix=UNKNOWNOP
// UNKNOWNOP: error: custom op 'fff.nonexistent' is unknown

// RUN: not fff-opt %t.does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: cannot open input file{{.*}}No such file or directory

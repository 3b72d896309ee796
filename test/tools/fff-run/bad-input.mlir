// fff-run rejects bad input with one line on stderr and exit code 1, never a
// crash (`not` fails on a crash). Each case also checks the line count.
//
// REQUIRES: numpy
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; np.save('%t/x23.npy', np.arange(6, dtype=np.float32).reshape(2, 3)); np.save('%t/x43.npy', np.ones((4, 3), np.float32)); np.save('%t/x25.npy', np.ones((2, 5), np.float32)); np.save('%t/f64.npy', np.ones((2, 3))); np.save('%t/vec.npy', np.ones(3, np.float32)); np.save('%t/fortran.npy', np.asfortranarray(np.ones((2, 3), np.float32)))"
// RUN: printf 'not an npy file' > %t/garbage.npy
// RUN: head -c 140 %t/x23.npy > %t/truncated.npy
// RUN: head -c 50 %t/x23.npy > %t/header-only.npy

// Success first, so that the failures below are failures of the input alone.
// RUN: fff-run %s -e add_one --arg %t/x23.npy --out %t/y.npy
// RUN: %python -c "import numpy as np; y = np.load('%t/y.npy'); assert y.dtype == np.float32 and (y == np.arange(1, 7).reshape(2, 3)).all(), y"
// RUN: fff-run %s -e add_one --arg %t/x43.npy --out %t/y.npy

// RUN: not fff-run %s -e add_one --arg %t/x23.npy --out %t/y.npy --threads=many 2> %t/err
// RUN: FileCheck %s --check-prefix=THREADS < %t/err && count 1 < %t/err
// THREADS: fff-run: error: --threads takes a count of threads, 0 for all cores; got 'many'
// RUN: not fff-run %s -e add_one --arg %t/x23.npy --out %t/y.npy --threads -2 2> %t/err
// RUN: FileCheck %s --check-prefix=NEGATIVE < %t/err && count 1 < %t/err
// NEGATIVE: fff-run: error: --threads takes a count of threads, 0 for all cores; got '-2'
// RUN: not fff-run %s -e add_one --arg %t/x23.npy --out %t/y.npy --threads 2> %t/err
// RUN: FileCheck %s --check-prefix=NOVALUE < %t/err && count 1 < %t/err
// NOVALUE: fff-run: error: --threads takes a count of threads, 0 for all cores; got ''

// RUN: not fff-run %s -e add_one --arg %t/missing.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=MISSING < %t/err && count 1 < %t/err
// MISSING: fff-run: error: cannot read '{{.*}}missing.npy': No such file or directory

// RUN: not fff-run %s -e add_one --arg %t/garbage.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=GARBAGE < %t/err && count 1 < %t/err
// GARBAGE: fff-run: error: '{{.*}}garbage.npy' is not a valid .npy file: missing the \x93NUMPY magic

// RUN: not fff-run %s -e add_one --arg %t/truncated.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=TRUNCATED < %t/err && count 1 < %t/err
// TRUNCATED: fff-run: error: '{{.*}}truncated.npy' is not a valid .npy file: expected 24 data bytes for shape (2, 3), found 12

// RUN: not fff-run %s -e add_one --arg %t/header-only.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=HEADER < %t/err && count 1 < %t/err
// HEADER: fff-run: error: '{{.*}}header-only.npy' is not a valid .npy file: truncated header

// A header whose shape's byte count overflows 64 bits (to 0, matching an
// empty payload) was accepted, then read far out of bounds.
// RUN: %python -c "import numpy as np; np.save('%t/tiny.npy', np.ones((2, 3), np.float32)); b = open('%t/tiny.npy', 'rb').read(); n = int.from_bytes(b[8:10], 'little'); h = b[10:10 + n].decode(); open('%t/overflow.npy', 'wb').write(b[:10] + h.replace('(2, 3)', '(4611686018427387904, 4)').ljust(n).encode())"
// RUN: not fff-run %s -e add_one --arg %t/overflow.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=OVERFLOW < %t/err && count 1 < %t/err
// OVERFLOW: fff-run: error: '{{.*}}overflow.npy' is not a valid .npy file: shape (4611686018427387904, 4) is too large

// RUN: not fff-run %s -e add_one --arg %t/fortran.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=FORTRAN < %t/err && count 1 < %t/err
// FORTRAN: fff-run: error: '{{.*}}fortran.npy' is in Fortran order; save a C-order array (np.ascontiguousarray)

// RUN: not fff-run %s -e add_one --arg %t/f64.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=DTYPE < %t/err && count 1 < %t/err
// DTYPE: fff-run: error: argument #0 ('{{.*}}f64.npy') has dtype 'f8' but the function takes f32 (dtype 'f4')

// RUN: not fff-run %s -e add_one_bf16 --arg %t/x23.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=BF16 < %t/err && count 1 < %t/err
// BF16: fff-run: error: argument #0 ('{{.*}}x23.npy') has dtype 'f4' but the function takes bf16 (dtype 'u2', raw bf16 bits)

// RUN: not fff-run %s -e add_one --arg %t/vec.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=RANK < %t/err && count 1 < %t/err
// RANK: fff-run: error: argument #0 ('{{.*}}vec.npy') has rank 1 but the function takes rank 2 [?, 3]

// RUN: not fff-run %s -e add_one --arg %t/x25.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=STATIC < %t/err && count 1 < %t/err
// STATIC: fff-run: error: argument #0 ('{{.*}}x25.npy') has shape [2, 5] but the function takes [?, 3]

// RUN: not fff-run %s -e add_one --arg %t/x23.npy --arg %t/x23.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=ARGCOUNT < %t/err && count 1 < %t/err
// ARGCOUNT: fff-run: error: @add_one takes 1 arguments but 2 --arg files were given

// RUN: not fff-run %s -e add_one --arg %t/x23.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=OUTCOUNT < %t/err && count 1 < %t/err
// OUTCOUNT: fff-run: error: @add_one returns 1 results but 0 --out files were given

// RUN: not fff-run %s -e no_such_function --arg %t/x23.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=UNKNOWN < %t/err && count 1 < %t/err
// UNKNOWN: fff-run: error: no function @no_such_function with a body in '{{.*}}bad-input.mlir'

// RUN: not fff-run %s -e scalar_arg --arg %t/x23.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=SCALAR < %t/err && count 1 < %t/err
// SCALAR: fff-run: error: @scalar_arg argument #0 has type f32; fff-run passes ranked tensors of f32, f16, bf16, f64 or integers

// RUN: echo 'func.func @f(%%x: tensor<2xf32>) -> tensor<2xf32> { return %%y : tensor<2xf32> }' > %t/bad.mlir
// RUN: not fff-run %t/bad.mlir -e f --arg %t/vec.npy --out %t/y.npy 2> %t/err
// RUN: FileCheck %s --check-prefix=PARSE < %t/err && count 1 < %t/err
// PARSE: fff-run: error: cannot parse '{{.*}}bad.mlir': {{.*}}bad.mlir:1:{{[0-9]+}}: use of undeclared SSA value name

// RUN: not fff-run %t/nonexistent.mlir -e f 2> %t/err
// RUN: FileCheck %s --check-prefix=NOFILE < %t/err && count 1 < %t/err
// NOFILE: fff-run: error: cannot parse '{{.*}}nonexistent.mlir': could not open input file

func.func @add_one(%x: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %one = arith.constant dense<1.0> : tensor<3xf32>
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x3xf32>
  %init = tensor.empty(%rows) : tensor<?x3xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %one : tensor<?x3xf32>, tensor<3xf32>) outs(%init : tensor<?x3xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x3xf32>
  return %y : tensor<?x3xf32>
}

func.func @add_one_bf16(%x: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %one = arith.constant dense<1.0> : tensor<2x3xbf16>
  %y = arith.addf %x, %one : tensor<2x3xbf16>
  return %y : tensor<2x3xbf16>
}

func.func @scalar_arg(%x: f32) -> f32 {
  return %x : f32
}

// RUN: fff-opt %s --fff-legalize-kernel-math --split-input-file --verify-diagnostics | FileCheck %s

// Math in kernels becomes what NVPTX compiles with no libdevice: sqrt.rn
// (rsqrt as 1 / sqrt.rn), f16 and bf16 computed in f32, transcendental
// functions as polynomials, others expanded into those, classification as
// comparisons, and LLVM intrinsics NVPTX has instructions for. Host code is
// left alone.
// CHECK-LABEL: gpu.func @kernel
// CHECK-NOT:     math.
// CHECK:         llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"(%arg0) : (f32) -> f32
// CHECK:         %[[WIDE:.*]] = arith.extf %arg1 : bf16 to f32
// CHECK:         %[[ROOT:.*]] = llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"(%[[WIDE]])
// CHECK:         %[[INVERSE:.*]] = arith.divf %{{.*}}, %[[ROOT]] : f32
// CHECK:         arith.truncf %[[INVERSE]] : f32 to bf16
// CHECK:         llvm.call_intrinsic "llvm.floor.f32"
// CHECK:         llvm.call_intrinsic "llvm.fma.f32"
// CHECK:         llvm.call_intrinsic "llvm.fabs.f32"
// CHECK:         llvm.call_intrinsic "llvm.trunc.f32"
// CHECK:         arith.cmpf uno, %arg0, %arg0
// CHECK:         llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"
// CHECK-SAME:      (f32) -> f32
// CHECK:         vector.insert
// CHECK-NOT:     math.
// CHECK:         gpu.return
// CHECK-LABEL: func.func @host
// CHECK:         math.exp
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @kernel(%x: f32, %h: bf16, %v: vector<4xf32>, %i: i32, %of: memref<?xf32>, %oh: memref<?xbf16>,
                     %ov: memref<?xvector<4xf32>>, %oi: memref<?xi32>, %ob: memref<?xi1>) kernel {
      %c0 = arith.constant 0 : index
      %sqrt = math.sqrt %x : f32
      memref.store %sqrt, %of[%c0] : memref<?xf32>
      %rsqrt = math.rsqrt %h : bf16
      memref.store %rsqrt, %oh[%c0] : memref<?xbf16>
      %exp = math.exp %x : f32
      memref.store %exp, %of[%c0] : memref<?xf32>
      %tanh = math.tanh %x : f32
      memref.store %tanh, %of[%c0] : memref<?xf32>
      %abs = math.absf %h : bf16
      memref.store %abs, %oh[%c0] : memref<?xbf16>
      %rem = arith.remf %x, %sqrt : f32
      memref.store %rem, %of[%c0] : memref<?xf32>
      %pow = math.powf %x, %exp : f32
      memref.store %pow, %of[%c0] : memref<?xf32>
      %erf = math.erf %v : vector<4xf32>
      memref.store %erf, %ov[%c0] : memref<?xvector<4xf32>>
      %log10 = math.log10 %x : f32
      memref.store %log10, %of[%c0] : memref<?xf32>
      %cosh = math.cosh %x : f32
      memref.store %cosh, %of[%c0] : memref<?xf32>
      %round = math.round %x : f32
      memref.store %round, %of[%c0] : memref<?xf32>
      %ctlz = math.ctlz %i : i32
      memref.store %ctlz, %oi[%c0] : memref<?xi32>
      %nan = math.isnan %x : f32
      memref.store %nan, %ob[%c0] : memref<?xi1>
      %vsqrt = math.sqrt %v : vector<4xf32>
      memref.store %vsqrt, %ov[%c0] : memref<?xvector<4xf32>>
      gpu.return
    }
  }
  func.func @host(%x: f32) -> f32 {
    %y = math.exp %x : f32
    return %y : f32
  }
}

// -----

// f64 transcendental functions have no approximation, and would need
// libdevice.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @log_f64(%x: f64, %out: memref<?xf64>) kernel {
      %c0 = arith.constant 0 : index
      // expected-error @below {{'math.log' op in GPU kernel 'log_f64' has no GPU lowering without libdevice (CUDA's math library)}}
      %y = math.log %x : f64
      memref.store %y, %out[%c0] : memref<?xf64>
      gpu.return
    }
  }
}

// -----

// A vector wider than a thread's registers would unroll without end.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @wide(%v: vector<65536xf32>, %out: memref<?xvector<65536xf32>>) kernel {
      %c0 = arith.constant 0 : index
      // expected-error @below {{'math.sqrt' op on 'vector<65536xf32>' in a GPU kernel: vectors of more than 64 elements are not lowered}}
      %y = math.sqrt %v : vector<65536xf32>
      memref.store %y, %out[%c0] : memref<?xvector<65536xf32>>
      gpu.return
    }
  }
}

// -----

// Any wide vector of a kernel, not only math's: NVPTX aborted on this one's
// argument and store (found by fff-fuzz).
module attributes {gpu.container_module} {
  gpu.module @kernels {
    // expected-error @below {{'gpu.func' op on 'vector<65536xf32>' in a GPU kernel: vectors of more than 64 elements are not lowered}}
    gpu.func @wide_store(%v: vector<65536xf32>, %out: memref<?xvector<65536xf32>>) kernel {
      %c0 = arith.constant 0 : index
      memref.store %v, %out[%c0] : memref<?xvector<65536xf32>>
      gpu.return
    }
  }
}

// -----

// A memref of wide vectors is one too.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    // expected-error @below {{'gpu.func' op on 'vector<128xf16>' in a GPU kernel: vectors of more than 64 elements are not lowered}}
    gpu.func @wide_elements(%out: memref<4xvector<128xf16>>) kernel {
      gpu.return
    }
  }
}

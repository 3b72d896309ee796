// RUN: fff-opt %s --fff-fuse-norms --split-input-file | FileCheck %s

// A pre-LN block's norm backward as AOTAutograd's backward graph holds it:
// dy is the incoming gradient under an inverted-dropout mask and scale,
// and the residual stream's gradient is added to dx (dh = dresidual + dx).
// Both join the unit; dgamma and dbeta are yielded as they are.
// CHECK-LABEL: func @pre_ln_backward
// CHECK:         %[[U:.*]]:3 = fff.fusion ins(
// CHECK:           %[[MASKED:.*]] = arith.mulf
// CHECK:           %[[DY:.*]] = arith.mulf %[[MASKED]]
// CHECK:           %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = fff.layer_norm_grad %[[DY]]
// CHECK:           %[[DH:.*]] = arith.addf %{{.*}}, %[[DX]]
// CHECK:           fff.yield %[[DG]], %[[DB]], %[[DH]]
// CHECK:         return %[[U]]#2, %[[U]]#0, %[[U]]#1
func.func @pre_ln_backward(%grad: tensor<16x64xf32>, %mask: tensor<16x64xf32>, %x: tensor<16x64xf32>,
                           %mean: tensor<16x1xf32>, %rstd: tensor<16x1xf32>, %g: tensor<64xf32>,
                           %dres: tensor<16x64xf32>) -> (tensor<16x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %scale = arith.constant dense<1.25> : tensor<16x64xf32>
  %masked = arith.mulf %grad, %mask : tensor<16x64xf32>
  %dy = arith.mulf %masked, %scale : tensor<16x64xf32>
  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %mean, %rstd scale(%g : tensor<64xf32>) bias_grad
      : tensor<16x64xf32>, tensor<16x1xf32>
  %dh = arith.addf %dres, %dx : tensor<16x64xf32>
  return %dh, %dg, %db : tensor<16x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// LLaMA's RMSNorm in bf16: the backward takes dy cast down from the f32
// gradient and casts dx up for the f32 residual stream.
// CHECK-LABEL: func @rms_norm_backward_casts
// CHECK:         fff.fusion ins(
// CHECK:           arith.truncf
// CHECK:           fff.rms_norm_grad
// CHECK:           arith.extf
// CHECK:           arith.addf
// CHECK:           fff.yield
// CHECK-NOT:     arith.
func.func @rms_norm_backward_casts(%grad: tensor<?x4096xf32>, %x: tensor<?x4096xbf16>, %g: tensor<4096xbf16>,
                                   %dres: tensor<?x4096xf32>) -> (tensor<?x4096xf32>, tensor<4096xbf16>) {
  %dy = arith.truncf %grad : tensor<?x4096xf32> to tensor<?x4096xbf16>
  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : tensor<4096xbf16>) : tensor<?x4096xbf16>
  %wide = arith.extf %dx : tensor<?x4096xbf16> to tensor<?x4096xf32>
  %dh = arith.addf %wide, %dres : tensor<?x4096xf32>
  return %dh, %dg : tensor<?x4096xf32>, tensor<4096xbf16>
}

// -----

// Near miss: the parameter gradients are not over dx's shape, so work on
// them stays outside the unit, which then holds the norm backward and the
// residual gradient alone.
// CHECK-LABEL: func @parameter_work_stays_out
// CHECK:         %[[U:.*]]:2 = fff.fusion
// CHECK:           fff.rms_norm_grad
// CHECK:           arith.addf
// CHECK:         }
// CHECK:         arith.mulf %[[U]]#0
func.func @parameter_work_stays_out(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %g: tensor<64xf32>,
                                    %dres: tensor<?x64xf32>, %lr: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<64xf32>) {
  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : tensor<64xf32>) : tensor<?x64xf32>
  %dh = arith.addf %dx, %dres : tensor<?x64xf32>
  %step = arith.mulf %dg, %lr : tensor<64xf32>
  return %dh, %step : tensor<?x64xf32>, tensor<64xf32>
}

// -----

// Near miss: an op outside the unit reads dx before the residual add, so
// the add cannot join (the unit would sit after that reader); dy's
// prologue still does.
// CHECK-LABEL: func @dx_read_between
// CHECK:         %[[U:.*]]:2 = fff.fusion
// CHECK:           arith.mulf
// CHECK:           fff.rms_norm_grad
// CHECK-NEXT:      fff.yield
// CHECK:         %[[OUT:.*]] = call @observe(%[[U]]#0)
// CHECK:         arith.addf %[[U]]#0, %[[OUT]]
func.func private @observe(tensor<?x64xf32>) -> tensor<?x64xf32>
func.func @dx_read_between(%grad: tensor<?x64xf32>, %mask: tensor<?x64xf32>, %x: tensor<?x64xf32>,
                           %g: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<64xf32>) {
  %dy = arith.mulf %grad, %mask : tensor<?x64xf32>
  %dx, %dg = fff.rms_norm_grad %dy, %x scale(%g : tensor<64xf32>) : tensor<?x64xf32>
  %seen = func.call @observe(%dx) : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %dh = arith.addf %dx, %seen : tensor<?x64xf32>
  return %dh, %dg : tensor<?x64xf32>, tensor<64xf32>
}

// -----

// A backward with no pointwise neighbours stays as it is.
// CHECK-LABEL: func @alone
// CHECK-NOT:     fff.fusion
// CHECK:         fff.layer_norm_grad
func.func @alone(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %mean: tensor<?x1xf32>,
                 %rstd: tensor<?x1xf32>) -> tensor<?x64xf32> {
  %dx = fff.layer_norm_grad %dy, %x, %mean, %rstd : tensor<?x64xf32>, tensor<?x1xf32>
  return %dx : tensor<?x64xf32>
}

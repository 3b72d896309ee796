//===- Passes.td - fff dialect transformations ------------*- tablegen -*-===//

#ifndef FFF_DIALECT_FFF_TRANSFORMS_PASSES_TD
#define FFF_DIALECT_FFF_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def RaiseNorms : Pass<"fff-raise-norms"> {
  let summary = "Recognise decomposed LayerNorm and RMSNorm in linalg IR";
  let description = [{
    Finds normalizations that frontends emit as chains of `linalg.generic`
    reductions and elementwise ops (torch-mlir, IREE, StableHLO->linalg)
    and replaces each by `fff.layer_norm` or `fff.rms_norm`.

    Matching is by dataflow, not op order: the value each elementwise
    `linalg.generic` computes is rebuilt as an expression over its inputs,
    looking through elementwise producers, row sums (reductions over
    trailing dims, keepdim or not) and f32/f64 casts, and compared with the
    norms' definitions:

    * RMSNorm: `x * rsqrt(sum(x*x)/N + eps) [* gamma]`;
    * LayerNorm: `(x - mean) * rsqrt(var + eps) [* gamma] [+ beta]`, with
      `mean = sum(x)/N` and `var` either `sum((x-mean)^2)/N` or
      `sum(x*x)/N - mean^2`.

    A mean may be a division by N or a multiplication by 1/N; `rsqrt(v)`
    may be `1/sqrt(v)`. N must be the static product of the reduced dims
    (unbiased variance does not match), eps must sit inside the square
    root, and the reduced dims must be the trailing ones. Intermediates
    with other uses stay in place, so those uses keep their values.
  }];
  let dependentDialects = ["::fff::FFFDialect"];
}

#endif // FFF_DIALECT_FFF_TRANSFORMS_PASSES_TD

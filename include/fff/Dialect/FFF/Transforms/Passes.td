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
    may be `1/sqrt(v)` or `pow(v, -0.5)`. N must be the static product of the reduced dims
    (unbiased variance does not match), eps must sit inside the square
    root, and the reduced dims must be the trailing ones. Intermediates
    with other uses stay in place, so those uses keep their values.

    A root that is no norm may be the `dx` of a LayerNorm backward, as
    torch's decomposition of `aten.native_layer_norm_backward` writes it
    (torch-mlir and AOTAutograd emit it): `(rstd / N) * ((g * N - sum(g)) -
    xhat * sum(g * xhat))` with `xhat = (x - mean) * rstd`, `g = dy [*
    gamma]`, and `mean`, `rstd` f32 per-row statistics (`[rows..., 1...]`).
    It becomes `fff.layer_norm_grad`. Sums over the rows of `dy * xhat`
    and of `dy` (each a reduction of its own, reading the same dy and an
    xhat of the same x, mean and rstd) become its `dgamma` and `dbeta`
    where they have its element type; 16-bit ones summed in f32 and then
    narrowed stay linalg.

    Or the `dx` of an RMSNorm backward, as AOTAutograd decomposes that of a
    hand-written RMSNorm (LLaMA's, with its f32 upcast): `g * rstd +
    (sum(g * x) * -0.5 * rstd^3 / N) * (2 * x)` (the constants in any
    grouping, `a - b` for `a + -b`). It becomes `fff.rms_norm_grad`, which
    recomputes rstd where the module computes it as `rsqrt(mean(x^2) +
    eps)` (a forward and backward traced as one step), or takes the saved
    statistic where one tensor is read in both places. Two saved tensors
    (rstd and its alias, as AOTAutograd's backward alone receives them) are
    not known to be one, and are not raised; nor is the dgamma sum, which
    reads the forward's saved normalized row.
  }];
  let dependentDialects = ["::fff::FFFDialect"];
}

def FuseNorms : Pass<"fff-fuse-norms"> {
  let summary = "Group each norm with its pointwise neighbours into fff.fusion";
  let description = [{
    Forms one `fff.fusion` unit per `fff.layer_norm` / `fff.rms_norm`, as
    torch.compile groups work into one kernel:

    * the prologue: the elementwise op producing the norm's input (a
      residual add), whose value is also returned when used elsewhere;
    * the epilogue: every elementwise op, in order, that consumes the norm's
      result or another value of the unit and computes a tensor of the
      norm's shape (bias, scale/shift including `(1 + scale)`, activation,
      dtype casts, a multiply by another tensor).

    A transformer's FFN sublayer is formed first, as one unit holding a norm
    and a tree layer (`fff.tree_ffn` or `fff.leaf_tree_ffn`): pre-LN
    `h + tree(norm(h))`, where the tree reads the norm's result, and
    post-LN `norm(h + tree(h))`, where the norm reads the tree's result
    through elementwise ops; each with the prologues and epilogues above.
    Where a norm is next to a tree layer but the two cannot be one unit (in
    different blocks, or an op outside needs a value between them), a
    remark on the tree layer says why, and the norm is fused on its own.

    A norm backward (`fff.layer_norm_grad`, `fff.rms_norm_grad`) forms a
    unit the same way, its `dy` in the norm's input's place and its `dx` in
    the norm's result's: the prologues compute `dy` (a dropout mask and
    scale, a cast) and `x` (the cast that widens a bf16 `x` for an f32 norm,
    torch's mixed-type norms), the epilogue reads `dx` (the residual
    stream's gradient added to it, `dh = dresidual + dx`; a cast).

    Elementwise means a `linalg.generic` with only parallel loops and an
    identity output map, or an elementwise arith/math op on tensors.
    Constants are cloned into the unit; other values become its inputs.
    A norm with no such neighbours stays as it is, and a unit is not formed
    where that would move a value after one of its uses.
  }];
  let dependentDialects = ["::fff::FFFDialect"];
}

def InsertShapeChecks : Pass<"fff-insert-shape-checks"> {
  let summary = "Check fff ops' dynamic extents against each other at run time";
  let description = [{
    Each fff op ties the extents of its operands together: a norm's scale
    and bias have the size of the normalized dims, and a tree layer's
    weights have the node count its depth implies and the input's width.
    The verifiers check these shape contracts on static extents; this pass
    adds a `cf.assert` for every rule that involves a dynamic one, with a
    one-line message naming the op (and its location), the operand dim and
    what it must equal. Extents read inside an `fff.fusion` are read from
    the unit's inputs, before the unit.

    Checks that read only function arguments go at the function's entry,
    so that a failing call stops before any other work; the others go just
    before their op. The pipelines lower each `cf.assert` to an error
    report and an early return (`fff-lower-runtime-checks`).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def OutlineOps : Pass<"fff-outline-ops", "::mlir::ModuleOp"> {
  let summary = "Give each distinct fff op or fused unit one private function, called where it was";
  let description = [{
    Replaces every `fff.layer_norm`, `fff.rms_norm`, `fff.tree_ffn`,
    `fff.leaf_tree_ffn` and `fff.fusion` that is not inside a unit with a
    `func.call` of a private function whose body is that op alone. Ops that
    are identical (the same generic form: attributes, operand and result
    types, and a unit's body) share one function, so that a model of 24
    identical layers lowers, bufferizes and JIT-compiles each distinct op
    once, as the GPU pipeline emits each distinct kernel once. The CPU
    pipeline runs it before lowering the ops.

    The functions are named for their op, `fff_layer_norm`,
    `fff_fused_rms_norm`, `fff_tree_ffn`, with a numeric suffix after the
    first. Shape checks (`fff-insert-shape-checks`) stay at the call.

    Example:

    ```mlir
    %y = fff.rms_norm %x : tensor<?x768xf32>
    // becomes
    %y = func.call @fff_rms_norm(%x) : (tensor<?x768xf32>) -> tensor<?x768xf32>
    func.func private @fff_rms_norm(%x: tensor<?x768xf32>) -> tensor<?x768xf32> {
      %y = fff.rms_norm %x : tensor<?x768xf32>
      return %y : tensor<?x768xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

#endif // FFF_DIALECT_FFF_TRANSFORMS_PASSES_TD

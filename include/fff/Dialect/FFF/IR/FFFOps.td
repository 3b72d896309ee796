//===- FFFOps.td - fff operations --------------------------*- tablegen -*-===//
//
// Semantics are those of shared/DESIGN.md; the numeric tests hold the
// lowerings to them.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_DIALECT_FFF_IR_FFFOPS_TD
#define FFF_DIALECT_FFF_IR_FFFOPS_TD

include "fff/Dialect/FFF/IR/FFFDialect.td"
include "fff/Dialect/FFF/IR/FFFInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

def FFF_LayerNormOp : FFF_Op<"layer_norm", [
    Pure, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<FFF_ShapeContractOpInterface>,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Layer normalization over the trailing dimensions";
  let description = [{
    Normalizes `input` over its trailing `normalized_rank` dimensions (torch's
    `normalized_shape`), with biased variance (divide by N):

    ```
    y = (x - mean) * rsqrt(var + epsilon) * gamma + beta
    ```

    `gamma` (`scale`) and `beta` (`bias`) are optional; their shape is the
    normalized (trailing) shape of `input` and their element type is that of
    `input`. Computation is in f32; `output` has the type of `input`.

    With `return_stats`, the op also returns `mean` and `rstd` in f32, shaped
    like `torch.native_layer_norm`'s: the leading dimensions of `input`
    followed by `normalized_rank` ones. A backward pass needs them.

    Example:

    ```mlir
    %y = fff.layer_norm %x scale(%g : tensor<768xbf16>) bias(%b : tensor<768xbf16>)
           {epsilon = 1.0e-05 : f32} : tensor<?x768xbf16>
    %z, %mean, %rstd = fff.layer_norm %x return_stats : tensor<?x768xbf16>
    // %mean, %rstd : tensor<?x1xf32>
    %w = fff.layer_norm %x3d normalized_rank 2 : tensor<?x16x64xf32>
    ```
  }];

  let arguments = (ins
    FFF_FloatTensor:$input,
    Optional<FFF_FloatTensor>:$gamma,
    Optional<FFF_FloatTensor>:$beta,
    DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon,
    DefaultValuedAttr<I64Attr, "1">:$normalized_rank,
    UnitAttr:$return_stats
  );
  let results = (outs
    FFF_FloatTensor:$output,
    Variadic<FFF_F32Tensor>:$stats
  );

  let assemblyFormat = [{
    $input (`scale` `(` $gamma^ `:` type($gamma) `)`)?
    (`bias` `(` $beta^ `:` type($beta) `)`)?
    (`normalized_rank` $normalized_rank^)? (`return_stats` $return_stats^)?
    attr-dict `:` type($input)
  }];

  let extraClassDeclaration = [{
    /// The per-row mean, or null when the op was built without `return_stats`.
    ::mlir::Value getMean() {
      return getStats().empty() ? ::mlir::Value() : getStats()[0];
    }
    /// The per-row reciprocal standard deviation, or null.
    ::mlir::Value getRstd() {
      return getStats().empty() ? ::mlir::Value() : getStats()[1];
    }
  }];

  let hasVerifier = 1;
}

def FFF_RMSNormOp : FFF_Op<"rms_norm", [
    Pure, AllTypesMatch<["input", "output"]>,
    DeclareOpInterfaceMethods<FFF_ShapeContractOpInterface>]> {
  let summary = "Root-mean-square normalization over the trailing dimensions";
  let description = [{
    Normalizes `input` over its trailing `normalized_rank` dimensions, as
    `torch.nn.RMSNorm` does:

    ```
    y = x * rsqrt(mean(x^2) + epsilon) * gamma
    ```

    `gamma` (`scale`) is optional; its shape is the normalized shape of
    `input` and its element type that of `input`. Computation is in f32;
    `output` has the type of `input`.

    Example:

    ```mlir
    %y = fff.rms_norm %x scale(%g : tensor<4096xf16>)
           {epsilon = 1.0e-06 : f32} : tensor<?x?x4096xf16>
    %z = fff.rms_norm %x normalized_rank 2 : tensor<?x?x4096xf16>
    ```
  }];

  let arguments = (ins
    FFF_FloatTensor:$input,
    Optional<FFF_FloatTensor>:$gamma,
    DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon,
    DefaultValuedAttr<I64Attr, "1">:$normalized_rank
  );
  let results = (outs FFF_FloatTensor:$output);

  let assemblyFormat = [{
    $input (`scale` `(` $gamma^ `:` type($gamma) `)`)?
    (`normalized_rank` $normalized_rank^)? attr-dict `:` type($input)
  }];

  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradients of the normalizations
//===----------------------------------------------------------------------===//

def FFF_LayerNormGradOp : FFF_Op<"layer_norm_grad", [
    Pure, AllTypesMatch<["grad_output", "input", "grad_input"]>,
    AllTypesMatch<["mean", "rstd"]>,
    DeclareOpInterfaceMethods<FFF_ShapeContractOpInterface>,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface,
                              ["reifyResultShapes"]>]> {
  let summary = "Gradient of layer_norm: dx, dgamma and dbeta from dy";
  let description = [{
    The vector-Jacobian product of `fff.layer_norm` over the trailing
    `normalized_rank` dimensions, as `torch.ops.aten.native_layer_norm_backward`
    computes it. With `mean` and `rstd` those the forward returned
    (`return_stats`), `xhat = (x - mean) * rstd` and `g = dy * gamma`
    (`g = dy` without `scale`), each row of N elements gives

    ```
    dx     = rstd * (g - mean(g) - xhat * mean(g * xhat))
    dgamma = sum over rows of dy * xhat         (with scale)
    dbeta  = sum over rows of dy                (with bias_grad)
    ```

    All arithmetic is in f32. `grad_input` (dx) has the type of `input`;
    `dgamma` and `dbeta` (the `param_grads`, in that order, each present
    only when asked for) are shaped like the normalized dims and have the
    input's element type, as torch's are. Sums over rows are taken in a
    fixed order: the same bits for any thread count.

    Example:

    ```mlir
    %dx, %dgamma, %dbeta = fff.layer_norm_grad %dy, %x, %mean, %rstd
        scale(%g : tensor<768xbf16>) bias_grad : tensor<?x768xbf16>, tensor<?x1xf32>
    %dx2 = fff.layer_norm_grad %dy, %x, %mean, %rstd : tensor<?x768xf32>, tensor<?x1xf32>
    ```
  }];

  let arguments = (ins
    FFF_FloatTensor:$grad_output,
    FFF_FloatTensor:$input,
    FFF_F32Tensor:$mean,
    FFF_F32Tensor:$rstd,
    Optional<FFF_FloatTensor>:$gamma,
    DefaultValuedAttr<I64Attr, "1">:$normalized_rank,
    UnitAttr:$bias_grad
  );
  let results = (outs
    FFF_FloatTensor:$grad_input,
    Variadic<FFF_FloatTensor>:$param_grads
  );

  let assemblyFormat = [{
    $grad_output `,` $input `,` $mean `,` $rstd
    (`scale` `(` $gamma^ `:` type($gamma) `)`)?
    (`bias_grad` $bias_grad^)? (`normalized_rank` $normalized_rank^)?
    attr-dict `:` type($input) `,` type($mean)
  }];

  let extraClassDeclaration = [{
    /// dgamma, or null without `scale`.
    ::mlir::Value getGammaGrad() {
      return getGamma() ? getParamGrads()[0] : ::mlir::Value();
    }
    /// dbeta, or null without `bias_grad`.
    ::mlir::Value getBetaGrad() {
      return getBiasGrad() ? getParamGrads().back() : ::mlir::Value();
    }
  }];

  let hasVerifier = 1;
}

def FFF_RMSNormGradOp : FFF_Op<"rms_norm_grad", [
    Pure, AttrSizedOperandSegments,
    AllTypesMatch<["grad_output", "input", "grad_input"]>,
    DeclareOpInterfaceMethods<FFF_ShapeContractOpInterface>,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface,
                              ["reifyResultShapes"]>]> {
  let summary = "Gradient of rms_norm: dx and dgamma from dy";
  let description = [{
    The vector-Jacobian product of `fff.rms_norm` over the trailing
    `normalized_rank` dimensions. With `rstd = rsqrt(mean(x^2) + epsilon)`
    per row, `xhat = x * rstd` and `g = dy * gamma` (`g = dy` without
    `scale`):

    ```
    dx     = rstd * (g - xhat * mean(g * xhat))
    dgamma = sum over rows of dy * xhat         (with scale)
    ```

    `rstd`, f32 and shaped like `layer_norm`'s statistics (the leading dims,
    then `normalized_rank` ones), is optional: without it the op computes it
    from `x` and `epsilon` in the pass over each row that also sums
    `g * x`, so that the forward need not store it. All arithmetic is in
    f32; `grad_input` (dx) has the type of `input`, and `dgamma` (the one
    `param_grads` result, with `scale`) is shaped like `gamma` with the
    input's element type. Sums over rows are taken in a fixed order.

    Example:

    ```mlir
    %dx, %dgamma = fff.rms_norm_grad %dy, %x scale(%g : tensor<4096xbf16>)
        {epsilon = 1.0e-06 : f32} : tensor<?x4096xbf16>
    %dx2 = fff.rms_norm_grad %dy, %x rstd(%r : tensor<?x1xf32>) : tensor<?x4096xf32>
    ```
  }];

  let arguments = (ins
    FFF_FloatTensor:$grad_output,
    FFF_FloatTensor:$input,
    Optional<FFF_F32Tensor>:$rstd,
    Optional<FFF_FloatTensor>:$gamma,
    DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon,
    DefaultValuedAttr<I64Attr, "1">:$normalized_rank
  );
  let results = (outs
    FFF_FloatTensor:$grad_input,
    Variadic<FFF_FloatTensor>:$param_grads
  );

  let assemblyFormat = [{
    $grad_output `,` $input (`rstd` `(` $rstd^ `:` type($rstd) `)`)?
    (`scale` `(` $gamma^ `:` type($gamma) `)`)?
    (`normalized_rank` $normalized_rank^)? attr-dict `:` type($input)
  }];

  let extraClassDeclaration = [{
    /// dgamma, or null without `scale`.
    ::mlir::Value getGammaGrad() {
      return getGamma() ? getParamGrads()[0] : ::mlir::Value();
    }
  }];

  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tree-structured conditional feedforward layers
//===----------------------------------------------------------------------===//

def FFF_TreeFFNOp : FFF_Op<"tree_ffn", [
    Pure, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<FFF_ShapeContractOpInterface>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "UltraFastBERT fast feedforward layer (inference)";
  let description = [{
    `K` parallel binary trees of `N = 2^(depth+1) - 1` neurons each. Every
    row of `input` walks one root-to-leaf path per tree and so uses
    `depth + 1` neurons of each:

    ```
    for each row b, tree k:  node = 0
      for level in 0..depth:
        l = dot(x[b], w_in[k,node]) + b_in[k,node]
        y[b] += act(l) * w_out[k,node]
        node = 2*node + 1 + (l > 0 ? 1 : 0)        # exactly 0 goes left
    y[b] += b_out
    ```

    With `zero_goes_right`, a logit of exactly 0 (of either sign) goes
    right, `l >= 0 ? 1 : 0`, as the FFF authors' inference code
    (`plane_score >= 0` in UltraFastBERT's `fff_bmm.py`) walks; their
    training layer sends it left, the default. The two agree wherever no
    logit on a row's path is exactly 0.

    | operand | shape              |
    |---------|--------------------|
    | `input` | `[B, Din]`         |
    | `w_in`  | `[K, N, Din]`      |
    | `b_in`  | `[K, N]`, optional |
    | `w_out` | `[K, N, Dout]`     |
    | `b_out` | `[Dout]`, optional |

    Row `n` of `w_out` holds neuron `n`'s output weights (a PyTorch
    `linear_out.weight` of shape `[Dout, K*N]` is transposed once on import).
    All operands share one element type; computation is in f32 and the result
    `[B, Dout]` has the element type of `input`.

    Example (UltraFastBERT-1x11):

    ```mlir
    %y = fff.tree_ffn %x, %w_in bias(%b_in : tensor<1x4095xf32>), %w_out
           bias(%b_out : tensor<768xf32>) {depth = 11 : i64}
           : tensor<?x768xf32>, tensor<1x4095x768xf32>, tensor<1x4095x768xf32>
    ```
  }];

  let arguments = (ins
    FFF_FloatTensorOfRank<2>:$input,
    FFF_FloatTensorOfRank<3>:$w_in,
    Optional<FFF_FloatTensorOfRank<2>>:$b_in,
    FFF_FloatTensorOfRank<3>:$w_out,
    Optional<FFF_FloatTensorOfRank<1>>:$b_out,
    I64Attr:$depth,
    DefaultValuedAttr<FFF_ActivationAttr, "::fff::Activation::gelu">:$activation,
    UnitAttr:$zero_goes_right
  );
  let results = (outs FFF_FloatTensorOfRank<2>:$output);

  let assemblyFormat = [{
    $input `,` $w_in (`bias` `(` $b_in^ `:` type($b_in) `)`)? `,`
    $w_out (`bias` `(` $b_out^ `:` type($b_out) `)`)? attr-dict
    `:` type($input) `,` type($w_in) `,` type($w_out)
  }];

  let extraClassDeclaration = [{
    /// Number of neurons in one tree: 2^(depth+1) - 1.
    int64_t getNumNodes() { return (int64_t(1) << (getDepth() + 1)) - 1; }
  }];

  let hasVerifier = 1;
}

def FFF_TreeFFNGradOp : FFF_Op<"tree_ffn_grad", [
    Pure, AllTypesMatch<["input", "grad_input"]>,
    AllTypesMatch<["w_in", "grad_w_in"]>,
    AllTypesMatch<["w_out", "grad_w_out"]>,
    DeclareOpInterfaceMethods<FFF_ShapeContractOpInterface>,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Gradient of tree_ffn: dx and the weights' gradients from dy";
  let description = [{
    The gradient of UltraFastBERT's masked training layer, whose values
    equal `fff.tree_ffn`'s: routing is hard and gets no gradient. Each row
    `b` walks each tree `k` as the forward does (a logit of exactly 0 goes
    left, or right with `zero_goes_right`, as `fff.tree_ffn`'s), and for
    each node `n` on its path, with logit `l`:

    ```
    dw_out[k,n] += act(l) * dy[b]
    dl           = dot(dy[b], w_out[k,n]) * act'(l)
    dx[b]       += dl * w_in[k,n]
    dw_in[k,n]  += dl * x[b]
    db_in[k,n]  += dl                       (with b_in)
    db_out       = sum over b of dy[b]      (with bias_out_grad)
    ```

    Nodes no row visits get zero gradients. `act'` is the derivative of
    the activation as `shared/DESIGN.md` defines it; relu's is 0 at 0, as
    torch's. The path is walked again from `input`, `w_in` and `b_in`
    (`b_out` does not change it, so it is not an operand).

    All arithmetic is in f32, and every result has its operand's element
    type: `grad_input` (dx) the input's, `grad_w_in` and `grad_w_out` the
    weights', and the `bias_grads`, `db_in` (with `b_in`) then `db_out`
    (with `bias_out_grad`, shaped `[Dout]`), the input's. Sums are taken in
    a fixed order: each node's over the rows that visited it in row order,
    each row's over the trees and levels in order. The result has the same
    bits for any thread count.

    Example (UltraFastBERT-1x11):

    ```mlir
    %dx, %dw_in, %dw_out, %db_in, %db_out = fff.tree_ffn_grad %dy, %x,
        %w_in bias(%b_in : tensor<1x4095xf32>), %w_out bias_grad
        {depth = 11 : i64}
        : tensor<?x768xf32>, tensor<?x768xf32>, tensor<1x4095x768xf32>,
          tensor<1x4095x768xf32>
    ```
  }];

  let arguments = (ins
    FFF_FloatTensorOfRank<2>:$grad_output,
    FFF_FloatTensorOfRank<2>:$input,
    FFF_FloatTensorOfRank<3>:$w_in,
    Optional<FFF_FloatTensorOfRank<2>>:$b_in,
    FFF_FloatTensorOfRank<3>:$w_out,
    I64Attr:$depth,
    DefaultValuedAttr<FFF_ActivationAttr, "::fff::Activation::gelu">:$activation,
    UnitAttr:$bias_out_grad,
    UnitAttr:$zero_goes_right
  );
  let results = (outs
    FFF_FloatTensorOfRank<2>:$grad_input,
    FFF_FloatTensorOfRank<3>:$grad_w_in,
    FFF_FloatTensorOfRank<3>:$grad_w_out,
    Variadic<FFF_FloatTensor>:$bias_grads
  );

  let assemblyFormat = [{
    $grad_output `,` $input `,` $w_in (`bias` `(` $b_in^ `:` type($b_in) `)`)?
    `,` $w_out (`bias_grad` $bias_out_grad^)? attr-dict
    `:` type($grad_output) `,` type($input) `,` type($w_in) `,` type($w_out)
  }];

  let extraClassDeclaration = [{
    /// Number of neurons in one tree: 2^(depth+1) - 1.
    int64_t getNumNodes() { return (int64_t(1) << (getDepth() + 1)) - 1; }
    /// db_in, or null without `b_in`.
    ::mlir::Value getBInGrad() {
      return getBIn() ? getBiasGrads()[0] : ::mlir::Value();
    }
    /// db_out, or null without `bias_out_grad`.
    ::mlir::Value getBOutGrad() {
      return getBiasOutGrad() ? getBiasGrads().back() : ::mlir::Value();
    }
  }];

  let hasVerifier = 1;
}

def FFF_LeafTreeFFNOp : FFF_Op<"leaf_tree_ffn", [
    Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>,
    DeclareOpInterfaceMethods<FFF_ShapeContractOpInterface>]> {
  let summary = "Original fast feedforward layer: routing tree over MLP leaves";
  let description = [{
    The FFF of Belcak & Wattenhofer (2023). A tree of `depth` levels of
    routing hyperplanes picks one of `2^depth` small MLP leaves (width `W`)
    per row:

    ```
    node = 0
    repeat depth times:
      s = dot(x[b], node_w[node]) + node_b[node]
      node = 2*node + 1 + (s >= 0)                 # note >=, as in the paper's code
    leaf = node - (2^depth - 1)
    y[b] = act(x[b] @ w1[leaf] + b1[leaf]) @ w2[leaf] + b2[leaf]
    ```

    | operand  | shape                  |
    |----------|------------------------|
    | `input`  | `[B, Din]`             |
    | `node_w` | `[2^depth - 1, Din]`   |
    | `node_b` | `[2^depth - 1]`        |
    | `w1`     | `[2^depth, Din, W]`    |
    | `b1`     | `[2^depth, W]`         |
    | `w2`     | `[2^depth, W, Dout]`   |
    | `b2`     | `[2^depth, Dout]`      |

    All operands share one element type; computation is in f32 and the result
    `[B, Dout]` has the element type of `input`. The activation defaults to
    `relu`.

    Example:

    ```mlir
    %y = fff.leaf_tree_ffn %x, %node_w, %node_b, %w1, %b1, %w2, %b2 {depth = 3 : i64}
           : tensor<?x64xf32>, tensor<7x64xf32>, tensor<7xf32>, tensor<8x64x16xf32>,
             tensor<8x16xf32>, tensor<8x16x64xf32>, tensor<8x64xf32>
    ```
  }];

  let arguments = (ins
    FFF_FloatTensorOfRank<2>:$input,
    FFF_FloatTensorOfRank<2>:$node_w,
    FFF_FloatTensorOfRank<1>:$node_b,
    FFF_FloatTensorOfRank<3>:$w1,
    FFF_FloatTensorOfRank<2>:$b1,
    FFF_FloatTensorOfRank<3>:$w2,
    FFF_FloatTensorOfRank<2>:$b2,
    I64Attr:$depth,
    DefaultValuedAttr<FFF_ActivationAttr, "::fff::Activation::relu">:$activation
  );
  let results = (outs FFF_FloatTensorOfRank<2>:$output);

  let assemblyFormat = [{
    $input `,` $node_w `,` $node_b `,` $w1 `,` $b1 `,` $w2 `,` $b2 attr-dict
    `:` type($input) `,` type($node_w) `,` type($node_b) `,` type($w1) `,`
    type($b1) `,` type($w2) `,` type($b2)
  }];

  let extraClassDeclaration = [{
    /// Number of routing nodes: 2^depth - 1.
    int64_t getNumRoutingNodes() { return getNumLeaves() - 1; }
    /// Number of MLP leaves: 2^depth.
    int64_t getNumLeaves() { return int64_t(1) << getDepth(); }
  }];

  let hasVerifier = 1;
}

def FFF_LeafTreeFFNGradOp : FFF_Op<"leaf_tree_ffn_grad", [
    Pure, AllTypesMatch<["input", "grad_input"]>,
    AllTypesMatch<["w1", "grad_w1"]>, AllTypesMatch<["b1", "grad_b1"]>,
    AllTypesMatch<["w2", "grad_w2"]>,
    DeclareOpInterfaceMethods<FFF_ShapeContractOpInterface>,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Gradient of leaf_tree_ffn with hard routing: dx and the leaves' gradients";
  let description = [{
    The hard-routed gradient of `fff.leaf_tree_ffn`: each row `b` is routed
    to its leaf as the forward does (a score of exactly 0 goes right), and
    only that leaf's MLP and the row itself get gradients. With
    `pre = x[b] @ w1[leaf] + b1[leaf]`:

    ```
    dw2[leaf] += outer(act(pre), dy[b])     db2[leaf] += dy[b]
    dpre       = (dy[b] @ w2[leaf]^T) * act'(pre)
    dw1[leaf] += outer(x[b], dpre)          db1[leaf] += dpre
    dx[b]      = dpre @ w1[leaf]^T
    ```

    The routing is a step function of `x`, so it gets no gradient: the
    routing nodes' gradients are zero and are not results. (The routing
    nodes of a leaf tree learn only under the `fastfeedforward` package's
    soft mixture.) `b2` changes no gradient, so it is not an operand.
    Leaves no row reaches get zero gradients. `act'` is the derivative of
    the activation as `shared/DESIGN.md` defines it; relu's is 0 at 0.

    All arithmetic is in f32; `grad_input`, `grad_w1`, `grad_b1` and
    `grad_w2` have their operand's type, `grad_b2` is `[L, Dout]` of the
    input's element type. Each leaf's sums are taken over its rows in row
    order, so the results have the same bits for any thread count.

    Example (256 leaves of 12):

    ```mlir
    %dx, %dw1, %db1, %dw2, %db2 = fff.leaf_tree_ffn_grad %dy, %x, %node_w,
        %node_b, %w1, %b1, %w2 {depth = 8 : i64}
        : tensor<?x768xf32>, tensor<?x768xf32>, tensor<255x768xf32>,
          tensor<255xf32>, tensor<256x768x12xf32>, tensor<256x12xf32>,
          tensor<256x12x768xf32>
    ```
  }];

  let arguments = (ins
    FFF_FloatTensorOfRank<2>:$grad_output,
    FFF_FloatTensorOfRank<2>:$input,
    FFF_FloatTensorOfRank<2>:$node_w,
    FFF_FloatTensorOfRank<1>:$node_b,
    FFF_FloatTensorOfRank<3>:$w1,
    FFF_FloatTensorOfRank<2>:$b1,
    FFF_FloatTensorOfRank<3>:$w2,
    I64Attr:$depth,
    DefaultValuedAttr<FFF_ActivationAttr, "::fff::Activation::relu">:$activation
  );
  let results = (outs
    FFF_FloatTensorOfRank<2>:$grad_input,
    FFF_FloatTensorOfRank<3>:$grad_w1,
    FFF_FloatTensorOfRank<2>:$grad_b1,
    FFF_FloatTensorOfRank<3>:$grad_w2,
    FFF_FloatTensorOfRank<2>:$grad_b2
  );

  let assemblyFormat = [{
    $grad_output `,` $input `,` $node_w `,` $node_b `,` $w1 `,` $b1 `,` $w2
    attr-dict `:` type($grad_output) `,` type($input) `,` type($node_w) `,`
    type($node_b) `,` type($w1) `,` type($b1) `,` type($w2)
  }];

  let extraClassDeclaration = [{
    /// Number of routing nodes: 2^depth - 1.
    int64_t getNumRoutingNodes() { return getNumLeaves() - 1; }
    /// Number of MLP leaves: 2^depth.
    int64_t getNumLeaves() { return int64_t(1) << getDepth(); }
  }];

  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def FFF_FusionOp : FFF_Op<"fusion", [
    IsolatedFromAbove, SingleBlockImplicitTerminator<"YieldOp">,
    RecursiveMemoryEffects]> {
  let summary = "One fused unit: a norm, maybe a tree layer, and the "
                "pointwise work around them";
  let description = [{
    Groups a normalization with the elementwise ops that feed it (such as a
    residual add) and consume it (bias, scale/shift, activation, casts, a
    multiply by another tensor) into one unit that the GPU lowering turns
    into one kernel, as torch.compile fuses them. `fff-fuse-norms` forms
    these units; the CPU pipeline runs their bodies as written.

    A unit may also hold one tree layer (`fff.tree_ffn` or
    `fff.leaf_tree_ffn`) next to its norm: a transformer's whole FFN
    sublayer, pre-LN (`h + tree(norm(h))`: the tree reads the norm's
    result) or post-LN (`norm(h + tree(h))`: the norm reads, through
    pointwise ops, the tree's). Its kernel normalizes each token's row in
    the warp that then walks the tree for it, and applies the residual as
    it writes the output.

    A backward unit holds a norm's backward (`fff.layer_norm_grad` or
    `fff.rms_norm_grad`) with the elementwise ops that compute its `dy`
    (a dropout mask and scale, a cast) and that consume its `dx` (the
    residual stream's gradient added to it, `dh = dresidual + dx`; a cast),
    as AOTAutograd's backward graphs place them. It holds no tree layer.

    The body is isolated from above: its block arguments are the `inputs`,
    in order, and `fff.yield` returns the unit's results (every value the
    unit computes that is used outside it, such as the residual sum).

    Example:

    ```mlir
    %sum, %y = fff.fusion ins(%x, %res, %g : tensor<?x768xf32>, tensor<?x768xf32>, tensor<768xf32>) {
    ^bb0(%a: tensor<?x768xf32>, %b: tensor<?x768xf32>, %gamma: tensor<768xf32>):
      %s = arith.addf %a, %b : tensor<?x768xf32>
      %n = fff.rms_norm %s scale(%gamma : tensor<768xf32>) : tensor<?x768xf32>
      fff.yield %s, %n : tensor<?x768xf32>, tensor<?x768xf32>
    } -> tensor<?x768xf32>, tensor<?x768xf32>
    ```
  }];

  let arguments = (ins Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);

  let assemblyFormat = [{
    (`ins` `(` $inputs^ `:` type($inputs) `)`)? $body attr-dict
    (`->` type($results)^)?
  }];

  let extraClassDeclaration = [{
    /// The one normalization in the unit, or in a backward unit the one
    /// norm backward.
    ::mlir::Operation *getNorm();
    /// Whether the unit's norm is a norm backward.
    bool isBackward();
    /// The unit's tree layer, or null.
    ::mlir::Operation *getTreeLayer();
  }];

  let hasVerifier = 1;
}

def FFF_YieldOp : FFF_Op<"yield", [
    Pure, Terminator, ReturnLike, HasParent<"FusionOp">]> {
  let summary = "Returns a fused unit's results";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ /* nothing to yield */ }]>];
}

#endif // FFF_DIALECT_FFF_IR_FFFOPS_TD

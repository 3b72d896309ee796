//===- FFFDialect.td - fff dialect definition -------------*- tablegen -*-===//
//
// The fff dialect: normalizations and tree-structured conditional feedforward
// layers as first-class ops.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_DIALECT_FFF_IR_FFFDIALECT_TD
#define FFF_DIALECT_FFF_IR_FFFDIALECT_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

def FFF_Dialect : Dialect {
  let name = "fff";
  let summary = "Normalizations and fast (tree-structured) feedforward layers";
  let description = [{
    The `fff` dialect gives compilers two families of ML operations as
    first-class IR so that they can be fused and lowered to fast kernels:

    * normalizations: `fff.layer_norm` and `fff.rms_norm`;
    * tree-structured conditional feedforward layers: `fff.tree_ffn`
      (UltraFastBERT's "fast feedforward", where each token walks one
      root-to-leaf path of a binary tree of neurons) and `fff.leaf_tree_ffn`
      (the original FFF, where a tree of routing hyperplanes picks one small
      MLP leaf per token).

    All ops work on ranked tensors of `f32`, `f16` or `bf16`. Computation is
    defined in `f32` and results are cast back to the input element type.
    Leading (batch) dimensions may be dynamic.
  }];
  let cppNamespace = "::fff";
  let useDefaultAttributePrinterParser = 1;
}

//===----------------------------------------------------------------------===//
// Enums and attributes
//===----------------------------------------------------------------------===//

def FFF_Activation : I32EnumAttr<"Activation", "pointwise activation function", [
    I32EnumAttrCase<"gelu", 0>,
    I32EnumAttrCase<"gelu_tanh", 1>,
    I32EnumAttrCase<"relu", 2>,
    I32EnumAttrCase<"silu", 3>,
    I32EnumAttrCase<"identity", 4>
  ]> {
  let cppNamespace = "::fff";
  let genSpecializedAttr = 0;
}

def FFF_ActivationAttr : EnumAttr<FFF_Dialect, FFF_Activation, "activation"> {
  let summary = "activation function: gelu, gelu_tanh, relu, silu or identity";
  let description = [{
    `gelu` is the exact (erf) GELU, `gelu_tanh` its tanh approximation,
    `silu` is `x * sigmoid(x)`, `identity` leaves the value unchanged.
  }];
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Base classes and type constraints
//===----------------------------------------------------------------------===//

class FFF_Op<string mnemonic, list<Trait> traits = []>
    : Op<FFF_Dialect, mnemonic, traits>;

// Element types that fff ops accept on their data operands.
def FFF_Float : AnyTypeOf<[F32, F16, BF16], "f32, f16 or bf16">;

def FFF_FloatTensor : RankedTensorOf<[F32, F16, BF16]>;
def FFF_F32Tensor : RankedTensorOf<[F32]>;

class FFF_FloatTensorOfRank<int rank>
    : TensorRankOf<[F32, F16, BF16], [rank]>;

#endif // FFF_DIALECT_FFF_IR_FFFDIALECT_TD

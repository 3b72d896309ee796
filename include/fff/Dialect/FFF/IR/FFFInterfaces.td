//===- FFFInterfaces.td - fff op interfaces ----------------*- tablegen -*-===//

#ifndef FFF_DIALECT_FFF_IR_FFFINTERFACES_TD
#define FFF_DIALECT_FFF_IR_FFFINTERFACES_TD

include "mlir/IR/OpBase.td"

def FFF_ShapeContractOpInterface : OpInterface<"ShapeContractOpInterface"> {
  let description = [{
    An op whose operand extents are tied together, e.g. by a shared hidden
    size or by an attribute such as a tree's depth. The op's verifier checks
    the contract on static extents, and `fff-insert-shape-checks` checks the
    dynamic ones at run time, so that mismatched inputs get an error rather
    than a wrong answer or an out-of-bounds read.
  }];
  let cppNamespace = "::fff";
  let methods = [
    InterfaceMethod<[{
        Returns the rules that tie the extents of the op's operands together.
      }],
      "::fff::ShapeContract", "getShapeContract">,
  ];
}

#endif // FFF_DIALECT_FFF_IR_FFFINTERFACES_TD

//===- Activation.cpp - scalar IR for fff activations -----------*- C++ -*-===//

#include "fff/Dialect/FFF/Utils/Activation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;

Value fff::buildActivation(OpBuilder &builder, Location loc,
                           Activation activation, Value x) {
  auto constant = [&](double value) -> Value {
    Type type = x.getType();
    auto elementType = cast<FloatType>(getElementTypeOrSelf(type));
    TypedAttr attr = builder.getFloatAttr(elementType, value);
    if (auto shaped = dyn_cast<ShapedType>(type))
      attr = SplatElementsAttr::get(shaped, attr);
    return arith::ConstantOp::create(builder, loc, attr);
  };
  auto mul = [&](Value a, Value b) -> Value {
    return arith::MulFOp::create(builder, loc, a, b);
  };
  auto add = [&](Value a, Value b) -> Value {
    return arith::AddFOp::create(builder, loc, a, b);
  };

  switch (activation) {
  case Activation::identity:
    return x;
  case Activation::relu:
    // maximumf, unlike maxnumf, propagates NaN as torch.relu does.
    return arith::MaximumFOp::create(builder, loc, x, constant(0.0));
  case Activation::gelu: {
    // 0.5 * x * (1 + erf(x / sqrt(2)))
    Value erf = math::ErfOp::create(builder, loc, mul(x, constant(M_SQRT1_2)));
    return mul(mul(constant(0.5), x), add(constant(1.0), erf));
  }
  case Activation::gelu_tanh: {
    // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    Value cube = mul(mul(x, x), x);
    Value inner = mul(constant(std::sqrt(2.0 / M_PI)),
                      add(x, mul(constant(0.044715), cube)));
    Value tanh = math::TanhOp::create(builder, loc, inner);
    return mul(mul(constant(0.5), x), add(constant(1.0), tanh));
  }
  case Activation::silu: {
    // x * sigmoid(x) = x / (1 + exp(-x))
    Value exp = math::ExpOp::create(builder, loc,
                                    arith::NegFOp::create(builder, loc, x));
    return arith::DivFOp::create(builder, loc, x, add(constant(1.0), exp));
  }
  }
  llvm_unreachable("unknown fff activation");
}

//===- Activation.cpp - scalar IR for fff activations -----------*- C++ -*-===//

#include "fff/Dialect/FFF/Utils/Activation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;

namespace {

/// Constants and arithmetic of `x`'s type (a scalar or a vector).
struct ScalarArith {
  OpBuilder &builder;
  Location loc;
  Type type;

  Value constant(double value) const {
    auto elementType = cast<FloatType>(getElementTypeOrSelf(type));
    TypedAttr attr = builder.getFloatAttr(elementType, value);
    if (auto shaped = dyn_cast<ShapedType>(type))
      attr = SplatElementsAttr::get(shaped, attr);
    return arith::ConstantOp::create(builder, loc, attr);
  }
  Value mul(Value a, Value b) const {
    return arith::MulFOp::create(builder, loc, a, b);
  }
  Value add(Value a, Value b) const {
    return arith::AddFOp::create(builder, loc, a, b);
  }
  Value sub(Value a, Value b) const {
    return arith::SubFOp::create(builder, loc, a, b);
  }
};

} // namespace

Value fff::buildActivation(OpBuilder &builder, Location loc,
                           Activation activation, Value x) {
  ScalarArith ops{builder, loc, x.getType()};
  auto constant = [&](double value) { return ops.constant(value); };
  auto mul = [&](Value a, Value b) { return ops.mul(a, b); };
  auto add = [&](Value a, Value b) { return ops.add(a, b); };

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

Value fff::buildActivationSlope(OpBuilder &builder, Location loc,
                                Activation activation, Value x) {
  ScalarArith ops{builder, loc, x.getType()};
  auto constant = [&](double value) { return ops.constant(value); };
  auto mul = [&](Value a, Value b) { return ops.mul(a, b); };
  auto add = [&](Value a, Value b) { return ops.add(a, b); };
  auto sub = [&](Value a, Value b) { return ops.sub(a, b); };

  switch (activation) {
  case Activation::identity:
    return constant(1.0);
  case Activation::relu: {
    // 1 where x > 0, else 0 (at 0 and for NaN too), as torch's
    // threshold_backward.
    Value positive = arith::CmpFOp::create(
        builder, loc, arith::CmpFPredicate::OGT, x, constant(0.0));
    return arith::SelectOp::create(builder, loc, positive, constant(1.0),
                                   constant(0.0));
  }
  case Activation::gelu: {
    // Phi(x) + x * phi(x): 0.5 * (1 + erf(x / sqrt(2)))
    //                      + x * exp(-x^2 / 2) / sqrt(2 pi)
    Value erf = math::ErfOp::create(builder, loc, mul(x, constant(M_SQRT1_2)));
    Value cdf = mul(constant(0.5), add(constant(1.0), erf));
    Value density =
        math::ExpOp::create(builder, loc, mul(constant(-0.5), mul(x, x)));
    return add(cdf,
               mul(x, mul(constant(0.5 * M_2_SQRTPI * M_SQRT1_2), density)));
  }
  case Activation::gelu_tanh: {
    // With t = tanh(sqrt(2/pi) * (x + 0.044715 * x^3)):
    // 0.5 * (1 + t) + 0.5 * x * (1 - t^2) * sqrt(2/pi) * (1 + 3 * 0.044715 *
    // x^2)
    Value square = mul(x, x);
    Value scale = constant(std::sqrt(2.0 / M_PI));
    Value inner = mul(scale, add(x, mul(constant(0.044715), mul(square, x))));
    Value t = math::TanhOp::create(builder, loc, inner);
    Value innerSlope =
        mul(scale, add(constant(1.0), mul(constant(3 * 0.044715), square)));
    Value tanhSlope = sub(constant(1.0), mul(t, t));
    return add(mul(constant(0.5), add(constant(1.0), t)),
               mul(mul(constant(0.5), x), mul(tanhSlope, innerSlope)));
  }
  case Activation::silu: {
    // s * (1 + x * (1 - s)), s = sigmoid(x) = 1 / (1 + exp(-x))
    Value exp = math::ExpOp::create(builder, loc,
                                    arith::NegFOp::create(builder, loc, x));
    Value s = arith::DivFOp::create(builder, loc, constant(1.0),
                                    add(constant(1.0), exp));
    return mul(s, add(constant(1.0), mul(x, sub(constant(1.0), s))));
  }
  }
  llvm_unreachable("unknown fff activation");
}

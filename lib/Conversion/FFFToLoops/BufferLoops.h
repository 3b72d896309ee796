//===- BufferLoops.h - scalar loops over buffers ----------------*- C++ -*-===//
//
// What convert-fff-to-loops' lowerings of the tree ops and their gradients
// share: f32 scalar helpers, and a builder of scf loop nests over buffers
// (each row's path through a tree is data dependent, so these ops are
// loops, not linalg ops).
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOLOOPS_BUFFERLOOPS_H
#define FFF_LIB_CONVERSION_FFFTOLOOPS_BUFFERLOOPS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace fff::loops {

// Spelled as in the lowerings that include this (mlir's names, within
// fff::loops only).
using namespace mlir;

inline Value f32Constant(ImplicitLocOpBuilder &b, double value) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(value));
}

/// acc + value for a reduction whose order the op leaves unspecified.
/// `reassoc` lets LLVM vectorize the loop (the GPU kernels reduce in a tree
/// order anyway); the numeric tests hold the result to f32 accuracy.
inline Value accumulate(ImplicitLocOpBuilder &b, Value acc, Value value) {
  return arith::AddFOp::create(b, acc, value, arith::FastMathFlags::reassoc);
}

/// Widens an f16/bf16 scalar to f32; f32 passes through.
inline Value toF32(ImplicitLocOpBuilder &b, Value value) {
  if (value.getType().isF32())
    return value;
  return arith::ExtFOp::create(b, b.getF32Type(), value);
}

/// Narrows an f32 scalar to `type` (round to nearest even).
inline Value fromF32(ImplicitLocOpBuilder &b, Value value, Type type) {
  if (type.isF32())
    return value;
  return arith::TruncFOp::create(b, type, value);
}

/// `prefix` followed by `last`: the indices of a row's element.
inline SmallVector<Value> rowElement(ValueRange prefix, Value last) {
  SmallVector<Value> indices(prefix);
  indices.push_back(last);
  return indices;
}

/// Emits the scalar loop nests of the tree ops over buffers.
class BufferLoopBuilder {
public:
  explicit BufferLoopBuilder(ImplicitLocOpBuilder &b) : b(b) {}

  Value index(int64_t value) {
    return arith::ConstantIndexOp::create(b, value);
  }

  /// A read-only view of `tensor` as a buffer; null stays null.
  Value buffer(Value tensor) {
    if (!tensor)
      return Value();
    auto type = cast<RankedTensorType>(tensor.getType());
    auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
    return bufferization::ToBufferOp::create(b, memrefType, tensor,
                                             /*read_only=*/true);
  }

  Value dim(Value buffer, int64_t dim) {
    return memref::DimOp::create(b, buffer, dim);
  }

  /// buffer[indices], widened to f32.
  Value load(Value buffer, ValueRange indices) {
    return toF32(b, memref::LoadOp::create(b, buffer, indices));
  }

  /// `for iv in [0, upper)`, threading `inits` through `body`, which returns
  /// the next values. Returns the final values.
  SmallVector<Value>
  loop(Value upper, ValueRange inits,
       function_ref<SmallVector<Value>(Value iv, ValueRange carried)> body) {
    auto forOp = scf::ForOp::create(
        b, index(0), upper, index(1), inits,
        [&](OpBuilder &nested, Location, Value iv, ValueRange carried) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(),
                              nested.getInsertionPoint());
          scf::YieldOp::create(b, body(iv, carried));
        });
    return llvm::to_vector_of<Value>(forOp.getResults());
  }

  void loop(Value upper, function_ref<void(Value iv)> body) {
    loop(upper, {}, [&](Value iv, ValueRange) {
      body(iv);
      return SmallVector<Value>{};
    });
  }

  /// `for iv in [lower, upper)`.
  void loopBetween(Value lower, Value upper, function_ref<void(Value iv)> body) {
    scf::ForOp::create(b, lower, upper, index(1), ValueRange{},
                       [&](OpBuilder &nested, Location, Value iv, ValueRange) {
                         OpBuilder::InsertionGuard guard(b);
                         b.setInsertionPoint(nested.getInsertionBlock(),
                                             nested.getInsertionPoint());
                         body(iv);
                         scf::YieldOp::create(b);
                       });
  }

  /// sum over i in [0, upper) of lhs(i) * rhs(i), in f32.
  Value dot(Value upper, function_ref<Value(Value)> lhs,
            function_ref<Value(Value)> rhs) {
    return loop(upper, f32Constant(b, 0.0), [&](Value i, ValueRange acc) {
      Value product = arith::MulFOp::create(b, lhs(i), rhs(i));
      return SmallVector<Value>{accumulate(b, acc[0], product)};
    })[0];
  }

  /// acc[row, j] += scale * vector(j) for j in [0, size).
  void accumulateRow(Value acc, Value row, Value size, Value scale,
                     function_ref<Value(Value)> vector) {
    loop(size, [&](Value j) {
      Value old = memref::LoadOp::create(b, acc, ValueRange{row, j});
      Value update = arith::MulFOp::create(b, scale, vector(j));
      memref::StoreOp::create(b, arith::AddFOp::create(b, old, update), acc,
                              ValueRange{row, j});
    });
  }

  /// 2 * node + 1 + (goRight ? 1 : 0): the child a routing decision picks.
  Value child(Value node, Value goRight) {
    Value twice = arith::MulIOp::create(b, node, index(2));
    Value right = arith::IndexCastOp::create(
        b, b.getIndexType(),
        arith::ExtUIOp::create(b, b.getI64Type(), goRight));
    return arith::AddIOp::create(b, arith::AddIOp::create(b, twice, index(1)),
                                 right);
  }

  /// Allocates a buffer shaped like `resultType` with `elementType`; `sizes`
  /// gives every extent (the dynamic ones are read from it). Buffers
  /// allocated here are freed by the buffer deallocation pipeline that runs
  /// after bufferization, which rejects explicit deallocations.
  /// With `alignment`, the buffer starts on a multiple of it (bytes).
  Value alloc(RankedTensorType resultType, Type elementType, ValueRange sizes,
              std::optional<uint64_t> alignment = std::nullopt) {
    SmallVector<Value> dynamicSizes;
    for (auto [extent, size] : llvm::zip(resultType.getShape(), sizes))
      if (ShapedType::isDynamic(extent))
        dynamicSizes.push_back(size);
    return memref::AllocOp::create(
        b, MemRefType::get(resultType.getShape(), elementType), dynamicSizes,
        alignment ? b.getI64IntegerAttr(*alignment) : IntegerAttr());
  }

  Value allocMatrix(RankedTensorType resultType, Type elementType, Value rows,
                    Value cols) {
    return alloc(resultType, elementType, {rows, cols});
  }

  /// A scratch matrix of `rows` x `cols` elements of `elementType`.
  Value allocScratchMatrix(Type elementType, Value rows, Value cols) {
    return memref::AllocOp::create(
        b,
        MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                        elementType),
        ValueRange{rows, cols});
  }

  /// A scratch buffer of `size` elements of `elementType`.
  Value allocVector(Type elementType, Value size) {
    return memref::AllocOp::create(
        b, MemRefType::get({ShapedType::kDynamic}, elementType),
        ValueRange{size});
  }

  /// Calls `body` with the indices of every element of a `sizes` index
  /// space, in row-major order.
  void loopNest(ValueRange sizes, function_ref<void(ValueRange)> body,
                SmallVector<Value> indices = {}) {
    if (indices.size() == sizes.size())
      return body(indices);
    loop(sizes[indices.size()], [&](Value iv) {
      SmallVector<Value> inner = indices;
      inner.push_back(iv);
      loopNest(sizes, body, inner);
    });
  }

  /// Returns the f32 accumulator as a tensor of `resultType` (extents
  /// `sizes`), narrowing it into a fresh buffer first for f16/bf16.
  Value finish(Value acc, RankedTensorType resultType, ValueRange sizes) {
    Value result = acc;
    Type elementType = resultType.getElementType();
    if (elementType != cast<MemRefType>(acc.getType()).getElementType()) {
      result = alloc(resultType, elementType, sizes);
      loopNest(sizes, [&](ValueRange at) {
        Value value = memref::LoadOp::create(b, acc, at);
        memref::StoreOp::create(b, fromF32(b, value, elementType), result, at);
      });
    }
    return bufferization::ToTensorOp::create(b, resultType, result,
                                             /*restrict=*/true,
                                             /*writable=*/true);
  }

  Value finish(Value acc, RankedTensorType resultType, Value rows, Value cols) {
    return finish(acc, resultType, ValueRange{rows, cols});
  }

private:
  ImplicitLocOpBuilder &b;
};

} // namespace fff::loops

#endif // FFF_LIB_CONVERSION_FFFTOLOOPS_BUFFERLOOPS_H

//===- CPUVectorShape.cpp - the vectors CPU loops fill ----------*- C++ -*-===//

#include "fff/Conversion/FFFToVector/CPUVectorShape.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>

using namespace mlir;

int64_t fff::hostVectorBits() {
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  if (features.lookup("avx512f"))
    return 512;
  if (features.lookup("avx2"))
    return 256;
  return 128;
}

LogicalResult fff::checkVectorBits(Operation *op, int64_t vectorBits) {
  if (vectorBits == 0 || vectorBits == 128 || vectorBits == 256 ||
      vectorBits == 512)
    return success();
  return op->emitError()
         << "vector-bits must be 0 (this host's), 128, 256 or 512, not "
         << vectorBits;
}

fff::CPUVectorShape fff::selectCPUVectorShape(std::optional<int64_t> rowSize,
                                              int64_t vectorBits) {
  CPUVectorShape shape;
  shape.vectorBits = vectorBits > 0 ? vectorBits : hostVectorBits();
  shape.lanes = shape.vectorBits / 32;
  // Four partial sums cover the 4-cycle latency of a vector add or FMA
  // issued once a cycle; a short row gets no more than it has vectors to
  // fill.
  constexpr int64_t kLatencyHidingAccumulators = 4;
  shape.accumulators = kLatencyHidingAccumulators;
  if (rowSize)
    shape.accumulators = std::clamp<int64_t>(*rowSize / shape.lanes, 1,
                                             kLatencyHidingAccumulators);
  return shape;
}

void fff::CPUVectorShape::appendAttrs(
    Builder &b, SmallVectorImpl<NamedAttribute> &attrs) const {
  attrs.push_back(
      b.getNamedAttr("vector_bits", b.getI64IntegerAttr(vectorBits)));
  attrs.push_back(b.getNamedAttr("lanes", b.getI64IntegerAttr(lanes)));
  attrs.push_back(
      b.getNamedAttr("accumulators", b.getI64IntegerAttr(accumulators)));
}

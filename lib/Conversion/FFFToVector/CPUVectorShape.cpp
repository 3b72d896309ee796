//===- CPUVectorShape.cpp - the vectors CPU loops fill ----------*- C++ -*-===//

#include "fff/Conversion/FFFToVector/CPUVectorShape.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

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

int64_t fff::hostMinStreamedBytes() {
  bool x86 = llvm::Triple(llvm::sys::getProcessTriple()).isX86();
  return x86 ? int64_t(32) << 20 : 0;
}

bool fff::hostHasAVX512Bf16() {
  return llvm::sys::getHostCPUFeatures().lookup("avx512bf16");
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
                                              const CPUTarget &target) {
  CPUVectorShape shape;
  shape.vectorBits =
      target.vectorBits > 0 ? target.vectorBits : hostVectorBits();
  shape.lanes = shape.vectorBits / 32;
  shape.vectorRegisters = shape.vectorBits == 512 ? 32 : 16;
  // Four partial sums cover the 4-cycle latency of a vector add or FMA
  // issued once a cycle; a short row gets no more than it has vectors to
  // fill.
  constexpr int64_t kLatencyHidingAccumulators = 4;
  shape.accumulators = kLatencyHidingAccumulators;
  if (rowSize)
    shape.accumulators = std::clamp<int64_t>(*rowSize / shape.lanes, 1,
                                             kLatencyHidingAccumulators);
  // vcvtneps2bf16 and the check for NaNs and subnormals are fewer
  // operations than the integer rounding and its packing; the instruction
  // takes 8 or 16 lanes. A bf16 RMSNorm of 4096x4096 took 3.83-3.88 ms on
  // one core so, against 4.18-4.49 ms; one of 4096x768, which the caches
  // bound, 0.65 ms either way.
  shape.avx512Bf16 = !target.integerBf16 &&
                     (shape.lanes == 8 || shape.lanes == 16) &&
                     hostHasAVX512Bf16();
  return shape;
}

void fff::CPUVectorShape::appendAttrs(
    Builder &b, SmallVectorImpl<NamedAttribute> &attrs) const {
  attrs.push_back(
      b.getNamedAttr("vector_bits", b.getI64IntegerAttr(vectorBits)));
  attrs.push_back(b.getNamedAttr("lanes", b.getI64IntegerAttr(lanes)));
  attrs.push_back(
      b.getNamedAttr("accumulators", b.getI64IntegerAttr(accumulators)));
  attrs.push_back(b.getNamedAttr(
      "bf16_rounding", b.getStringAttr(avx512Bf16 ? "avx512bf16" : "integer")));
}

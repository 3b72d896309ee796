//===- LaneEmitter.cpp - per-lane kernel code, for a GPU or its twin ------===//

#include "LaneEmitter.h"

#include "fff/Conversion/FFFToGPU/KernelStrategy.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace fff;

void LaneEmitter::useGPULanes(Value lane, Value partials) {
  gpuLane = lane;
  sharedPartials = partials;
}

void LaneEmitter::useTwinLanes() {
  auto buffer =
      MemRefType::get({std::max<int64_t>(lanes, kWarpSize)}, b.getF32Type());
  twinBuffers = {memref::AllocaOp::create(b, buffer),
                 memref::AllocaOp::create(b, buffer)};
}

void LaneEmitter::forEachLane(function_ref<void(Value lane)> body) {
  if (onGPU())
    return body(gpuLane);
  auto loop = scf::ForOp::create(b, index(0), index(lanes), index(1));
  inside(loop.getRegion(), [&] { body(loop.getInductionVar()); });
}

Value LaneEmitter::groupSum(function_ref<Value(Value lane)> partialOf) {
  return onGPU() ? gpuGroupSum(partialOf(gpuLane)) : twinGroupSum(partialOf);
}

SmallVector<Value> LaneEmitter::groupSums(
    int64_t count, function_ref<SmallVector<Value>(Value lane)> partialsOf) {
  SmallVector<Value> sums;
  if (!onGPU()) {
    for (int64_t i = 0; i < count; ++i)
      sums.push_back(
          twinGroupSum([&](Value lane) { return partialsOf(lane)[i]; }));
    return sums;
  }
  sums = partialsOf(gpuLane);
  if (lanes != kWarpSize) {
    for (Value &sum : sums)
      sum = gpuGroupSum(sum);
    return sums;
  }
  for (int32_t offset = kWarpSize / 2; offset > 0; offset /= 2)
    for (Value &sum : sums)
      sum = add(sum, gpu::ShuffleOp::create(b, sum, offset, kWarpSize,
                                            gpu::ShuffleMode::XOR)
                         .getShuffleResult());
  return sums;
}

Value LaneEmitter::gpuWarpSum(Value value) {
  for (int32_t offset = kWarpSize / 2; offset > 0; offset /= 2) {
    Value other = gpu::ShuffleOp::create(b, value, offset, kWarpSize,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    value = add(value, other);
  }
  return value;
}

Value LaneEmitter::gpuGroupSum(Value value) {
  value = gpuWarpSum(value);
  if (lanes == kWarpSize)
    return value;
  // Each warp publishes its partial sum; then every warp reads all of them
  // and reduces them again with shuffles, so all threads end up with the
  // total without a second broadcast through shared memory.
  Value warpSize = index(kWarpSize);
  Value laneInWarp = arith::RemUIOp::create(b, gpuLane, warpSize);
  Value warp = arith::DivUIOp::create(b, gpuLane, warpSize);
  Value isLeader =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, laneInWarp, index(0));
  inside(scf::IfOp::create(b, isLeader).getThenRegion(),
         [&] { memref::StoreOp::create(b, value, sharedPartials, warp); });
  gpu::BarrierOp::create(b);
  Value hasPartial = arith::CmpIOp::create(
      b, arith::CmpIPredicate::ult, laneInWarp, index(lanes / kWarpSize));
  auto read = scf::IfOp::create(b, b.getF32Type(), hasPartial,
                                /*addThenBlock=*/true, /*addElseBlock=*/true);
  inside(read.getThenRegion(), [&] {
    scf::YieldOp::create(
        b, ValueRange{memref::LoadOp::create(b, sharedPartials, laneInWarp)});
  });
  inside(read.getElseRegion(),
         [&] { scf::YieldOp::create(b, ValueRange{f32(0.0)}); });
  // The next reduction reuses the buffer only after everyone has read it.
  gpu::BarrierOp::create(b);
  return gpuWarpSum(read.getResult(0));
}

/// The GPU's reduction replayed on a buffer: the xor butterfly within each
/// warp (lane i adds lane i^offset's value, as a shuffle does), then, for
/// several warps, the butterfly over the warps' partials.
Value LaneEmitter::twinGroupSum(function_ref<Value(Value lane)> partialOf) {
  Value current = twinBuffers[0], next = twinBuffers[1];
  forEachLane([&](Value lane) {
    memref::StoreOp::create(b, partialOf(lane), current, lane);
  });
  auto butterfly = [&](int64_t count) {
    for (int64_t offset = kWarpSize / 2; offset > 0; offset /= 2) {
      auto loop = scf::ForOp::create(b, index(0), index(count), index(1));
      inside(loop.getRegion(), [&] {
        Value lane = loop.getInductionVar();
        Value partner = arith::XOrIOp::create(b, lane, index(offset));
        Value mine = memref::LoadOp::create(b, current, lane);
        Value theirs = memref::LoadOp::create(b, current, partner);
        memref::StoreOp::create(b, add(mine, theirs), next, lane);
      });
      std::swap(current, next);
    }
  };
  butterfly(lanes);
  if (lanes > kWarpSize) {
    int64_t warps = lanes / kWarpSize;
    auto gather = scf::ForOp::create(b, index(0), index(kWarpSize), index(1));
    inside(gather.getRegion(), [&] {
      Value lane = gather.getInductionVar();
      Value hasPartial = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                               lane, index(warps));
      Value source = arith::MinUIOp::create(
          b, arith::MulIOp::create(b, lane, index(kWarpSize)),
          index(lanes - kWarpSize));
      Value partial = arith::SelectOp::create(
          b, hasPartial, memref::LoadOp::create(b, current, source), f32(0.0));
      memref::StoreOp::create(b, partial, next, lane);
    });
    std::swap(current, next);
    butterfly(kWarpSize);
  }
  return memref::LoadOp::create(b, current, index(0));
}

Value LaneEmitter::index(int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}

Value LaneEmitter::f32(double v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
}

Value LaneEmitter::add(Value x, Value y) {
  return arith::AddFOp::create(b, x, y);
}

Value LaneEmitter::mul(Value x, Value y) {
  return arith::MulFOp::create(b, x, y);
}

Value LaneEmitter::sum(Value vector) {
  return vector::ReductionOp::create(b, vector::CombiningKind::ADD, vector);
}

/// On the GPU, math.rsqrt and llvm.sqrt both become libdevice calls in the
/// NVVM conversion, which only link where the CUDA toolkit is found at
/// compile time; the NVVM intrinsic (sqrt.rn.f32) needs nothing.
Value LaneEmitter::reciprocalSqrt(Value value) {
  Value root =
      onGPU() ? LLVM::CallIntrinsicOp::create(
                    b, b.getF32Type(), b.getStringAttr("llvm.nvvm.sqrt.rn.f"),
                    ValueRange{value})
                    .getResult(0)
              : math::SqrtOp::create(b, value).getResult();
  return arith::DivFOp::create(b, f32(1.0), root);
}

Value LaneEmitter::widen(Value value) {
  if (getElementTypeOrSelf(value.getType()).isF32())
    return value;
  Type f32Type = b.getF32Type();
  if (auto vector = dyn_cast<VectorType>(value.getType()))
    f32Type = vector.clone(f32Type);
  return arith::ExtFOp::create(b, f32Type, value);
}

void LaneEmitter::inside(Region &region, function_ref<void()> body) {
  OpBuilder::InsertionGuard guard(b);
  Block &block = region.front();
  if (block.mightHaveTerminator())
    b.setInsertionPoint(block.getTerminator());
  else
    b.setInsertionPointToEnd(&block);
  body();
}

Value fff::collapsedBuffer(ImplicitLocOpBuilder &b, Value tensor,
                           ArrayRef<ReassociationIndices> groups) {
  if (!tensor)
    return Value();
  auto type = cast<RankedTensorType>(tensor.getType());
  if (type.getRank() != int64_t(groups.size()))
    tensor = tensor::CollapseShapeOp::create(b, tensor, groups);
  auto collapsed = cast<RankedTensorType>(tensor.getType());
  return bufferization::ToBufferOp::create(
      b, MemRefType::get(collapsed.getShape(), collapsed.getElementType()),
      tensor, /*read_only=*/true);
}

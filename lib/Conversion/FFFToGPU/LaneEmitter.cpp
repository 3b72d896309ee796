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
  return onGPU() ? gpuGroupSums({partialOf(gpuLane)}).front()
                 : twinGroupSum(partialOf);
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
  return gpuGroupSums(partialsOf(gpuLane));
}

/// The xor butterfly over each warp, the sums' steps interleaved so that
/// their shuffles overlap.
SmallVector<Value> LaneEmitter::gpuWarpSums(ArrayRef<Value> values) {
  SmallVector<Value> sums(values);
  for (int32_t offset = kWarpSize / 2; offset > 0; offset /= 2)
    for (Value &sum : sums)
      sum = add(sum, gpu::ShuffleOp::create(b, sum, offset, kWarpSize,
                                            gpu::ShuffleMode::XOR)
                         .getShuffleResult());
  return sums;
}

SmallVector<Value> LaneEmitter::gpuGroupSums(ArrayRef<Value> values) {
  SmallVector<Value> sums = gpuWarpSums(values);
  if (lanes == kWarpSize)
    return sums;
  // Each warp publishes its partial sums; then every warp reads all of them
  // and reduces them again with shuffles, so all threads end up with the
  // totals without a second broadcast through shared memory. As many sums
  // as the 32 shared floats hold share one barrier pair.
  int64_t warps = lanes / kWarpSize;
  int64_t perRound = std::max<int64_t>(1, kWarpSize / warps);
  Value warpSize = index(kWarpSize);
  Value laneInWarp = arith::RemUIOp::create(b, gpuLane, warpSize);
  Value warp = arith::DivUIOp::create(b, gpuLane, warpSize);
  Value isLeader =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, laneInWarp, index(0));
  Value hasPartial = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                           laneInWarp, index(warps));
  SmallVector<Value> totals;
  for (size_t first = 0; first < sums.size(); first += perRound) {
    ArrayRef<Value> round =
        ArrayRef<Value>(sums).slice(first).take_front(perRound);
    inside(scf::IfOp::create(b, isLeader).getThenRegion(), [&] {
      for (auto [i, sum] : llvm::enumerate(round))
        memref::StoreOp::create(
            b, sum, sharedPartials,
            arith::AddIOp::create(b, warp, index(i * warps)).getResult());
    });
    gpu::BarrierOp::create(b);
    SmallVector<Type> types(round.size(), b.getF32Type());
    auto read = scf::IfOp::create(b, types, hasPartial,
                                  /*addThenBlock=*/true, /*addElseBlock=*/true);
    inside(read.getThenRegion(), [&] {
      SmallVector<Value> loaded;
      for (size_t i = 0; i < round.size(); ++i)
        loaded.push_back(memref::LoadOp::create(
            b, sharedPartials,
            arith::AddIOp::create(b, laneInWarp, index(i * warps))
                .getResult()));
      scf::YieldOp::create(b, loaded);
    });
    inside(read.getElseRegion(), [&] {
      scf::YieldOp::create(b, SmallVector<Value>(round.size(), f32(0.0)));
    });
    // The next reduction reuses the buffer only after everyone has read it.
    gpu::BarrierOp::create(b);
    llvm::append_range(totals,
                       gpuWarpSums(SmallVector<Value>(read.getResults())));
  }
  return totals;
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

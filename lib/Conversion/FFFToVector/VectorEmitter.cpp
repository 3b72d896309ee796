//===- VectorEmitter.cpp - CPU vector code over buffers ---------*- C++ -*-===//

#include "VectorEmitter.h"

#include "fff/Conversion/RowLoops.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/FloatingPointMode.h"

using namespace mlir;
using fff::BuildInside;

Value fff::VectorEmitter::reduce(
    Value n, int64_t accumulators,
    function_ref<Value(Value j, Value partial, Value mask)> accumulate) {
  return reduceEach(n, accumulators, 1,
                    [&](int64_t, Value j, Value partial, Value mask) {
                      return accumulate(j, partial, mask);
                    })
      .front();
}

SmallVector<Value> fff::VectorEmitter::reduceEach(
    Value n, int64_t accumulators, int64_t count,
    function_ref<Value(int64_t sum, Value j, Value partial, Value mask)>
        accumulate) {
  int64_t step = lanes * accumulators;
  Value stepEnd = roundDown(n, step);
  // Partial sum a of sum k is carried at k * accumulators + a.
  SmallVector<Value> zeroPartials(count * accumulators, zeros());
  auto unrolled = scf::ForOp::create(
      b, index(0), stepEnd, index(step), zeroPartials,
      [&](OpBuilder &nested, Location, Value j, ValueRange partials) {
        BuildInside inside(b, nested);
        SmallVector<Value> next;
        for (auto [slot, partial] : llvm::enumerate(partials)) {
          int64_t k = int64_t(slot) / accumulators;
          int64_t a = int64_t(slot) % accumulators;
          Value column = arith::AddIOp::create(b, j, index(a * lanes));
          next.push_back(accumulate(k, column, partial, Value()));
        }
        scf::YieldOp::create(b, next);
      });
  SmallVector<Value> totals;
  for (int64_t k = 0; k < count; ++k) {
    ValueRange partials =
        unrolled.getResults().slice(k * accumulators, accumulators);
    Value total = partials.front();
    for (Value partial : partials.drop_front())
      total = arith::AddFOp::create(b, total, partial);
    totals.push_back(total);
  }
  auto rest = scf::ForOp::create(
      b, stepEnd, n, index(lanes), totals,
      [&](OpBuilder &nested, Location, Value j, ValueRange partials) {
        BuildInside inside(b, nested);
        Value mask = tailMask(n, j);
        SmallVector<Value> next;
        for (auto [k, partial] : llvm::enumerate(partials))
          next.push_back(accumulate(int64_t(k), j, partial, mask));
        scf::YieldOp::create(b, next);
      });
  SmallVector<Value> sums;
  for (Value total : rest.getResults())
    sums.push_back(vector::ReductionOp::create(b, vector::CombiningKind::ADD,
                                               total, Value(),
                                               arith::FastMathFlags::reassoc));
  return sums;
}

void fff::VectorEmitter::forEachStep(
    Value n, int64_t step, function_ref<void(Value j)> whole,
    function_ref<void(Value j, Value mask)> rest) {
  Value stepEnd = roundDown(n, step);
  scf::ForOp::create(b, index(0), stepEnd, index(step), ValueRange{},
                     [&](OpBuilder &nested, Location, Value j, ValueRange) {
                       BuildInside inside(b, nested);
                       whole(j);
                       scf::YieldOp::create(b);
                     });
  scf::ForOp::create(b, stepEnd, n, index(lanes), ValueRange{},
                     [&](OpBuilder &nested, Location, Value j, ValueRange) {
                       BuildInside inside(b, nested);
                       rest(j, tailMask(n, j));
                       scf::YieldOp::create(b);
                     });
}

Value fff::VectorEmitter::alloc(ShapedType type, Type elementType,
                                function_ref<Value(int64_t dim)> extent) {
  SmallVector<Value> dynamicSizes;
  for (auto [dim, size] : llvm::enumerate(type.getShape()))
    if (ShapedType::isDynamic(size))
      dynamicSizes.push_back(extent(dim));
  return alloc(MemRefType::get(type.getShape(), elementType), dynamicSizes);
}

Value fff::VectorEmitter::alloc(MemRefType type, ValueRange dynamicSizes) {
  constexpr int64_t kCacheLineBytes = 64;
  return memref::AllocOp::create(b, type, dynamicSizes,
                                 b.getI64IntegerAttr(kCacheLineBytes));
}

Value fff::VectorEmitter::toTensor(Value buffer, Type type) {
  return bufferization::ToTensorOp::create(b, type, buffer,
                                           /*restrict=*/true,
                                           /*writable=*/true);
}

Value fff::VectorEmitter::narrow(Value value, Type elementType) {
  auto narrowType = VectorType::get({lanes}, elementType);
  auto rounded = [&]() -> Value {
    return arith::TruncFOp::create(b, narrowType, value);
  };
  if (!elementType.isBF16() || !avx512Bf16 ||
      bf16Rounding == Bf16Rounding::Integer)
    return rounded();
  Value converted =
      x86vector::CvtPackedF32ToBF16Op::create(b, narrowType, value);
  if (bf16Rounding == Bf16Rounding::Unchecked)
    return converted;
  // A branch, taken almost never, rather than both roundings every time.
  Value anySpecial = vector::ReductionOp::create(b, vector::CombiningKind::OR,
                                                 needsIntegerBf16(value));
  auto choice = scf::IfOp::create(
      b, anySpecial,
      [&](OpBuilder &nested, Location) {
        BuildInside inside(b, nested);
        scf::YieldOp::create(b, rounded());
      },
      [&](OpBuilder &nested, Location) {
        BuildInside inside(b, nested);
        scf::YieldOp::create(b, converted);
      });
  return choice.getResult(0);
}

Value fff::VectorEmitter::needsIntegerBf16(Value value) {
  // vcvtneps2bf16 rounds to nearest even, as arith.truncf does, but reads
  // subnormal inputs as zero and keeps a NaN's sign and payload, where
  // truncf gives the canonical NaN.
  //
  // x86's backend expands llvm.is.fpclass into five integer operations.
  // vfpclassps is one, and every CPU with AVX512-BF16 has it (AVX512-DQ).
  // A bf16 RMSNorm of 4096x768 under fff-run took 0.30-0.31 ms with it,
  // against 0.35-0.39 ms.
  StringRef fpclassName = lanes == 16  ? "llvm.x86.avx512.fpclass.ps.512"
                          : lanes == 8 ? "llvm.x86.avx512.fpclass.ps.256"
                                       : "";
  Type i32 = b.getI32Type();
  if (!fpclassName.empty())
    if (LLVM::LLVMFuncOp fpclass =
            intrinsic(fpclassName, maskVector, {f32Vector, i32})) {
      // vfpclassps's classes: quiet NaN, denormal, signalling NaN.
      constexpr int32_t kNanOrDenormal = 0x01 | 0x20 | 0x80;
      Value classes = arith::ConstantOp::create(
          b, i32, b.getI32IntegerAttr(kNanOrDenormal));
      return LLVM::CallOp::create(b, fpclass, ValueRange{value, classes})
          .getResult();
    }
  return LLVM::IsFPClass::create(b, maskVector, value,
                                 uint32_t(llvm::fcNan | llvm::fcSubnormal));
}

LLVM::LLVMFuncOp fff::VectorEmitter::intrinsic(StringRef name, Type result,
                                               ArrayRef<Type> parameters) {
  auto type = LLVM::LLVMFunctionType::get(result, parameters);
  // A user's module may hold the name already, as anything.
  if (Operation *existing = SymbolTable::lookupSymbolIn(module, name)) {
    auto function = dyn_cast<LLVM::LLVMFuncOp>(existing);
    return function && function.getFunctionType() == type ? function
                                                          : LLVM::LLVMFuncOp();
  }
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  return LLVM::LLVMFuncOp::create(b, name, type);
}

void fff::VectorEmitter::writeCheckedRow(
    Value n, Type elementType, function_ref<Value(Value j, Value mask)> write) {
  auto writeAll = [&] {
    forEachStep(
        n, lanes, [&](Value j) { write(j, Value()); },
        [&](Value j, Value mask) { write(j, mask); });
  };
  if (!elementType.isBF16() || !avx512Bf16 ||
      bf16Rounding != Bf16Rounding::CheckedVector)
    return writeAll();
  // Each vector adds one fpclass and one mask or, and no branch: a bf16
  // RMSNorm of 4096x768 took 0.29-0.30 ms, against 0.30-0.31 ms with a
  // branch per vector (LayerNorm 0.40-0.41 against 0.42 ms).
  Value stepEnd = roundDown(n, lanes);
  auto collect = [&](Value from, Value to, bool masked, Value special) {
    return scf::ForOp::create(
               b, from, to, index(lanes), ValueRange{special},
               [&](OpBuilder &nested, Location, Value j, ValueRange carried) {
                 BuildInside inside(b, nested);
                 Value mask = masked ? tailMask(n, j) : Value();
                 Value lanesToCheck = needsIntegerBf16(write(j, mask));
                 if (mask)
                   lanesToCheck = arith::AndIOp::create(b, lanesToCheck, mask);
                 scf::YieldOp::create(
                     b, ValueRange{arith::OrIOp::create(b, carried.front(),
                                                        lanesToCheck)});
               })
        .getResult(0);
  };
  bf16Rounding = Bf16Rounding::Unchecked;
  Value none = arith::ConstantOp::create(
      b, maskVector, DenseElementsAttr::get(maskVector, false));
  Value special = collect(stepEnd, n, /*masked=*/true,
                          collect(index(0), stepEnd, /*masked=*/false, none));
  Value anySpecial =
      vector::ReductionOp::create(b, vector::CombiningKind::OR, special);
  scf::IfOp::create(b, anySpecial, [&](OpBuilder &nested, Location) {
    BuildInside inside(b, nested);
    bf16Rounding = Bf16Rounding::Integer;
    writeAll();
    scf::YieldOp::create(b);
  });
  bf16Rounding = Bf16Rounding::CheckedVector;
}

Value fff::VectorEmitter::startsOnWholeVectors(Value buffer,
                                               Value rowElements) {
  int64_t elementBytes =
      cast<MemRefType>(buffer.getType()).getElementTypeBitWidth() / 8;
  Value vectorBytes = index(lanes * elementBytes);
  Value rowBytes = arith::MulIOp::create(b, rowElements, index(elementBytes));
  Value start = memref::ExtractAlignedPointerAsIndexOp::create(b, buffer);
  auto isWhole = [&](Value bytes) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                 arith::RemUIOp::create(b, bytes, vectorBytes),
                                 index(0));
  };
  return arith::AndIOp::create(b, isWhole(start), isWhole(rowBytes));
}

void fff::VectorEmitter::withStreamingStoresWhere(Value condition,
                                                  function_ref<void()> write) {
  scf::IfOp::create(
      b, condition,
      [&](OpBuilder &nested, Location) {
        BuildInside inside(b, nested);
        streamingStores = true;
        write();
        streamingStores = false;
        scf::YieldOp::create(b);
      },
      [&](OpBuilder &nested, Location) {
        BuildInside inside(b, nested);
        write();
        scf::YieldOp::create(b);
      });
}

LogicalResult fff::VectorEmitter::declareStreamingFence() {
  streamingFence = intrinsic("llvm.x86.sse.sfence",
                             LLVM::LLVMVoidType::get(b.getContext()), {});
  return success(bool(streamingFence));
}

void fff::VectorEmitter::fenceStreamingStores() {
  LLVM::CallOp::create(b, streamingFence, ValueRange{});
}

void fff::VectorEmitter::forLoop(Value lower, Value upper, int64_t step,
                                 function_ref<void(Value i)> body) {
  scf::ForOp::create(b, lower, upper, index(step), ValueRange{},
                     [&](OpBuilder &nested, Location, Value i, ValueRange) {
                       BuildInside inside(b, nested);
                       body(i);
                       scf::YieldOp::create(b);
                     });
}

//===- VectorEmitter.h - CPU vector code over buffers -----------*- C++ -*-===//
//
// What the CPU vector lowerings (norms and tree layers) share: constants,
// read-only views of tensors, and loads of `lanes` f32 values from buffers
// of any float element type, with masked tails. All arithmetic is in f32;
// 16-bit elements are widened as they are loaded, and results rounded as
// they are stored.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOVECTOR_VECTOREMITTER_H
#define FFF_LIB_CONVERSION_FFFTOVECTOR_VECTOREMITTER_H

#include "fff/Conversion/FFFToVector/CPUVectorShape.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace fff {

/// A static extent of `value`'s shaped type, or nullopt if dynamic.
inline std::optional<int64_t> staticExtent(mlir::Value value, int64_t dim) {
  int64_t extent =
      mlir::cast<mlir::ShapedType>(value.getType()).getDimSize(dim);
  if (mlir::ShapedType::isDynamic(extent))
    return std::nullopt;
  return extent;
}

class VectorEmitter {
public:
  VectorEmitter(mlir::ImplicitLocOpBuilder &b, const CPUVectorShape &shape)
      : b(b), lanes(shape.lanes), avx512Bf16(shape.avx512Bf16),
        f32Vector(mlir::VectorType::get({lanes}, b.getF32Type())),
        maskVector(mlir::VectorType::get({lanes}, b.getI1Type())),
        module(b.getInsertionBlock()
                   ->getParentOp()
                   ->getParentOfType<mlir::ModuleOp>()) {}

  mlir::Value index(int64_t value) {
    return mlir::arith::ConstantIndexOp::create(b, value);
  }

  mlir::Value f32(double value) {
    return mlir::arith::ConstantOp::create(b, b.getF32FloatAttr(value));
  }

  mlir::Value splat(mlir::Value scalar) {
    return mlir::vector::BroadcastOp::create(b, f32Vector, scalar);
  }

  mlir::Value zeros() { return splat(f32(0.0)); }

  /// A read-only buffer of `tensor`; null stays null.
  mlir::Value readBuffer(mlir::Value tensor) {
    if (!tensor)
      return mlir::Value();
    auto type = mlir::cast<mlir::RankedTensorType>(tensor.getType());
    return mlir::bufferization::ToBufferOp::create(
        b, mlir::MemRefType::get(type.getShape(), type.getElementType()),
        tensor, /*read_only=*/true);
  }

  /// The vector at `indices` of `buffer`, in its element type; under `mask`
  /// if given (masked-off lanes read as zero).
  mlir::Value loadRaw(mlir::Value buffer, mlir::ValueRange indices,
                      mlir::Value mask) {
    auto type = mlir::VectorType::get(
        {lanes},
        mlir::cast<mlir::MemRefType>(buffer.getType()).getElementType());
    if (!mask)
      return mlir::vector::LoadOp::create(b, type, buffer, indices);
    mlir::Value zero = mlir::arith::ConstantOp::create(
        b, type,
        mlir::DenseElementsAttr::get(type,
                                     b.getZeroAttr(type.getElementType())));
    return mlir::vector::MaskedLoadOp::create(b, type, buffer, indices, mask,
                                              zero);
  }

  /// `value` (a vector) in f32.
  mlir::Value widen(mlir::Value value) {
    if (mlir::cast<mlir::VectorType>(value.getType()).getElementType().isF32())
      return value;
    return mlir::arith::ExtFOp::create(b, f32Vector, value);
  }

  /// The vector at `indices` of `buffer`, in f32; under `mask` if given.
  mlir::Value load(mlir::Value buffer, mlir::ValueRange indices,
                   mlir::Value mask) {
    return widen(loadRaw(buffer, indices, mask));
  }

  /// Stores the vector `value`, an f32 one narrowed to `buffer`'s element
  /// type. While `streamingStores` is set, a whole vector is stored
  /// non-temporally (see streamingStores).
  void store(mlir::Value value, mlir::Value buffer, mlir::ValueRange indices,
             mlir::Value mask) {
    mlir::Type elementType =
        mlir::cast<mlir::MemRefType>(buffer.getType()).getElementType();
    if (mlir::cast<mlir::VectorType>(value.getType()).getElementType() !=
        elementType)
      value = narrow(value, elementType);
    if (mask)
      mlir::vector::MaskedStoreOp::create(b, buffer, indices, mask, value);
    else if (streamingStores)
      mlir::vector::StoreOp::create(
          b, value, buffer, indices, /*nontemporal=*/true,
          llvm::MaybeAlign(lanes * elementType.getIntOrFloatBitWidth() / 8));
    else
      mlir::vector::StoreOp::create(b, value, buffer, indices);
  }

  /// The f32 vector `value` rounded to `elementType` (f16 or bf16), as
  /// bf16Rounding says.
  mlir::Value narrow(mlir::Value value, mlir::Type elementType);

  /// How narrow() rounds to bf16 where the host has AVX512-BF16. The
  /// results are the same bits as arith.truncf's in every mode but
  /// `Unchecked`, whose caller checks them itself (writeCheckedRow).
  enum class Bf16Rounding {
    /// vcvtneps2bf16, unless the vector holds a NaN or a subnormal, which
    /// take arith.truncf.
    CheckedVector,
    /// vcvtneps2bf16 alone.
    Unchecked,
    /// arith.truncf alone.
    Integer,
  };
  Bf16Rounding bf16Rounding = Bf16Rounding::CheckedVector;

  /// Writes [0, n) of a row of `elementType` a vector at a time with
  /// `write(j, mask)`, which stores the f32 vector at column j with store()
  /// and returns it. Where bf16 is rounded with vcvtneps2bf16, the check
  /// for NaNs and subnormals is made once for the row rather than for each
  /// vector: the row is written unchecked while the lanes that needed
  /// arith.truncf are collected, and written again with arith.truncf if any
  /// did (so `write` is built twice).
  void writeCheckedRow(
      mlir::Value n, mlir::Type elementType,
      llvm::function_ref<mlir::Value(mlir::Value j, mlir::Value mask)> write);

  /// Declares, in the module, the fence that fenceStreamingStores calls;
  /// fails where the module holds its name as something else.
  mlir::LogicalResult declareStreamingFence();

  /// Orders the streaming stores issued so far before any later store of
  /// this thread, such as the one that tells another thread a row is done:
  /// x86's non-temporal stores are otherwise weakly ordered.
  void fenceStreamingStores();

  /// `write()` twice, under an scf.if on `condition`: with streamingStores
  /// set where it holds, else with ordinary stores. `write` fences the
  /// streaming stores it issues (fenceStreamingStores) before its thread's
  /// share of the work ends.
  void withStreamingStoresWhere(mlir::Value condition,
                                llvm::function_ref<void()> write);

  /// Whether whole vectors are stored non-temporally: written to memory
  /// without first reading their cache lines in, and without displacing
  /// other data from the caches. The caller guarantees that each such vector
  /// starts on a multiple of its own size, which x86's streaming stores
  /// require.
  bool streamingStores = false;

  /// Whether every whole vector of the rows of `rowElements` elements that
  /// `buffer` holds starts on a multiple of the vector's size, as streaming
  /// stores require: the buffer's start and each row's length are
  /// multiples of it.
  mlir::Value startsOnWholeVectors(mlir::Value buffer, mlir::Value rowElements);

  /// The lanes of the vector at column `j` that lie inside a row of `n`.
  mlir::Value tailMask(mlir::Value n, mlir::Value j) {
    return mlir::vector::CreateMaskOp::create(
        b, maskVector, mlir::ValueRange{mlir::arith::SubIOp::create(b, n, j)});
  }

  /// `n` rounded down to a multiple of `step`.
  mlir::Value roundDown(mlir::Value n, int64_t step) {
    return mlir::arith::MulIOp::create(
        b, mlir::arith::DivUIOp::create(b, n, index(step)), index(step));
  }

  int64_t getLanes() const { return lanes; }

  /// The sum over [0, n) that `accumulate(j, partial, mask)` builds up by
  /// folding in the vector at j (masked-off lanes must add nothing): over
  /// whole steps into `accumulators` independent partial sums, each add
  /// waiting only on the one that many vectors back; then, after the
  /// partial sums meet, a vector at a time, each under its tail mask.
  /// Returns the f32 total of the lanes.
  mlir::Value
  reduce(mlir::Value n, int64_t accumulators,
         llvm::function_ref<mlir::Value(mlir::Value j, mlir::Value partial,
                                        mlir::Value mask)>
             accumulate);

  /// `count` such sums over [0, n) in one loop, `accumulate(k, j, partial,
  /// mask)` folding into sum k; each is built in the same order `reduce`
  /// builds one, so it has the same bits. Independent sums interleaved
  /// keep more of the core busy when each one's result is waited for.
  llvm::SmallVector<mlir::Value> reduceEach(
      mlir::Value n, int64_t accumulators, int64_t count,
      llvm::function_ref<mlir::Value(int64_t sum, mlir::Value j,
                                     mlir::Value partial, mlir::Value mask)>
          accumulate);

  /// `whole(j)` for each whole step [j, j + step) of [0, n), then
  /// `rest(j, mask)` for each vector of what is left, under its tail mask.
  void
  forEachStep(mlir::Value n, int64_t step,
              llvm::function_ref<void(mlir::Value j)> whole,
              llvm::function_ref<void(mlir::Value j, mlir::Value mask)> rest);

  /// `for i in [lower, upper) step step` with nothing carried, `body(i)`
  /// built inside.
  void forLoop(mlir::Value lower, mlir::Value upper, int64_t step,
               llvm::function_ref<void(mlir::Value i)> body);

  /// A fresh buffer of `type`'s shape with element type `elementType`,
  /// whose dynamic extents `extent(dim)` gives.
  mlir::Value alloc(mlir::ShapedType type, mlir::Type elementType,
                    llvm::function_ref<mlir::Value(int64_t dim)> extent);

  /// A fresh buffer of `type` with extents `dynamicSizes`, starting on a
  /// cache line: a vector load or store that straddles two lines costs two,
  /// and malloc's large buffers start 16 bytes past one.
  mlir::Value alloc(mlir::MemRefType type, mlir::ValueRange dynamicSizes = {});

  /// `buffer` as the result tensor of `type` it holds.
  mlir::Value toTensor(mlir::Value buffer, mlir::Type type);

protected:
  /// The lanes of the f32 vector `value` that vcvtneps2bf16 would round
  /// differently from arith.truncf.
  mlir::Value needsIntegerBf16(mlir::Value value);

  /// LLVM's intrinsic `name`, declared in the module, to be called by its
  /// name; null where the module holds the name as anything else. A
  /// call rather than llvm.call_intrinsic: buffer deallocation, which runs
  /// later, accepts calls but no op whose memory effects are unknown.
  mlir::LLVM::LLVMFuncOp intrinsic(llvm::StringRef name, mlir::Type result,
                                   llvm::ArrayRef<mlir::Type> parameters);

  mlir::ImplicitLocOpBuilder &b;
  int64_t lanes;
  /// CPUVectorShape::avx512Bf16.
  bool avx512Bf16;
  mlir::VectorType f32Vector, maskVector;
  /// The module being rewritten, where intrinsics are declared.
  mlir::ModuleOp module;
  /// llvm.x86.sse.sfence, once declareStreamingFence has declared it.
  mlir::LLVM::LLVMFuncOp streamingFence;
};

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOVECTOR_VECTOREMITTER_H

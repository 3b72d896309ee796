//===- CheckInput.cpp - reject IR that upstream passes mishandle ----------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"

namespace fff {
#define GEN_PASS_DEF_CHECKINPUT
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// A `dim` op's constant index outside its operand's rank.
LogicalResult checkDimIndex(Operation *op, Value source, Value index) {
  auto type = dyn_cast<ShapedType>(source.getType());
  APInt constant;
  if (!type || !type.hasRank() ||
      !matchPattern(index, m_ConstantInt(&constant)))
    return success();
  int64_t value = constant.getSExtValue();
  if (value >= 0 && value < type.getRank())
    return success();
  return op->emitOpError() << "index " << value << " is out of range for rank "
                           << type.getRank();
}

/// A reshape's reassociation must name each dim of the expanded side once,
/// in order.
LogicalResult checkReassociation(Operation *op,
                                 ArrayRef<ReassociationIndices> groups,
                                 int64_t expandedRank) {
  int64_t next = 0;
  for (const ReassociationIndices &group : groups)
    for (int64_t dim : group)
      if (dim != next++)
        return op->emitOpError()
               << "reassociation names dim " << dim << " where dim " << next - 1
               << " of " << expandedRank << " is expected";
  if (next != expandedRank)
    return op->emitOpError() << "reassociation covers " << next << " of "
                             << expandedRank << " dims";
  return success();
}

/// An expand_shape's static output_shape entries and its result type must
/// agree on which extents are static.
template <typename ExpandOp> LogicalResult checkExpandShape(ExpandOp op) {
  ShapedType type = op.getResultType();
  if (failed(
          checkReassociation(op, op.getReassociationIndices(), type.getRank())))
    return failure();
  for (auto [dim, extent] : llvm::enumerate(op.getStaticOutputShape())) {
    if (ShapedType::isDynamic(extent) == type.isDynamicDim(dim))
      continue;
    return op.emitOpError()
           << "output_shape dim " << dim << " is "
           << (ShapedType::isDynamic(extent) ? "dynamic" : "static")
           << " but the result type's is not";
  }
  return success();
}

/// No tensor, memref or vector that fff compiles for holds more bytes than
/// this. Every size the pipelines derive from static extents (strategies,
/// launch sizes, shared-memory budgets, buffer sizes) is a product of such
/// a size and constants under 2^14, so with this bound none overflows.
constexpr int64_t kMaxValueBytesLog2 = 48;

/// Whether the static extents of `type` (its dynamic ones are known only
/// at run time, from buffers that exist) hold at most 2^48 bytes.
bool fitsInMemory(ShapedType type) {
  if (!type.hasRank())
    return true;
  Type element = type.getElementType();
  int64_t bytes =
      element.isIntOrFloat()
          ? std::max<int64_t>(1, element.getIntOrFloatBitWidth() / 8)
          : 8;
  std::optional<int64_t> total = bytes;
  for (int64_t extent : type.getShape()) {
    if (ShapedType::isDynamic(extent))
      continue;
    total = llvm::checkedMul(*total, extent);
    if (!total || *total > (int64_t(1) << kMaxValueBytesLog2))
      return false;
  }
  return true;
}

/// Why fff's pipelines do not take `type` (in any position: a value, a
/// tensor's, memref's or vector's elements), or "" if they do: complex
/// numbers, 8-, 6- and 4-bit floats, tf32 and x87/quad floats have no
/// lowering there. In a function's signature, a memref of index is refused
/// too: an index in memory has no fixed width for a caller to pass (inside
/// a body, the lowerings' own buffers of indices are fine).
std::string unsupportedType(Type type, bool inSignature) {
  if (auto shaped = dyn_cast<ShapedType>(type)) {
    if (inSignature && isa<MemRefType, UnrankedMemRefType>(type) &&
        shaped.getElementType().isIndex())
      return "memrefs of index in a function's signature";
    if (!fitsInMemory(shaped))
      return "values of more than 2^" + std::to_string(kMaxValueBytesLog2) +
             " bytes";
    return unsupportedType(shaped.getElementType(), inSignature);
  }
  if (isa<ComplexType>(type))
    return "complex numbers";
  if (auto floatType = dyn_cast<FloatType>(type))
    if (!isa<Float16Type, BFloat16Type, Float32Type, Float64Type>(floatType)) {
      std::string name;
      llvm::raw_string_ostream(name) << type;
      return "floating-point type " + name;
    }
  return "";
}

/// The first type `op` defines or takes (its results, its regions' block
/// arguments, a function's signature) that the pipelines do not take.
LogicalResult checkTypes(Operation *op) {
  auto check = [&](TypeRange types, bool inSignature) -> LogicalResult {
    for (Type type : types)
      if (std::string why = unsupportedType(type, inSignature); !why.empty())
        return op->emitOpError()
               << "uses " << type << ": fff's pipelines take no " << why;
    return success();
  };
  if (auto function = dyn_cast<FunctionOpInterface>(op))
    if (failed(check(function.getArgumentTypes(), true)) ||
        failed(check(function.getResultTypes(), true)))
      return failure();
  if (failed(check(op->getResultTypes(), false)))
    return failure();
  for (Region &region : op->getRegions())
    for (Block &block : region)
      if (failed(check(block.getArgumentTypes(), false)))
        return failure();
  return success();
}

struct CheckInputPass : fff::impl::CheckInputBase<CheckInputPass> {
  void runOnOperation() override {
    WalkResult result = getOperation()->walk([](Operation *op) {
      if (failed(checkTypes(op)))
        return WalkResult::interrupt();
      LogicalResult checked =
          llvm::TypeSwitch<Operation *, LogicalResult>(op)
              .Case([](tensor::DimOp dim) {
                return checkDimIndex(dim, dim.getSource(), dim.getIndex());
              })
              .Case([](memref::DimOp dim) {
                return checkDimIndex(dim, dim.getSource(), dim.getIndex());
              })
              .Case([](tensor::ExpandShapeOp expand) {
                return checkExpandShape(expand);
              })
              .Case([](memref::ExpandShapeOp expand) {
                return checkExpandShape(expand);
              })
              .Case([](tensor::CollapseShapeOp collapse) {
                return checkReassociation(collapse,
                                          collapse.getReassociationIndices(),
                                          collapse.getSrcType().getRank());
              })
              .Default([](Operation *) { return success(); });
      return failed(checked) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

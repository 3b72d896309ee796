//===- CheckEntryBuffers.cpp - check buffers at public entry points -------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace fff {
#define GEN_PASS_DEF_CHECKENTRYBUFFERS
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// The type that reads a memref descriptor as given: every extent, stride
/// and the offset dynamic. Its descriptor has the same layout as `type`'s.
MemRefType openType(MemRefType type) {
  SmallVector<int64_t> shape(type.getRank(), ShapedType::kDynamic);
  SmallVector<int64_t> strides(type.getRank(), ShapedType::kDynamic);
  auto layout =
      StridedLayoutAttr::get(type.getContext(), ShapedType::kDynamic, strides);
  return MemRefType::get(shape, type.getElementType(), layout,
                         type.getMemorySpace());
}

/// Checks one argument's descriptor, read through its open type, against
/// its declared identity-layout type, and views it as that type.
class DescriptorChecker {
public:
  DescriptorChecker(ImplicitLocOpBuilder &b, StringRef function, unsigned index,
                    MemRefType declared, Value buffer)
      : b(b), declared(declared), buffer(buffer) {
    llvm::raw_string_ostream os(prefix);
    os << "@" << function << ": argument #" << index << " (" << declared
       << ") ";
  }

  void emitChecks(unsigned alignment) {
    auto metadata = memref::ExtractStridedMetadataOp::create(b, buffer);
    sizes = llvm::to_vector_of<Value>(metadata.getSizes());
    for (auto [dim, size] : llvm::enumerate(sizes)) {
      if (declared.isDynamicDim(dim))
        check(cmp(arith::CmpIPredicate::sge, size, index(0)),
              "has a negative size in dim " + Twine(dim));
      else
        check(cmp(arith::CmpIPredicate::eq, size,
                  index(declared.getDimSize(dim))),
              "has dim " + Twine(dim) + " of size other than " +
                  Twine(declared.getDimSize(dim)));
    }
    Value elements = index(1);
    for (Value size : sizes)
      elements = arith::MulIOp::create(b, elements, size);
    Value empty = cmp(arith::CmpIPredicate::eq, elements, index(0));

    // The code reads an identity layout from the aligned pointer and
    // ignores the offset field, so a view must be passed by its first
    // element's address.
    check(cmp(arith::CmpIPredicate::eq, metadata.getOffset(), index(0)),
          "has a nonzero offset; pass the address of its first element");
    Value contiguous = boolean(true);
    Value expected = index(1);
    for (int64_t dim = declared.getRank() - 1; dim >= 0; --dim) {
      // Like torch's is_contiguous, the stride of a unit dim is not looked at.
      Value unit = cmp(arith::CmpIPredicate::eq, sizes[dim], index(1));
      Value packed =
          cmp(arith::CmpIPredicate::eq, metadata.getStrides()[dim], expected);
      contiguous = arith::AndIOp::create(b, contiguous,
                                         arith::OrIOp::create(b, unit, packed));
      expected = arith::MulIOp::create(b, expected, sizes[dim]);
    }
    check(arith::OrIOp::create(b, empty, contiguous),
          "is not contiguous in row-major order");

    Value address = memref::ExtractAlignedPointerAsIndexOp::create(b, buffer);
    Value isNull = cmp(arith::CmpIPredicate::eq, address, index(0));
    check(arith::OrIOp::create(b, empty,
                               arith::XOrIOp::create(b, isNull, boolean(true))),
          "is a null pointer but not empty");
    int64_t elementBytes =
        declared.getElementType().getIntOrFloatBitWidth() / 8;
    int64_t required = alignment ? alignment : elementBytes;
    if (required > 1)
      check(cmp(arith::CmpIPredicate::eq,
                arith::RemUIOp::create(b, address, index(required)), index(0)),
            "is not " + Twine(required) + "-byte aligned");
  }

  /// The buffer as its declared type, which the checks have confirmed. (A
  /// `memref.cast` would not do: loads and stores fold casts of their
  /// operands away, and with them the declared type.)
  Value typedView() {
    int64_t rank = declared.getRank();
    SmallVector<OpFoldResult> viewSizes(rank), viewStrides(rank);
    OpFoldResult stride = b.getIndexAttr(1);
    for (int64_t dim = rank - 1; dim >= 0; --dim) {
      viewSizes[dim] =
          declared.isDynamicDim(dim)
              ? OpFoldResult(sizes[dim])
              : OpFoldResult(b.getIndexAttr(declared.getDimSize(dim)));
      viewStrides[dim] = stride;
      stride = multiply(stride, viewSizes[dim]);
    }
    return memref::ReinterpretCastOp::create(
        b, declared, buffer, b.getIndexAttr(0), viewSizes, viewStrides);
  }

private:
  OpFoldResult multiply(OpFoldResult lhs, OpFoldResult rhs) {
    std::optional<int64_t> l = getConstantIntValue(lhs);
    std::optional<int64_t> r = getConstantIntValue(rhs);
    if (l && r)
      return b.getIndexAttr(*l * *r);
    return arith::MulIOp::create(
               b, getValueOrCreateConstantIndexOp(b, b.getLoc(), lhs),
               getValueOrCreateConstantIndexOp(b, b.getLoc(), rhs))
        .getResult();
  }
  Value index(int64_t value) {
    return arith::ConstantIndexOp::create(b, value);
  }
  Value boolean(bool value) {
    return arith::ConstantIntOp::create(b, value, 1);
  }
  Value cmp(arith::CmpIPredicate predicate, Value lhs, Value rhs) {
    return arith::CmpIOp::create(b, predicate, lhs, rhs);
  }
  void check(Value holds, const Twine &rule) {
    cf::AssertOp::create(b, holds, (prefix + rule).str());
  }

  ImplicitLocOpBuilder &b;
  MemRefType declared;
  Value buffer;
  SmallVector<Value> sizes;
  std::string prefix;
};

/// Opens each identity-layout memref argument of `function` and checks it
/// at the entry. Open arguments were checked by an earlier run.
void checkArguments(func::FuncOp function, unsigned alignment) {
  Block &entry = function.front();
  ImplicitLocOpBuilder b(function.getLoc(), OpBuilder::atBlockBegin(&entry));
  SmallVector<Type> argumentTypes(function.getArgumentTypes());
  for (BlockArgument argument : entry.getArguments()) {
    auto declared = dyn_cast<MemRefType>(argument.getType());
    if (!declared || !declared.getLayout().isIdentity() ||
        !declared.getElementType().isIntOrFloat())
      continue;
    SmallVector<OpOperand *> uses = llvm::map_to_vector(
        argument.getUses(), [](OpOperand &use) { return &use; });
    MemRefType open = openType(declared);
    argument.setType(open);
    argumentTypes[argument.getArgNumber()] = open;
    DescriptorChecker checker(b, function.getSymName(), argument.getArgNumber(),
                              declared, argument);
    checker.emitChecks(alignment);
    Value typed = checker.typedView();
    for (OpOperand *use : uses)
      use->set(typed);
  }
  function.setType(FunctionType::get(function.getContext(), argumentTypes,
                                     function.getResultTypes()));
}

/// Checks that each returned allocation has the extents it was allocated
/// with, which matters once the allocation becomes a caller's buffer.
void tieReturnedAllocations(func::FuncOp function) {
  function.walk([&](func::ReturnOp ret) {
    for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
      auto alloc = value.getDefiningOp<memref::AllocOp>();
      if (!alloc)
        continue;
      ImplicitLocOpBuilder b(alloc.getLoc(), alloc->getContext());
      b.setInsertionPointAfter(alloc);
      MemRefType type = alloc.getType();
      unsigned next = 0;
      for (int64_t dim = 0; dim < type.getRank(); ++dim) {
        if (!type.isDynamicDim(dim))
          continue;
        Value extent = memref::DimOp::create(b, alloc, dim);
        Value holds = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, extent,
                                            alloc.getDynamicSizes()[next++]);
        cf::AssertOp::create(b, holds,
                             ("@" + function.getSymName() +
                              ": the buffer for result #" + Twine(index) +
                              " has the wrong size in dim " + Twine(dim))
                                 .str());
      }
    }
  });
}

struct CheckEntryBuffersPass
    : fff::impl::CheckEntryBuffersBase<CheckEntryBuffersPass> {
  using CheckEntryBuffersBase::CheckEntryBuffersBase;

  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (function.isExternal() || !function.isPublic())
        continue;
      checkArguments(function, alignment);
      tieReturnedAllocations(function);
    }
  }
};

} // namespace

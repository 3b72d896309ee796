//===- ShapeContract.cpp - how an op's operand extents relate ---*- C++ -*-===//

#include "fff/Dialect/FFF/IR/ShapeContract.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace fff;

std::string ShapeContract::DimUse::describe() const {
  return (operand + " dim " + Twine(dim)).str();
}

ShapeContract::Symbol &ShapeContract::lookup(StringRef name) {
  auto it = llvm::find_if(symbolList,
                          [&](const Symbol &s) { return s.name == name; });
  if (it != symbolList.end())
    return *it;
  symbolList.push_back(Symbol{name.str(), {}, std::nullopt, "", 0, ""});
  return symbolList.back();
}

void ShapeContract::bind(StringRef operand, Value value,
                         ArrayRef<StringRef> symbols) {
  if (!value)
    return;
  for (auto [dim, symbol] : llvm::enumerate(symbols))
    if (!symbol.empty())
      lookup(symbol).uses.push_back(
          DimUse{operand.str(), value, static_cast<unsigned>(dim)});
}

void ShapeContract::require(StringRef symbol, int64_t value,
                            const Twine &reason) {
  Symbol &s = lookup(symbol);
  s.required = value;
  s.requiredBy = reason.str();
}

void ShapeContract::requireAtLeast(StringRef symbol, int64_t minimum,
                                   const Twine &reason) {
  Symbol &s = lookup(symbol);
  s.minimum = minimum;
  s.minimumReason = reason.str();
}

static std::optional<int64_t> staticExtent(const ShapeContract::DimUse &use) {
  auto type = cast<ShapedType>(use.value.getType());
  if (type.isDynamicDim(use.dim))
    return std::nullopt;
  return type.getDimSize(use.dim);
}

LogicalResult ShapeContract::verify(Operation *op) const {
  for (const Symbol &symbol : symbolList) {
    std::optional<int64_t> bound = symbol.required;
    std::string boundBy = symbol.requiredBy;
    for (const DimUse &use : symbol.uses) {
      std::optional<int64_t> extent = staticExtent(use);
      if (!extent)
        continue;
      if (!bound) {
        bound = extent;
        boundBy = use.describe();
        continue;
      }
      if (*extent != *bound)
        return op->emitOpError()
               << use.describe() << " (" << symbol.name << ") is " << *extent
               << ", but " << boundBy << " requires " << *bound;
    }
    if (!bound || *bound >= symbol.minimum)
      continue;
    const DimUse &first = *llvm::find_if(
        symbol.uses, [](const DimUse &use) { return staticExtent(use); });
    return op->emitOpError() << first.describe() << " (" << symbol.name
                             << ") is " << *bound << ", but must be at least "
                             << symbol.minimum << ": " << symbol.minimumReason;
  }
  return success();
}

//===- InsertShapeChecks.cpp - run-time checks of shape contracts -*- C++
//-*-===//
//
// The verifiers check each op's shape contract on static extents; this pass
// checks the dynamic ones when the program runs, with a `cf.assert` per
// rule, so that a gamma of the wrong length or a tree of the wrong size is
// an error instead of a wrong answer or an out-of-bounds read.
//
//===----------------------------------------------------------------------===//

#include "fff/Dialect/FFF/Transforms/Passes.h"

#include "fff/Dialect/FFF/IR/FFFOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace fff {
#define GEN_PASS_DEF_INSERTSHAPECHECKS
#include "fff/Dialect/FFF/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// The value outside any fused unit, as early as can be, that has the
/// extents of `value`: a unit's block argument stands for the unit's input,
/// and what is computed elementwise has the extents of its operands (or its
/// destination). The checks read that value's extents rather than the
/// result's: a tensor.dim of dy = grad * mask would be a second user of the
/// product and keep it out of the norm backward's fused unit. Null when
/// there is no such value.
Value extentSource(Value value) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      auto unit = dyn_cast_if_present<FusionOp>(arg.getOwner()->getParentOp());
      if (!unit)
        return value;
      value = unit.getInputs()[arg.getArgNumber()];
      continue;
    }
    Operation *def = value.getDefiningOp();
    if (auto dps = dyn_cast<DestinationStyleOpInterface>(def)) {
      value = dps.getTiedOpOperand(cast<OpResult>(value))->get();
      continue;
    }
    // An elementwise op's shaped operands have its result's shape; a
    // scalar operand (select's condition) has none.
    auto shaped =
        def->hasTrait<OpTrait::Elementwise>()
            ? llvm::find_if(def->getOperands(),
                            [](Value operand) {
                              return isa<ShapedType>(operand.getType());
                            })
            : def->operand_end();
    if (shaped != def->operand_end()) {
      value = *shaped;
      continue;
    }
    return isa_and_present<FusionOp>(def->getParentOp()) ? Value() : value;
  }
}

/// "file:line:col: " for the first file location in `loc`, or "".
std::string locationPrefix(Location loc) {
  std::string prefix;
  loc->walk([&](Location inner) {
    auto file = dyn_cast<FileLineColLoc>(inner);
    if (!file)
      return WalkResult::advance();
    prefix = (file.getFilename().getValue() + ":" + Twine(file.getLine()) +
              ":" + Twine(file.getColumn()) + ": ")
                 .str();
    return WalkResult::interrupt();
  });
  return prefix;
}

/// Emits the checks of one op's contract.
class ContractChecker {
public:
  ContractChecker(Operation *op, const ShapeContract &contract)
      : op(op), contract(contract),
        messagePrefix(locationPrefix(op->getLoc()) + "'" +
                      op->getName().getStringRef().str() + "' op ") {}

  /// Whether every extent the checks read is a function argument's, so that
  /// they can run at the function's entry, before any other work.
  bool readsOnlyArguments(Block *entry) const {
    for (const ShapeContract::Symbol &symbol : contract.symbols())
      for (const ShapeContract::DimUse &use : symbol.uses) {
        Value source = extentSource(use.value);
        if (source && !isStatic(use) &&
            !(isa<BlockArgument>(source) && source.getParentBlock() == entry))
          return false;
      }
    return true;
  }

  void emit(ImplicitLocOpBuilder &b) {
    for (const ShapeContract::Symbol &symbol : contract.symbols())
      emitSymbol(b, symbol);
  }

private:
  static bool isStatic(const ShapeContract::DimUse &use) {
    return !cast<ShapedType>(use.value.getType()).isDynamicDim(use.dim);
  }

  void emitSymbol(ImplicitLocOpBuilder &b,
                  const ShapeContract::Symbol &symbol) {
    // What every dynamic extent must equal: the value an attribute fixes,
    // else a static extent, else the first dynamic one.
    std::optional<int64_t> known = symbol.required;
    std::string knownBy = symbol.requiredBy;
    for (const ShapeContract::DimUse &use : symbol.uses)
      if (!known && isStatic(use)) {
        known = cast<ShapedType>(use.value.getType()).getDimSize(use.dim);
        knownBy = use.describe();
      }
    // The first dynamic extent, read only once a rule needs it.
    Value referenceSource;
    const ShapeContract::DimUse *referenceUse = nullptr;
    Value reference;
    auto readReference = [&] {
      if (!reference)
        reference =
            tensor::DimOp::create(b, referenceSource, referenceUse->dim);
      return reference;
    };
    for (const ShapeContract::DimUse &use : symbol.uses) {
      if (isStatic(use))
        continue;
      Value source = extentSource(use.value);
      if (!source)
        continue;
      if (!known && !referenceUse) {
        referenceSource = source;
        referenceUse = &use;
        continue;
      }
      Value extent = tensor::DimOp::create(b, source, use.dim);
      std::string subject = use.describe() + " (" + symbol.name + ")";
      if (known)
        check(b, arith::CmpIPredicate::eq, extent, *known,
              subject + " is not " + std::to_string(*known) + ", which " +
                  knownBy + " requires");
      else
        check(b, arith::CmpIPredicate::eq, extent, readReference(),
              subject + " does not match " + referenceUse->describe());
    }
    if (referenceUse && symbol.minimum > 0)
      check(b, arith::CmpIPredicate::sge, readReference(), symbol.minimum,
            referenceUse->describe() + " (" + symbol.name + ") is below " +
                std::to_string(symbol.minimum) + ": " + symbol.minimumReason);
  }

  void check(ImplicitLocOpBuilder &b, arith::CmpIPredicate predicate,
             Value extent, int64_t expected, const std::string &message) {
    check(b, predicate, extent, arith::ConstantIndexOp::create(b, expected),
          message);
  }
  void check(ImplicitLocOpBuilder &b, arith::CmpIPredicate predicate,
             Value extent, Value expected, const std::string &message) {
    Value holds = arith::CmpIOp::create(b, predicate, extent, expected);
    cf::AssertOp::create(b, holds, messagePrefix + message);
  }

  Operation *op;
  const ShapeContract &contract;
  std::string messagePrefix;
};

struct InsertShapeChecksPass
    : fff::impl::InsertShapeChecksBase<InsertShapeChecksPass> {
  void runOnOperation() override {
    // Checks that run at a function's entry go after the ones already
    // there, so that they read in program order.
    DenseMap<Block *, Operation *> lastEntryCheck;
    getOperation()->walk([&](ShapeContractOpInterface op) {
      ShapeContract contract = op.getShapeContract();
      ContractChecker checker(op, contract);
      auto function = op->getParentOfType<FunctionOpInterface>();
      Block *entry = function && !function.isExternal()
                         ? &function.getFunctionBody().front()
                         : nullptr;
      OpBuilder builder(op);
      if (auto unit = op->getParentOfType<FusionOp>())
        builder.setInsertionPoint(unit);
      bool atEntry = entry && checker.readsOnlyArguments(entry);
      if (atEntry) {
        Operation *last = lastEntryCheck.lookup(entry);
        if (last)
          builder.setInsertionPointAfter(last);
        else
          builder.setInsertionPointToStart(entry);
      }
      ImplicitLocOpBuilder b(op->getLoc(), builder);
      checker.emit(b);
      if (atEntry && b.getInsertionPoint() != entry->begin())
        lastEntryCheck[entry] = &*std::prev(b.getInsertionPoint());
    });
  }
};

} // namespace

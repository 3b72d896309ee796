//===- IdenticalOps.cpp - ops that do the same work on other values -------===//

#include "fff/Transforms/IdenticalOps.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;

SmallVector<unsigned> fff::kindsOfIdenticalOps(ArrayRef<Operation *> ops) {
  auto hashOf = [](Operation *op) {
    llvm::hash_code hash = llvm::hash_combine_range(op->getOperandTypes());
    op->walk([&](Operation *nested) {
      hash = llvm::hash_combine(
          hash, OperationEquivalence::computeHash(
                    nested, OperationEquivalence::ignoreHashValue,
                    OperationEquivalence::ignoreHashValue,
                    OperationEquivalence::IgnoreLocations));
    });
    return hash;
  };
  // Values inside the two ops must correspond; the ops' own operands (of
  // equal types) may be any values.
  auto identical = [](Operation *a, Operation *b) {
    if (a->getOperandTypes() != b->getOperandTypes())
      return false;
    DenseMap<Value, Value> inside;
    auto correspond = [&](Value l, Value r) -> LogicalResult {
      if (auto mapped = inside.find(l); mapped != inside.end())
        return success(mapped->second == r);
      if (a->isAncestor(l.getParentRegion()->getParentOp()) ||
          b->isAncestor(r.getParentRegion()->getParentOp()))
        return failure();
      Attribute lConstant, rConstant;
      bool lIsConstant = matchPattern(l, m_Constant(&lConstant));
      bool rIsConstant = matchPattern(r, m_Constant(&rConstant));
      return success(l.getType() == r.getType() && lIsConstant == rIsConstant &&
                     lConstant == rConstant);
    };
    return OperationEquivalence::isEquivalentTo(
        a, b, correspond, [&](Value l, Value r) { inside[l] = r; },
        OperationEquivalence::IgnoreLocations);
  };
  SmallVector<unsigned> kinds;
  DenseMap<llvm::hash_code, SmallVector<unsigned, 1>> firsts;
  for (auto [index, op] : llvm::enumerate(ops)) {
    kinds.push_back(index);
    SmallVector<unsigned, 1> &candidates = firsts[hashOf(op)];
    auto first = llvm::find_if(
        candidates, [&](unsigned other) { return identical(op, ops[other]); });
    if (first != candidates.end())
      kinds.back() = *first;
    else
      candidates.push_back(index);
  }
  return kinds;
}

std::pair<func::FuncOp, Operation *>
fff::outlineOp(OpBuilder &b, SymbolTable &symbols, ModuleOp module,
               Operation *op, StringRef name, ValueRange captured,
               ValueRange constants) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  SmallVector<Type> parameters(op->getOperandTypes());
  llvm::append_range(parameters, captured.getTypes());
  auto function =
      func::FuncOp::create(b, op->getLoc(), name,
                           b.getFunctionType(parameters, op->getResultTypes()));
  function.setPrivate();
  symbols.insert(function); // renames it if the name is taken
  Block *body = function.addEntryBlock();
  b.setInsertionPointToStart(body);
  IRMapping mapping;
  mapping.map(op->getOperands(),
              body->getArguments().take_front(op->getNumOperands()));
  mapping.map(captured, body->getArguments().drop_front(op->getNumOperands()));
  for (Value constant : constants)
    mapping.map(constant, b.clone(*constant.getDefiningOp())->getResult(0));
  Operation *copy = b.clone(*op, mapping);
  func::ReturnOp::create(b, op->getLoc(), copy->getResults());
  return {function, copy};
}

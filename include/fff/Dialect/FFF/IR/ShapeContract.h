//===- ShapeContract.h - how an op's operand extents relate -----*- C++ -*-===//
//
// An fff op ties the extents of its operands together: tree_ffn's input is
// [B, Din] and its w_in [K, N, Din], so the two Din agree, and the depth
// fixes N. A ShapeContract states these rules once, as symbols bound to
// operand dims. The op verifiers check them on static extents;
// fff-insert-shape-checks checks the dynamic ones when the program runs.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_DIALECT_FFF_IR_SHAPECONTRACT_H
#define FFF_DIALECT_FFF_IR_SHAPECONTRACT_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/LogicalResult.h"

#include <optional>
#include <string>

namespace fff {

class ShapeContract {
public:
  /// One operand dim bound to a symbol.
  struct DimUse {
    /// The operand's name in messages, e.g. "w_in".
    std::string operand;
    mlir::Value value;
    unsigned dim;

    /// "w_in dim 2": where an extent comes from, in messages.
    std::string describe() const;
  };

  /// A named extent and every operand dim that must equal it.
  struct Symbol {
    std::string name;
    llvm::SmallVector<DimUse> uses;
    /// The value an attribute fixes, and why ("depth 3 (N = 2^(depth+1)-1)").
    std::optional<int64_t> required;
    std::string requiredBy;
    /// The least extent that makes sense, and why nothing less does.
    int64_t minimum = 0;
    std::string minimumReason;
  };

  /// Binds dim i of `value`, named `operand` in messages, to `symbols[i]`;
  /// an empty symbol leaves that dim free. A null `value` (an absent
  /// optional operand) binds nothing.
  void bind(llvm::StringRef operand, mlir::Value value,
            llvm::ArrayRef<llvm::StringRef> symbols);
  /// `symbol` must equal `value`, as `reason` (an attribute) implies.
  void require(llvm::StringRef symbol, int64_t value,
               const llvm::Twine &reason);
  /// `symbol` must be at least `minimum`; `reason` says why.
  void requireAtLeast(llvm::StringRef symbol, int64_t minimum,
                      const llvm::Twine &reason);

  /// Checks the rules on the static extents and reports the first broken
  /// one as an error on `op`.
  llvm::LogicalResult verify(mlir::Operation *op) const;

  /// Symbols in the order they were first mentioned.
  llvm::ArrayRef<Symbol> symbols() const { return symbolList; }

private:
  Symbol &lookup(llvm::StringRef name);

  llvm::SmallVector<Symbol> symbolList;
};

} // namespace fff

#endif // FFF_DIALECT_FFF_IR_SHAPECONTRACT_H

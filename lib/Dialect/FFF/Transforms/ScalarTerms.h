//===- ScalarTerms.h - tensor values as scalar expressions ------*- C++ -*-===//
//
// The raising pass reads the value an elementwise linalg.generic computes as
// a Term: a scalar expression over the op's iteration space whose leaves are
// tensors read through affine maps. It looks through elementwise producers,
// row sums (one result of a reduction, possibly among several), reshapes
// that add or drop unit dims, and float casts, so that a norm written across
// many ops, or fused into few, reads the same.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_DIALECT_FFF_TRANSFORMS_SCALARTERMS_H
#define FFF_LIB_DIALECT_FFF_TRANSFORMS_SCALARTERMS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineMap.h"
#include "llvm/ADT/DenseMap.h"

#include <deque>

namespace fff {

/// A scalar computed at every point of the root op's iteration space.
struct Term {
  enum class Kind {
    Input,
    Constant,
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Rsqrt,
    Sqrt,
    RowSum
  };
  Kind kind;
  mlir::Value tensor; // Input: read at `map` (root dims -> tensor dims)
  mlir::AffineMap map;
  double constant = 0; // Constant
  int64_t reduced = 0; // RowSum: over the trailing `reduced` root dims
  llvm::SmallVector<Term *, 2> operands;
  /// Every (tensor, map) whose read is this Term: the op results it was
  /// rebuilt from, through casts and reshapes, and for an Input its own
  /// tensor. A raised op takes its operands from these.
  llvm::SmallVector<std::pair<mlir::Value, mlir::AffineMap>, 1> origins;

  bool is(Kind k) const { return kind == k; }
  Term *operand(unsigned i) const { return operands[i]; }
};

/// Rebuilds the value of tensors as Terms; null where the IR is not a
/// supported shape (a cast to an integer, a non-zero initial sum, ...).
class TermBuilder {
public:
  /// `tensor` read at `map` from the root's iteration space. Shared
  /// producers are built once (the Terms form a DAG), and a root whose
  /// expression grows past a budget is not a norm worth the time.
  Term *read(mlir::Value tensor, mlir::AffineMap map);

private:
  static constexpr size_t kMaxTerms = 4096;
  /// x^n is read as a product for whole n up to this.
  static constexpr int64_t kMaxPowExponent = 4;

  Term *readUncached(mlir::Value tensor, mlir::AffineMap map);
  Term *readElementwise(mlir::OpResult result, mlir::AffineMap map);
  Term *readThroughUnitDims(mlir::tensor::ExpandShapeOp expand,
                            mlir::AffineMap map);
  Term *readThroughUnitDims(mlir::tensor::CollapseShapeOp collapse,
                            mlir::AffineMap map);
  Term *readRowSum(mlir::OpResult result, mlir::AffineMap map);
  Term *fromBody(mlir::linalg::GenericOp op, mlir::Value value,
                 llvm::ArrayRef<Term *> args);

  Term *make(Term::Kind kind, llvm::ArrayRef<Term *> operands = {});
  Term *constant(double value);
  Term *input(mlir::Value tensor, mlir::AffineMap map);

  std::deque<Term> storage;
  llvm::DenseMap<std::pair<void *, const void *>, Term *> memo;
};

/// Structural equality (Add and Mul commute); constants agree to 1e-6.
bool equal(const Term *a, const Term *b);

/// Whether two constants are the same up to the rounding of an f32 or f64
/// spelling of one value.
bool sameConstant(double a, double b);

} // namespace fff

#endif // FFF_LIB_DIALECT_FFF_TRANSFORMS_SCALARTERMS_H
